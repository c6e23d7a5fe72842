package recipes

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// ClassNamesKey is the GGUF key of a classifier checkpoint's class names (a string array, one
// per class, in label order).
const ClassNamesKey = "vit.class_names"

// ViT trains a ViT image classifier from random weights: AdamW with a cosine schedule on
// shuffled batches, the held-out loss and accuracy every EvalEvery steps, a run bundle
// (run_start with the model and this configuration, steps, evals with accuracy, run_end) and a
// GGUF checkpoint (runs.SaveCheckpoint: atomic, weights/model.gguf the latest) at the end or
// when ctx is cancelled.
type ViT struct {
	Model config.Vit `json:"model"`
	// Images is an ImageFolder directory, or an IDX images file with Labels its IDX labels;
	// empty with Shapes > 0: that many generated shapes (data.Shapes).
	Images string `json:"images"`
	Labels string `json:"labels,omitempty"`
	Shapes int    `json:"shapes,omitempty"`
	// Held is how many images are held out for evaluation.
	Held        int     `json:"held"`
	Steps       int     `json:"steps"`
	Batch       int     `json:"batch"`
	LR          float64 `json:"lr"`
	MinLR       float64 `json:"min_lr"`
	Warmup      int     `json:"warmup"`
	WeightDecay float64 `json:"weight_decay"`
	EvalEvery   int     `json:"eval_every"`
	// Seed orders the data and splits it; Model.Seed initialises the weights.
	Seed uint64 `json:"seed"`
	// Dir is the runs directory a new run is created in.
	Dir string `json:"-"`
	// Threads is the CPU backend's thread count (0: 1).
	Threads int       `json:"-"`
	Out     io.Writer `json:"-"`
}

// DefaultViT is the vit-mnist preset with settings that train it in minutes on a CPU.
func DefaultViT() ViT {
	m, _ := config.VitPreset("vit-mnist")
	return ViT{Model: m, Held: 2000, Steps: 1000, Batch: 64, LR: 2e-3, MinLR: 1e-4, Warmup: 50,
		WeightDecay: 0.05, EvalEvery: 250, Seed: 1}
}

// ViTResult is what a ViT run reached.
type ViTResult struct {
	RunDir, Checkpoint   string
	Steps                int
	Loss                 float64 // the last training step's
	HeldOutLoss          float64
	Accuracy             float64 // held-out
	ImagesPerS           float64
	TrainImages, HeldOut int
}

func (v *ViT) printf(format string, args ...any) {
	if v.Out != nil {
		fmt.Fprintf(v.Out, format, args...)
	}
}

// LoadImages reads the data set the recipe names, for a model of c.
func (v *ViT) LoadImages() (*data.Images, error) {
	o := data.ImageOptions{Size: v.Model.ImageSize, Channels: v.Model.Channels}
	switch {
	case v.Images == "" && v.Shapes > 0:
		return data.ShapesImages(v.Shapes, v.Model.ImageSize, v.Seed, o)
	case v.Labels != "":
		return data.ReadIDX(v.Images, v.Labels, v.Model.Classes, o)
	case v.Images != "":
		return data.ReadImageFolder(v.Images, nil, o)
	}
	return nil, fmt.Errorf("vit: no data: give an ImageFolder directory, IDX images and labels, or a number of shapes")
}

// Validate checks the options.
func (v *ViT) Validate() error {
	if err := llama.ValidateViT(v.Model); err != nil {
		return err
	}
	switch {
	case v.Steps < 1 || v.Batch < 1 || v.Held < 1:
		return fmt.Errorf("vit: steps %d, batch %d and held-out images %d must be positive", v.Steps, v.Batch, v.Held)
	case !(v.LR > 0) || v.MinLR < 0 || v.MinLR > v.LR || v.Warmup < 0 || v.Warmup >= v.Steps:
		return fmt.Errorf("vit: lr %g, min lr %g, warmup %d: want 0 ≤ min ≤ lr and warmup < steps %d", v.LR, v.MinLR, v.Warmup, v.Steps)
	case v.WeightDecay < 0:
		return fmt.Errorf("vit: weight decay %g", v.WeightDecay)
	}
	return nil
}

