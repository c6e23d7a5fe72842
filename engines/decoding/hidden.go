package decoding

import (
	"fmt"
)

// Hidden empties the cache, runs tokens from position 0 and returns the final hidden state of
// every token — the output of the last block after the final norm, what the output projection
// turns into logits — one row of DModel values per token, without computing the head.
// Embeddings pool them. The tokens must fit the decoder's context (no shift).
func (d *Decoder) Hidden(tokens []int32) ([][]float32, error) {
	if len(tokens) > d.maxCtx {
		return nil, fmt.Errorf("decoder: %d tokens do not fit a context of %d: %w", len(tokens), d.maxCtx, ErrContextFull)
	}
	d.Reset()
	d.hiddenOut = true
	defer func() { d.hiddenOut, d.last = false, nil }()
	flat, err := d.process(tokens, true)
	if err != nil {
		return nil, err
	}
	dm := d.m.Arch.DModel
	if len(flat) != len(tokens)*dm {
		return nil, fmt.Errorf("decoder: %d hidden values for %d tokens of width %d", len(flat), len(tokens), dm)
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = flat[i*dm : (i+1)*dm : (i+1)*dm]
	}
	return rows, nil
}
