package training

import (
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/ggml"
)

// headInputs are the inputs of headLoss, the cross entropy of a frozen output projection
// computed a chunk of rows at a time, which replaces the dense one-hot labels [vocab, B·T]
// of the plain loss.
type headInputs struct {
	rows, vocab int
	labelAt     *ggml.Tensor // i32 [B·T]: (row mod rows)·vocab + the row's target
	weight      *ggml.Tensor // f32 [1, B·T]: 1/K for each of the K kept rows, 0 for the others
	hidden      *ggml.Tensor // f32 [d, B·T]: the final hidden states, copied out of autodiff's reach
	hiddenGrad  *ggml.Tensor // f32 [d, B·T]: the loss's gradient with respect to them
}

// headTransposeType is the type of the transposed copy of a frozen output projection of type
// t that headLoss multiplies: t's own for f32, f16 and bf16, f16 for a block-quantized one
// (half the memory of f32: 56 MiB for SmolLM2's 49152 × 576, where the copy is the largest
// thing a LoRA step keeps besides the base).
func headTransposeType(t ggml.Type) ggml.Type {
	if ggml.IsQuantized(t) {
		return ggml.F16
	}
	return t
}

// headChunkBytes bounds the logits of one chunk of headLoss (a variable for tests).
var headChunkBytes = 16 << 20

// headChunkRows is the largest divisor of n whose chunk of logits fits headChunkBytes (at
// least 1).
func headChunkRows(vocab, n int) int {
	best := 1
	for r := 1; r <= n; r++ {
		if n%r == 0 && r*vocab*4 <= headChunkBytes {
			best = r
		}
	}
	return best
}

// headChunks is the number of chunks headLoss splits n rows into.
func headChunks(vocab, n int) int { return n / headChunkRows(vocab, n) }

// newHeadInputs declares the inputs of headLoss over n rows of hidden width d in s.
func newHeadInputs(s *ggml.Context, n, vocab, d int) *headInputs {
	return &headInputs{
		rows: headChunkRows(vocab, n), vocab: vocab,
		labelAt:    s.NewTensor(ggml.I32, int64(n)).SetName("in.label_at"),
		weight:     s.NewTensor(ggml.F32, 1, int64(n)).SetName("in.row_weights"),
		hidden:     s.NewTensor(ggml.F32, int64(d), int64(n)).SetName("head.hidden"),
		hiddenGrad: s.NewTensor(ggml.F32, int64(d), int64(n)).SetName("head.hidden_grad"),
	}
}

// upload sets the targets of the rows and their weights: the mean over the k kept rows.
func (h *headInputs) upload(targets []int32, kept []bool, k int) error {
	at := make([]int32, len(targets))
	w := make([]float32, len(targets))
	for r, t := range targets {
		at[r] = int32((r%h.rows)*h.vocab) + t
		if kept[r] {
			w[r] = 1 / float32(k)
		}
	}
	if err := h.labelAt.SetI32(at); err != nil {
		return err
	}
	return h.weight.SetF32(w)
}

// minTargetProb is added to a target's probability before its logarithm in the losses'
// values (the smallest normal float32): a row's loss is at most −ln of it, 87.3, and any
// probability above 1e-31 is unchanged by the addition. An addition rather than ggml's
// clamp, which turns NaN into its upper bound (a loss of 0): a NaN probability must make a
// NaN loss, which the trainers stop at (NonFiniteError).
const minTargetProb = 1.17549435e-38

// logTargetProb is ln(p + minTargetProb) of target probabilities p.
func logTargetProb(ctx *ggml.Context, p *ggml.Tensor) *ggml.Tensor {
	return ctx.Log(ctx.ScaleBias(p, 1, minTargetProb))
}

// loss builds the cross entropy of the logits out·hn of the final hidden states hn [d, B·T]
// (out frozen), weighted by row, without the logits of the whole batch: a loss over a
// vocabulary of 49152 and 512 rows would otherwise keep logits, their gradient and the labels,
// 96 MiB each, for the backward pass. Each chunk of rows computes its logits, softmax p, its
// share of the loss −Σ w·ln p[target], and the gradient with respect to its hidden states
// w·outᵀ·(p − onehot) outright, so its memory is reused by the next chunk.
//
// The chunks read a copy of hn (the first of steps), so autodiff never differentiates them;
// the graph must expand steps in order, then the returned surrogate, sum(hn ⊙ gradient), as
// its loss: its gradient with respect to hn is the cross entropy's, which autodiff carries
// back through the model. value is the cross entropy itself.
//
// The hidden states' gradient is a GEMM with outᵀ: on the CPU (toy's packed GEMM in ks)
// out read transposed in place, in f32 throughout; elsewhere outT(), a copy of outᵀ
// (gemmBackward.frozenTranspose, of headTransposeType), whose GEMM rounds its other operand,
// p − onehot, to outT's type, so the rows' weights scale its result rather than the entries:
// w·p, of order 1/(vocab · rows), would flush to zero in f16. The entries themselves lie in
// [−1, 1]; those f16 flushes (below 6e-8) change a row's gradient by at most vocab · 6e-8 of
// its size. Without outT (an Evaluator) only value is built.
func (h *headInputs) loss(ctx *ggml.Context, out *ggml.Tensor, outT func() *ggml.Tensor, hn *ggml.Tensor, ks decoding.KernelSet) (steps []*ggml.Tensor, value, surrogate *ggml.Tensor) {
	steps = append(steps, ctx.Cpy(hn, h.hidden))
	n := h.hidden.Ne()[1]
	R, V := int64(h.rows), int64(h.vocab)
	cols := func(t *ggml.Tensor, c int64) *ggml.Tensor { // chunk c of a [w, n] tensor
		nb1 := t.Nb()[1]
		return ctx.View(t, []int64{t.Ne()[0], R}, []int{nb1}, int(c*R)*nb1)
	}
	var sum *ggml.Tensor
	for c := int64(0); c < n/R; c++ {
		at := ctx.View(h.labelAt, []int64{R}, nil, int(c*R)*4)
		w := cols(h.weight, c)
		// On the CPU toy's packed GEMM (cpuProduct), as the rest of a training graph: it packs
		// the whole vocabulary's weights again for each chunk's 64 columns, and still took
		// 0.72–0.87 of ggml's time on SmolLM2's f16 and q8_0 heads.
		flat := ctx.Reshape(ctx.SoftMax(cpuProduct(ctx, ks, out, cols(h.hidden, c), ggml.Dense)), 1, V*R)
		pt := ctx.GetRows(flat, at) // [1, R]: each row's probability of its target
		share := ctx.Sum(ctx.Mul(logTargetProb(ctx, pt), w))
		if sum == nil {
			sum = share
		} else {
			sum = ctx.Add(sum, share)
		}
		if outT != nil {
			dLogits := ctx.Reshape(ctx.SetRows(flat, ctx.ScaleBias(pt, 1, -1), at), V, R) // p − onehot
			var grad *ggml.Tensor                                                         // outᵀ·(p − onehot) [d, R]
			if wt := ctx.Transpose(out); packs(ks, wt, dLogits, ggml.Dense) {
				grad = ctx.MulMatPacked(wt, dLogits)
			} else {
				grad = ctx.MulMat(outT(), dLogits)
			}
			steps = append(steps, ctx.Cpy(ctx.Mul(grad, w), cols(h.hiddenGrad, c)))
		}
		steps = append(steps, sum)
	}
	value = ctx.Scale(sum, -1)
	steps = append(steps, value)
	if outT == nil {
		return steps, value, nil
	}
	return steps, value, ctx.Sum(ctx.Mul(hn, h.hiddenGrad))
}
