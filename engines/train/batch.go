package train

import (
	"fmt"
	"math"
)

// Batch is a validated next-token training batch of B sequences. Each sequence holds T+1
// token ids: its inputs are [:T] and its targets [1:], so position t is trained to
// predict the id at t+1. Build it with NewBatch and treat it as read-only; the methods
// flatten it sequence-major (index b*T + t) for an engine's input tensors.
type Batch struct {
	// Tokens are the B sequences of T+1 ids each, copied from NewBatch's argument.
	Tokens [][]int32
	// B is the number of sequences.
	B int
	// T is the number of trained positions per sequence (sequence length minus one).
	T int
	// Vocab is the vocabulary size every id was checked against.
	Vocab int
	// Keep, when not nil, is the loss mask: Keep[s][t] tells whether position t of sequence
	// s (its prediction of Tokens[s][t+1]) counts in the loss. Nil: every position counts.
	Keep [][]bool
}

// NewBatch validates seqs and copies them into a Batch. There must be at least one
// sequence, all of the same length T+1 with 1 ≤ T ≤ context, and every id must lie in
// [0, vocab); errors name the sequence, position and id.
func NewBatch(seqs [][]int32, context, vocab int) (*Batch, error) {
	if len(seqs) == 0 {
		return nil, fmt.Errorf("train: a batch needs at least one sequence")
	}
	if context < 1 {
		return nil, fmt.Errorf("train: context length %d must be at least 1", context)
	}
	if vocab < 1 {
		return nil, fmt.Errorf("train: vocabulary size %d must be at least 1", vocab)
	}
	n := len(seqs[0])
	if n < 2 {
		return nil, fmt.Errorf("train: sequence 0 has %d ids; a sequence needs at least 2 (T+1 with T ≥ 1)", n)
	}
	if n-1 > context {
		return nil, fmt.Errorf("train: sequences of %d ids train T = %d positions, more than the context length %d",
			n, n-1, context)
	}
	b := &Batch{Tokens: make([][]int32, len(seqs)), B: len(seqs), T: n - 1, Vocab: vocab}
	for s, seq := range seqs {
		if len(seq) != n {
			return nil, fmt.Errorf("train: sequence %d has %d ids, but sequence 0 has %d; all must have the same length",
				s, len(seq), n)
		}
		for p, id := range seq {
			if id < 0 || int(id) >= vocab {
				return nil, fmt.Errorf("train: sequence %d position %d: token id %d is outside [0, %d)", s, p, id, vocab)
			}
		}
		b.Tokens[s] = append([]int32(nil), seq...)
	}
	return b, nil
}

// NewMaskedBatch is NewBatch with a loss mask: keep holds one slice of T flags per sequence,
// keep[s][t] telling whether position t of sequence s (its prediction of seqs[s][t+1]) counts
// in the loss, as when only a chat's assistant replies are trained. At least one position
// must count; errors name the sequence.
func NewMaskedBatch(seqs [][]int32, keep [][]bool, context, vocab int) (*Batch, error) {
	b, err := NewBatch(seqs, context, vocab)
	if err != nil {
		return nil, err
	}
	if len(keep) != b.B {
		return nil, fmt.Errorf("train: %d loss masks for %d sequences", len(keep), b.B)
	}
	b.Keep = make([][]bool, b.B)
	n := 0
	for s, k := range keep {
		if len(k) != b.T {
			return nil, fmt.Errorf("train: the loss mask of sequence %d has %d flags, want %d (one per trained position)", s, len(k), b.T)
		}
		for _, f := range k {
			if f {
				n++
			}
		}
		b.Keep[s] = append([]bool(nil), k...)
	}
	if n == 0 {
		return nil, fmt.Errorf("train: the loss mask keeps no position of the batch's %d sequences", b.B)
	}
	return b, nil
}

