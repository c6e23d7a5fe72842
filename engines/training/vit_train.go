package training

import (
	"fmt"
	"math"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
)

// NewClassifierTrainer builds the training graph of an image model (NewViT) for batches of B
// images: the class logits, their mean cross entropy against the labels, the backward and
// AdamW. Step it with StepImages.
func NewClassifierTrainer(m Trainable, B int, opts ...TrainerOption) (*Trainer, error) {
	t := m.trainable()
	if t.arch.Input != transformer.InputPatches {
		return nil, fmt.Errorf("training: a classifier trainer for the %s model, which reads tokens", t.arch.Name)
	}
	return newTrainer(m, t.arch.Context, B, false, false, opts...)
}

// StepImages trains on one batch of B images with the given AdamW parameters (as Step) and
// returns the batch's mean cross entropy before the update and how many images the model
// classified correctly (the argmax of their logits is the label).
func (tr *Trainer) StepImages(b *train.ClassificationBatch, decay, noDecay [7]float32) (loss float32, correct int, err error) {
	if tr.img == nil {
		return 0, 0, fmt.Errorf("training: StepImages on a trainer of a token model (use Step)")
	}
	if err := tr.img.Upload(b); err != nil {
		return 0, 0, err
	}
	if err := tr.decay.SetF32(decay[:]); err != nil {
		return 0, 0, err
	}
	if err := tr.noDecay.SetF32(noDecay[:]); err != nil {
		return 0, 0, err
	}
	share, err := tr.seedShare(1, 1)
	if err != nil {
		return 0, 0, err
	}
	if err := tr.m.backend.Compute(tr.graph); err != nil {
		return 0, 0, err
	}
	l, err := tr.loss.F32()
	if err != nil {
		return 0, 0, err
	}
	logits, err := tr.logits.F32()
	if err != nil {
		return 0, 0, err
	}
	correct = CountCorrect(logits, b.Labels, tr.m.arch.Vocab)
	if tr.dp != nil { // the replicas' mean loss; correct stays this replica's
		if l[0], err = tr.dp.step(tr.m.backend, l[0]*share); err != nil {
			return 0, 0, err
		}
	}
	tr.gradNormSq = 0
	if err := tr.addGradNorm(&tr.norm); err != nil {
		return 0, 0, err
	}
	return l[0], correct, tr.checkStep(l[0])
}

// CountCorrect counts the rows of logits [classes, n] whose argmax is the label.
func CountCorrect(logits []float32, labels []int32, classes int) int {
	n := 0
	for i, l := range labels {
		if Argmax(logits[i*classes:(i+1)*classes]) == int(l) {
			n++
		}
	}
	return n
}

// Argmax is the index of the largest value (the first of equals).
func Argmax(row []float32) int {
	best, bestV := 0, float32(math.Inf(-1))
	for i, v := range row {
		if v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// NewClassifierEvaluator builds the forward graph of an image model for batches of B images.
func NewClassifierEvaluator(m Trainable, B int) (*Evaluator, error) {
	t := m.trainable()
	if t.arch.Input != transformer.InputPatches {
		return nil, fmt.Errorf("evaluation: a classifier evaluator for the %s model, which reads tokens", t.arch.Name)
	}
	return newEvaluator(m, t.arch.Context, B, false, false)
}

// Classify runs a batch of B images and returns each image's class logits, the batch's mean
// cross entropy and the number classified correctly.
func (e *Evaluator) Classify(b *train.ClassificationBatch) (logits [][]float32, loss float32, correct int, err error) {
	if e.img == nil {
		return nil, 0, 0, fmt.Errorf("evaluation: Classify on an evaluator of a token model")
	}
	if err := e.img.Upload(b); err != nil {
		return nil, 0, 0, err
	}
	if err := e.m.backend.Compute(e.graph); err != nil {
		return nil, 0, 0, err
	}
	flat, err := e.logits.F32()
	if err != nil {
		return nil, 0, 0, err
	}
	l, err := e.loss.F32()
	if err != nil {
		return nil, 0, 0, err
	}
	k := e.m.arch.Vocab
	for i := 0; i < b.N; i++ {
		logits = append(logits, flat[i*k:(i+1)*k])
	}
	return logits, l[0], CountCorrect(flat, b.Labels, k), nil
}

// ClassLogits returns the class logits of any number of images (each PixelsPerImage floats),
// run B at a time (the last batch padded with blank images).
func (e *Evaluator) ClassLogits(images [][]float32) ([][]float32, error) {
	if e.img == nil {
		return nil, fmt.Errorf("evaluation: ClassLogits on an evaluator of a token model")
	}
	a := e.m.arch
	ppi := a.ImageSize * a.ImageSize * a.Channels
	var out [][]float32
	for start := 0; start < len(images); start += e.B {
		end := min(start+e.B, len(images))
		batch := append([][]float32(nil), images[start:end]...)
		for len(batch) < e.B {
			batch = append(batch, make([]float32, ppi))
		}
		b, err := train.NewClassificationBatch(batch, make([]int32, e.B), ppi, a.Vocab)
		if err != nil {
			return nil, fmt.Errorf("evaluation: image %d: %w", start, err)
		}
		logits, _, _, err := e.Classify(b)
		if err != nil {
			return nil, err
		}
		out = append(out, logits[:end-start]...)
	}
	return out, nil
}

// Softmax returns the probabilities of logits.
func Softmax(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	s := 0.0
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// ViTTrainFLOPs is the floating-point work of training on one image of a ViT of shape c:
// three times its forward's matrix products (the backward computes two products of each
// forward one's size), two FLOPs per multiply-add — the patch embedding, each block's QKV,
// output and MLP projections over the T = patches + 1 tokens and its attention scores and
// weighted sums (2·T²·d), and the head. Element-wise work (norms, GELU, softmax, AdamW) is
// not counted, as in the 6·parameters·tokens rule of language models.
func ViTTrainFLOPs(c config.Vit) float64 {
	n := c.ImageSize / c.PatchSize
	patches, d := float64(n*n), float64(c.DModel)
	t := patches + 1
	macs := patches*float64(c.PatchSize*c.PatchSize*c.Channels)*d +
		float64(c.NLayers)*(t*(4*d*d+2*d*float64(c.DFF))+2*t*t*d) +
		d*float64(c.Classes)
	return 3 * 2 * macs
}
