package llama

import (
	"fmt"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/ggml"
)

// batchInputs are the per-step inputs of a graph over B sequences of T tokens — token ids,
// positions, the block-causal mask and the one-hot next-token labels — with the host buffers
// they are filled from, shared by the Trainer and the Evaluator.
type batchInputs struct {
	T, B, vocab int
	tokens      *ggml.Tensor // i32 [T·B]
	pos         *ggml.Tensor // i32 [T·B]: each token's position in its sequence
	mask        *ggml.Tensor // f32 [T, T, 1, B]
	labels      *ggml.Tensor // f32 [vocab, T·B]
	maskBuf     []float32
	labelsBuf   []float32
}

// newBatchInputs declares the input tensors in s (which the caller then allocates).
func newBatchInputs(s *ggml.Context, T, B, vocab int) *batchInputs {
	t, b, n := int64(T), int64(B), int64(T*B)
	return &batchInputs{
		T: T, B: B, vocab: vocab,
		tokens:    s.NewTensor(ggml.I32, n).SetName("in.tokens"),
		pos:       s.NewTensor(ggml.I32, n).SetName("in.positions"),
		mask:      s.NewTensor(ggml.F32, t, t, 1, b).SetName("in.mask"),
		labels:    s.NewTensor(ggml.F32, int64(vocab), n).SetName("in.labels"),
		maskBuf:   make([]float32, T*T*B),
		labelsBuf: make([]float32, vocab*T*B),
	}
}

// setPositions writes the positions 0..T-1 of each sequence, once the tensors are allocated.
func (in *batchInputs) setPositions() error {
	pos := make([]int32, in.T*in.B)
	for i := range pos {
		pos[i] = int32(i % in.T)
	}
	return in.pos.SetI32(pos)
}

// upload validates B sequences of T+1 ids (inputs [:T], next-token targets [1:]) with
// train.NewBatch and sets the tensors; sep is the document separator of the mask (-1: none).
func (in *batchInputs) upload(seqs [][]int32, sep int32) error {
	b, err := train.NewBatch(seqs, in.T, in.vocab)
	if err != nil {
		return fmt.Errorf("llama: %w", err)
	}
	if b.B != in.B || b.T != in.T {
		return fmt.Errorf("llama: a batch of %d sequences of %d tokens for a graph of %d × %d", b.B, b.T, in.B, in.T)
	}
	ids := b.Inputs()
	clear(in.labelsBuf)
	for row, target := range b.Targets() {
		in.labelsBuf[row*in.vocab+int(target)] = 1
	}
	BlockCausalMask(in.maskBuf, ids, in.T, in.B, sep)
	if err := in.tokens.SetI32(ids); err != nil {
		return err
	}
	if err := in.mask.SetF32(in.maskBuf); err != nil {
		return err
	}
	return in.labels.SetF32(in.labelsBuf)
}
