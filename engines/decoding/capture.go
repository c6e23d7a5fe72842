package decoding

import (
	"fmt"
	"slices"
)

// SetCapture makes every step read the outputs of the given layers (the residual stream after
// block il, what llama.cpp and Hugging Face call hidden state il+1) for each token it
// processes: Captured returns them after Prompt, Next, Append or Logits. A DFlash drafter reads
// its target's context through them. Layers must be distinct and below the last layer (whose
// output is the logits' input: a prompt's graph finishes it for the last token only), and a
// capturing decoder cannot shift its context. nil turns capturing off. The built graphs are
// rebuilt.
func (d *Decoder) SetCapture(layers []int) error {
	if err := checkCapture(d.m, layers); err != nil {
		return err
	}
	if len(layers) > 0 && d.opts.ContextFull == ContextShift {
		return fmt.Errorf("a decoder that shifts its context cannot capture hidden states (the shift recomputes them)")
	}
	d.capture = slices.Clone(layers)
	for k, g := range d.graphs {
		g.close()
		delete(d.graphs, k)
	}
	return nil
}

// CaptureWidth is the length of one token's captured row: the model's width times the
// captured layers.
func (d *Decoder) CaptureWidth() int { return len(d.capture) * d.m.Arch.DModel }

// Captured returns the captured hidden states of the tokens the last Prompt, Next, Append or
// Logits processed, one row per token (CaptureWidth values: the captured layers' outputs in
// SetCapture's order). The rows belong to the decoder until its next step.
func (d *Decoder) Captured() [][]float32 { return d.captured }

// SetCapture makes every step read the outputs of the given layers for each token it
// processes, as Decoder.SetCapture does (a DFlash drafter of a server's slots reads its
// target's context through them): Captured returns them after Step. nil turns capturing off.
// The built graphs are rebuilt.
func (b *BatchDecoder) SetCapture(layers []int) error {
	if err := checkCapture(b.m, layers); err != nil {
		return err
	}
	b.capture = slices.Clone(layers)
	for k, g := range b.graphs {
		g.close()
		delete(b.graphs, k)
	}
	return nil
}

// Captured returns the captured hidden states of the tokens the last Step processed, one row
// per token in the order of its inputs' tokens (len(capture layers)·DModel values). The rows
// belong to the decoder until its next step.
func (b *BatchDecoder) Captured() [][]float32 { return b.captured }

// checkCapture refuses capture layers that are not distinct layers of m below its last.
func checkCapture(m *GGUFModel, layers []int) error {
	for i, il := range layers {
		if il < 0 || il >= m.Arch.NLayers-1 {
			return fmt.Errorf("capture layer %d: %s has layers 0..%d, and the last one cannot be captured", il, m.path, m.Arch.NLayers-1)
		}
		if slices.Contains(layers[:i], il) {
			return fmt.Errorf("capture layer %d twice", il)
		}
	}
	return nil
}