// Run trains the model and returns what it reached. A cancelled ctx saves the checkpoint and
// ends the run as interrupted.
func (v *ViT) Run(ctx context.Context) (*ViTResult, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	all, err := v.LoadImages()
	if err != nil {
		return nil, err
	}
	if all.Classes > v.Model.Classes {
		return nil, fmt.Errorf("vit: the data has %d classes, the model %d", all.Classes, v.Model.Classes)
	}
	if err := all.CheckClasses(v.Model.Classes); err != nil {
		return nil, err
	}
	trainSet, held, err := all.Split(v.Held, v.Seed)
	if err != nil {
		return nil, err
	}
	if trainSet.Len() < v.Batch {
		return nil, fmt.Errorf("vit: %d training images for batches of %d", trainSet.Len(), v.Batch)
	}
	names := all.ClassNames
	for len(names) < v.Model.Classes {
		names = append(names, fmt.Sprint(len(names)))
	}
	threads := v.Threads
	if threads <= 0 {
		// One thread: on a small model ggml's spinning barrier between two threads costs more
		// than it gains, by far on a busy 2-core machine (44 vs 3,000 images/s measured).
		threads = 1
	}
	be, err := ggml.NewCPUBackend(threads)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	m, err := llama.NewViT(v.Model, be)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := m.Init(); err != nil {
		return nil, err
	}
	tr, err := llama.NewClassifierTrainer(m, v.Batch)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	ev, err := llama.NewClassifierEvaluator(m, v.Batch)
	if err != nil {
		return nil, err
	}
	defer ev.Close()

	run, err := runs.Create(v.Dir, runs.NewID(time.Now(), nil))
	if err != nil {
		return nil, err
	}
	defer run.Close()
	if err := run.LogStart(runs.RunStart{Model: v.Model, Config: v,
		Seeds: map[string]uint64{"init": uint64(v.Model.Seed), "data": v.Seed}}); err != nil {
		return nil, err
	}
	v.printf("vit: %s, %d parameters; %d training images, %d held out, %d classes; run %s\n",
		describeViT(v.Model), m.Params(), trainSet.Len(), held.Len(), v.Model.Classes, run.Dir)

	opt := train.AdamW{LR: v.LR, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: v.WeightDecay, BiasCorrection: true, Mode: train.ModeTorch}
	sched := train.Cosine{Peak: v.LR, Min: v.MinLR, Warmup: v.Warmup, Total: v.Steps}
	rng := rand.New(rand.NewPCG(v.Seed, 0x766974))
	order, next := rng.Perm(trainSet.Len()), 0
	ppi := llama.PixelsPerImage(v.Model)
	res := &ViTResult{RunDir: run.Dir, TrainImages: trainSet.Len(), HeldOut: held.Len()}
	evaluate := func(step int) error {
		loss, acc, err := heldOut(ev, held)
		if err != nil {
			return err
		}
		res.HeldOutLoss, res.Accuracy = loss, acc
		v.printf("step %d: held-out loss %.4f, accuracy %.2f%%\n", step, loss, 100*acc)
		return run.LogEval(runs.Eval{Step: step, Loss: loss, Accuracy: &acc})
	}
	t0 := time.Now()
	reason, step := runs.ReasonDone, 0
	var trainTime time.Duration
	for ; step < v.Steps; step++ {
		if ctx.Err() != nil {
			reason = runs.ReasonInterrupted
			break
		}
		px, labels := make([][]float32, v.Batch), make([]int32, v.Batch)
		for i := range px {
			if next == len(order) {
				order, next = rng.Perm(trainSet.Len()), 0
			}
			px[i], labels[i] = trainSet.Pixels[order[next]], trainSet.Labels[order[next]]
			next++
		}
		b, err := train.NewClassificationBatch(px, labels, ppi, v.Model.Classes)
		if err != nil {
			return nil, err
		}
		lr := sched.LR(step)
		decay, err := opt.Params(step, lr, true)
		if err != nil {
			return nil, err
		}
		noDecay, err := opt.Params(step, lr, false)
		if err != nil {
			return nil, err
		}
		ts := time.Now()
		loss, _, err := tr.StepImages(b, decay, noDecay)
		if err != nil {
			return nil, err
		}
		trainTime += time.Since(ts)
		if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
			return nil, fmt.Errorf("vit: step %d: the loss is %g", step+1, loss)
		}
		res.Loss = float64(loss)
		ips := float64((step+1)*v.Batch) / trainTime.Seconds()
		if err := run.LogStep(runs.Step{Step: step + 1, Loss: float64(loss), LR: lr, TokensPerS: ips}); err != nil {
			return nil, err
		}
		if (step+1)%max(v.EvalEvery, 1) == 0 || step+1 == v.Steps {
			eta := time.Duration(float64(time.Since(t0)) / float64(step+1) * float64(v.Steps-step-1)).Round(time.Second)
			v.printf("step %d/%d loss %.4f lr %.2e %.0f images/s ETA %s\n", step+1, v.Steps, loss, lr, ips, eta)
			if step+1 < v.Steps {
				if err := evaluate(step + 1); err != nil {
					return nil, err
				}
			}
		}
	}
	res.Steps = step
	if step > 0 {
		res.ImagesPerS = float64(step*v.Batch) / trainTime.Seconds()
	}
	if err := evaluate(step); err != nil {
		return nil, err
	}
	ck, err := run.SaveCheckpoint(step, func(dir string) error {
		return m.Save(filepath.Join(dir, "model.gguf"), []llama.KV{{Key: ClassNamesKey, Value: names},
			{Key: "general.name", Value: "toy vit"}})
	}, "model.gguf")
	if err != nil {
		return nil, err
	}
	res.Checkpoint = ck.Path("model.gguf")
	if err := run.LogEnd(runs.RunEnd{Step: step, Loss: res.Loss, Reason: reason}); err != nil {
		return nil, err
	}
	v.printf("vit: %d steps, held-out accuracy %.2f%%, %.0f images/s; checkpoint %s\n", step, 100*res.Accuracy, res.ImagesPerS, res.Checkpoint)
	return res, nil
}

func describeViT(c config.Vit) string {
	return fmt.Sprintf("ViT %d×%d×%d, patch %d, d %d, %d heads, MLP %d, %d layers", c.ImageSize, c.ImageSize, c.Channels,
		c.PatchSize, c.DModel, c.NHeads, c.DFF, c.NLayers)
}

// heldOut is the mean cross entropy and the accuracy of the classifier on images.
func heldOut(ev *llama.Evaluator, im *data.Images) (loss, acc float64, err error) {
	logits, err := ev.ClassLogits(im.Pixels)
	if err != nil {
		return 0, 0, err
	}
	correct := 0
	for i, row := range logits {
		p := llama.Softmax(row)
		loss -= math.Log(math.Max(p[im.Labels[i]], 1e-300))
		if llama.Argmax(row) == int(im.Labels[i]) {
			correct++
		}
	}
	n := float64(len(logits))
	return loss / n, float64(correct) / n, nil
}