// Kept returns the B·T loss flags, sequence-major like Targets (all true without a mask).
func (b *Batch) Kept() []bool {
	out := make([]bool, 0, b.Rows())
	for s := range b.B {
		if b.Keep == nil {
			for range b.T {
				out = append(out, true)
			}
			continue
		}
		out = append(out, b.Keep[s]...)
	}
	return out
}

// Rows returns B·T, the number of trained positions (rows of the logits and labels).
func (b *Batch) Rows() int { return b.B * b.T }

// Inputs returns the B·T input ids, sequence-major: element b*T+t is Tokens[b][t].
func (b *Batch) Inputs() []int32 {
	out := make([]int32, 0, b.Rows())
	for _, seq := range b.Tokens {
		out = append(out, seq[:b.T]...)
	}
	return out
}

// Targets returns the B·T target ids, sequence-major: element b*T+t is Tokens[b][t+1].
func (b *Batch) Targets() []int32 {
	out := make([]int32, 0, b.Rows())
	for _, seq := range b.Tokens {
		out = append(out, seq[1:b.T+1]...)
	}
	return out
}

// Positions returns the B·T position indices 0..T-1 repeated for each sequence, aligned
// with Inputs (for RoPE or learned position embeddings).
func (b *Batch) Positions() []int32 {
	out := make([]int32, b.Rows())
	for i := range out {
		out[i] = int32(i % b.T)
	}
	return out
}

// ClassificationBatch is a validated image-classification batch of N images, each of
// PixelsPerImage floats, with one class label per image. Build it with
// NewClassificationBatch and treat it as read-only.
type ClassificationBatch struct {
	// Pixels holds the N images back to back: image i is Pixels[i*PixelsPerImage :
	// (i+1)*PixelsPerImage], laid out as the engine expects (e.g. [W, H, C]).
	Pixels []float32
	// Labels holds the class of each image, in [0, Classes).
	Labels []int32
	// N is the number of images.
	N int
	// PixelsPerImage is the number of floats per image.
	PixelsPerImage int
	// Classes is the number of classes the labels were checked against.
	Classes int
}

// NewClassificationBatch validates and copies images and their labels. There must be at
// least one image and as many labels as images; every image must have exactly
// pixelsPerImage finite floats, and every label must lie in [0, nClasses). Errors name the
// offending image.
func NewClassificationBatch(pixels [][]float32, labels []int32, pixelsPerImage, nClasses int) (*ClassificationBatch, error) {
	switch {
	case len(pixels) == 0:
		return nil, fmt.Errorf("train: a classification batch needs at least one image")
	case len(labels) != len(pixels):
		return nil, fmt.Errorf("train: %d images but %d labels", len(pixels), len(labels))
	case pixelsPerImage < 1:
		return nil, fmt.Errorf("train: pixels per image %d must be at least 1", pixelsPerImage)
	case nClasses < 1:
		return nil, fmt.Errorf("train: number of classes %d must be at least 1", nClasses)
	}
	c := &ClassificationBatch{Pixels: make([]float32, 0, len(pixels)*pixelsPerImage),
		Labels: append([]int32(nil), labels...), N: len(pixels), PixelsPerImage: pixelsPerImage, Classes: nClasses}
	for i, img := range pixels {
		if len(img) != pixelsPerImage {
			return nil, fmt.Errorf("train: image %d has %d floats, want %d", i, len(img), pixelsPerImage)
		}
		for j, x := range img {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("train: image %d value %d is %g, not finite", i, j, x)
			}
		}
		if l := labels[i]; l < 0 || int(l) >= nClasses {
			return nil, fmt.Errorf("train: image %d has label %d, outside [0, %d)", i, l, nClasses)
		}
		c.Pixels = append(c.Pixels, img...)
	}
	return c, nil
}

// OneHot returns the labels as N one-hot rows of Classes floats (ggml layout [Classes, N]).
func (c *ClassificationBatch) OneHot() []float32 {
	out := make([]float32, c.N*c.Classes)
	for i, l := range c.Labels {
		out[i*c.Classes+int(l)] = 1
	}
	return out
}
