package training

import (
	"fmt"
	"math"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/ggml"
)

// batchInputs are the per-step inputs of a graph over B sequences of T tokens — token ids,
// positions, the block-causal mask and the one-hot next-token labels — with the host buffers
// they are filled from, shared by the Trainer and the Evaluator.
//
// A masked graph (a loss mask: only some positions count, as a chat's assistant replies)
// gathers the kept rows of the logits with GetRows before the cross entropy: ggml's backward
// of the cross entropy assumes every label row sums to 1, so an all-zero label row would add
// no loss but a gradient (docs/GGML.md, "Cross entropy's label rows"). The graph is built
// once for every batch, so its
// row count is fixed at B·T: the K kept rows come first and the other B·T−K rows gather a
// constant zero row (appended to the logits with Acc) labelled with token 0, which adds
// ln(vocab) each to the loss and nothing to any gradient. The caller then rescales (see
// maskedLoss and Trainer.Step).
type batchInputs struct {
	T, B, vocab int
	tokens      *ggml.Tensor // i32 [T·B]
	pos         *ggml.Tensor // i32 [T·B]: each token's position in its sequence
	mask        *ggml.Tensor // f32 [T, T, 1, B]
	labels      *ggml.Tensor // f32 [vocab, T·B] (nil with a chunked head or targetAt)
	// targetAt, when not nil, holds row·vocab + each row's target: crossEntropy gathers the
	// rows' target probabilities there, and the dense labels are not needed.
	targetAt  *ggml.Tensor // i32 [T·B]
	maskBuf   []float32
	labelsBuf []float32

	// head, when not nil, are the inputs of the chunked loss of a frozen output projection
	// (see headLoss), which replace the dense labels.
	head *headInputs

	masked bool
	rows   *ggml.Tensor // i32 [T·B]: the gathered rows of [logits; 0] (masked graphs)
	zeros  *ggml.Tensor // f32 [vocab, T·B+1]: zero, the base the logits are placed in
	kept   int          // K, the kept rows of the last upload
}

// newBatchInputs declares the input tensors in s (which the caller then allocates). A
// hiddenWidth above 0 declares the inputs of a chunked head loss over hidden states of that
// width (headLoss) instead of the dense labels; targets (unmasked graphs only) declares those
// of crossEntropy instead.
func newBatchInputs(s *ggml.Context, T, B, vocab int, masked bool, hiddenWidth int, targets bool) *batchInputs {
	t, b, n := int64(T), int64(B), int64(T*B)
	in := &batchInputs{
		T: T, B: B, vocab: vocab, masked: masked, kept: T * B,
		tokens:  s.NewTensor(ggml.I32, n).SetName("in.tokens"),
		pos:     s.NewTensor(ggml.I32, n).SetName("in.positions"),
		mask:    s.NewTensor(ggml.F32, t, t, 1, b).SetName("in.mask"),
		maskBuf: make([]float32, T*T*B),
	}
	if hiddenWidth > 0 {
		in.head = newHeadInputs(s, T*B, vocab, hiddenWidth)
		return in
	}
	if targets && !masked && int64(vocab)*n <= math.MaxInt32 { // targetAt's i32 indices reach every logit
		in.targetAt = s.NewTensor(ggml.I32, n).SetName("in.target_at")
		return in
	}
	in.labels = s.NewTensor(ggml.F32, int64(vocab), n).SetName("in.labels")
	in.labelsBuf = make([]float32, vocab*T*B)
	if masked {
		in.rows = s.NewTensor(ggml.I32, n).SetName("in.loss_rows")
		in.zeros = s.NewTensor(ggml.F32, int64(vocab), n+1).SetName("in.zeros")
	}
	return in
}

// inputTensors bounds the number of tensors newBatchInputs declares.
const inputTensors = 8

// setPositions writes the positions 0..T-1 of each sequence (and a masked graph's zeros), once
// the tensors are allocated.
func (in *batchInputs) setPositions() error {
	pos := make([]int32, in.T*in.B)
	for i := range pos {
		pos[i] = int32(i % in.T)
	}
	if in.zeros != nil {
		if err := in.zeros.SetF32(make([]float32, in.zeros.Len())); err != nil {
			return err
		}
	}
	return in.pos.SetI32(pos)
}

// loss builds the mean cross entropy of logits [vocab, T·B] against the labels: over every
// row, or in a masked graph over B·T gathered rows (see batchInputs).
func (in *batchInputs) loss(ctx *ggml.Context, logits *ggml.Tensor) *ggml.Tensor {
	if !in.masked {
		return ctx.CrossEntropyLoss(logits, in.labels)
	}
	nb1 := 4 * in.vocab
	padded := ctx.Acc(in.zeros, logits, nb1, nb1*(in.T*in.B+1), nb1*(in.T*in.B+1), 0)
	return ctx.CrossEntropyLoss(ctx.GetRows(padded, in.rows), in.labels)
}

// crossEntropy is the mean cross entropy of logits [vocab, T·B] against the targets, for a
// training graph whose backward pass gb starts at the logits: their gradient, (p − onehot) ·
// seed / (T·B) with p the softmax of each row and seed the loss's gradient (an f32 scalar the
// caller sets, 1 but for a data-parallel replica's share), is built here and seeded into gb
// (gemmBackward.seed).
// ggml's CROSS_ENTROPY_LOSS, whose forward takes one exp at a time, and the dense one-hot
// labels are not needed: the rows' target probabilities are gathered from p at targetAt, then
// p's target entries are lowered by 1 in place to make the gradient.
//
// value reads a copy of those probabilities, so autodiff sees no path from it back to the
// logits; the graph must expand copy, then value (its loss).
func (in *batchInputs) crossEntropy(ctx *ggml.Context, logits, seed *ggml.Tensor, gb *gemmBackward) (copy, value *ggml.Tensor) {
	if logits == nil {
		return nil, nil // the context holds the error
	}
	n := int64(in.T * in.B)
	flat := ctx.Reshape(ctx.SoftMax(logits), 1, int64(in.vocab)*n)
	pt := ctx.GetRows(flat, in.targetAt) // [1, n]
	copied := ctx.NewTensor(ggml.F32, 1, n)
	copy = ctx.Cpy(pt, copied)
	value = ctx.Scale(ctx.Sum(logTargetProb(ctx, copied)), -1/float32(n))
	// seed/n repeated along a row, so that ggml multiplies whole rows by it
	scale := ctx.Repeat(ctx.Scale(seed, 1/float32(n)), ctx.NewTensor(ggml.F32, int64(in.vocab), 1))
	grad := ctx.Mul(ctx.Reshape(ctx.SetRows(flat, ctx.ScaleBias(pt, 1, -1), in.targetAt), int64(in.vocab), n), scale)
	gb.seed(logits, grad)
	return copy, value
}

// maskedLoss turns the graph's loss into the mean over the kept rows: the padding rows each
// added ln(vocab). Unmasked graphs' losses, and a chunked head's (already that mean), pass
// through.
func (in *batchInputs) maskedLoss(l float32) float32 {
	n := in.T * in.B
	if !in.masked || in.kept == n || in.head != nil {
		return l
	}
	return float32((float64(l)*float64(n) - float64(n-in.kept)*math.Log(float64(in.vocab))) / float64(in.kept))
}

// upload validates B sequences of T+1 ids (inputs [:T], next-token targets [1:]) with
// train.NewBatch (train.NewMaskedBatch when keep is not nil) and sets the tensors; sep is the
// document separator of the mask (-1: none). Only a masked graph takes a loss mask.
func (in *batchInputs) upload(seqs [][]int32, keep [][]bool, sep int32) error {
	var b *train.Batch
	var err error
	switch {
	case keep != nil && !in.masked:
		return fmt.Errorf("training: a loss mask for a graph built without one (use NewMaskedTrainer or NewMaskedEvaluator)")
	case keep != nil:
		b, err = train.NewMaskedBatch(seqs, keep, in.T, in.vocab)
	default:
		b, err = train.NewBatch(seqs, in.T, in.vocab)
	}
	if err != nil {
		return err
	}
	if b.B != in.B || b.T != in.T {
		return fmt.Errorf("training: a batch of %d sequences of %d tokens for a graph of %d × %d", b.B, b.T, in.B, in.T)
	}
	ids := b.Inputs()
	if in.head != nil {
		kept := b.Kept()
		in.kept = 0
		for _, k := range kept {
			if k {
				in.kept++
			}
		}
		if err := in.head.upload(b.Targets(), kept, in.kept); err != nil {
			return err
		}
	} else if in.masked {
		clear(in.labelsBuf)
		n := in.T * in.B
		rows := make([]int32, 0, n)
		targets := b.Targets()
		for row, k := range b.Kept() {
			if k {
				in.labelsBuf[len(rows)*in.vocab+int(targets[row])] = 1
				rows = append(rows, int32(row))
			}
		}
		in.kept = len(rows)
		for len(rows) < n { // the zero row, labelled 0
			in.labelsBuf[len(rows)*in.vocab] = 1
			rows = append(rows, int32(n))
		}
		if err := in.rows.SetI32(rows); err != nil {
			return err
		}
	} else if in.targetAt != nil {
		at := make([]int32, len(b.Targets()))
		for row, target := range b.Targets() {
			at[row] = int32(row*in.vocab) + target
		}
		if err := in.targetAt.SetI32(at); err != nil {
			return err
		}
	} else {
		clear(in.labelsBuf)
		for row, target := range b.Targets() {
			in.labelsBuf[row*in.vocab+int(target)] = 1
		}
	}
	BlockCausalMask(in.maskBuf, ids, in.T, in.B, sep)
	if err := in.tokens.SetI32(ids); err != nil {
		return err
	}
	if err := in.mask.SetF32(in.maskBuf); err != nil {
		return err
	}
	if in.labels == nil {
		return nil
	}
	return in.labels.SetF32(in.labelsBuf)
}
