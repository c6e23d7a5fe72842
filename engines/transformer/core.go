package transformer

import (
	"github.com/toyml/toy/ggml"
)

// Weights are a model's tensors by their part in the transformer. The training Model and the
// GGUFModel hold the same struct, bound from the architecture's one tensor table
// (Architecture.TensorTable), and the same forward pass (ForwardPass) reads it.
type Weights struct {
	TokEmbd, PosEmbd, OutNorm, outNormB, Output, RopeFreqs *ggml.Tensor
	// FeatProj and FeatNorm are a drafter's input (InputFeatures): the projection of the
	// target's hidden states to the width (fc) and its RMSNorm's scale (hidden_norm).
	FeatProj, FeatNorm *ggml.Tensor
	// patchEmbd, patchEmbdB and clsToken are an image model's input (InputPatches), outputB
	// its head's bias (HeadClassToken).
	patchEmbd, patchEmbdB, clsToken, outputB *ggml.Tensor
	Layers                                   []blockWeights
	// EmbLookup is the table token embeddings are gathered from: TokEmbd, or a copy of it in a
	// type the backend can gather (GGUFModel.prepareEmbeddings).
	EmbLookup *ggml.Tensor
}

// blockWeights are one transformer block's tensors; the optional ones are nil when the
// architecture has no such part.
type blockWeights struct {
	AttnNorm, attnNormB, Wq, Wk, Wv, Wqkv, bq, bk, bv, bqkv, qNorm, kNorm *ggml.Tensor
	Wo, bo, postAttnNorm                                                  *ggml.Tensor
	FFNNorm, ffnNormB, Gate, Up, upB, Down, downB, postFFNNorm            *ggml.Tensor
	router, gateExps, upExps, downExps                                    *ggml.Tensor
	shGateInp, shGate, shUp, shDown                                       *ggml.Tensor
}

// ForwardPass builds the forward graph of the transformer every model family shares: token
// embeddings, blocks of (norm, attention with RoPE, residual, norm, feed-forward, residual)
// and the output head, with the architecture's choices (biases, QK norms, post norms, GeGLU
// or SwiGLU, experts, soft-caps). Training and decoding differ only in the hooks: how a weight
// multiplies (linear) and how queries attend (attend). A decode step is the training forward
// with a key/value cache. A DFlash drafter (engines/speculative) is this forward too, over its
// target's embeddings, RoPE and head: its attention (AttendBlocks) also reads, per block, the
// keys and values (KeysValues) of its target's projected hidden states (Features).
type ForwardPass struct {
	Ctx *ggml.Context
	A   *Architecture
	W   *Weights
	// Pos holds the i32 position of each of the n tokens.
	Pos *ggml.Tensor
	// Linear is W·x: the trainer sees each product (to differentiate it itself), the decoder
	// adds LoRA updates.
	Linear func(w, x *ggml.Tensor) *ggml.Tensor
	// RMSNormMul, when set, is an RMS norm times its scale w in one operation
	// (GGUFModel.rmsNormMul, for the decoders); nil builds ggml's RMSNorm then Mul, which a
	// training graph differentiates.
	RMSNormMul func(x, w *ggml.Tensor) *ggml.Tensor
	// LayerNormMulAdd, when set, is LayerNorm times its scale w plus its bias b in one operation
	// (GGUFModel.layerNormMulAdd, for GPT-2's decoders); nil builds ggml's Norm, Mul and Add.
	LayerNormMulAdd func(x, w, b *ggml.Tensor) *ggml.Tensor
	// Rope, when set, rotates queries or keys x [headDim, heads, n] by RoPE r at the positions
	// Pos (GGUFModel.ropeHook, for the decoders); nil builds ggml's RopeExt, as do keys made at
	// other positions (KeysValues).
	Rope func(x *ggml.Tensor, r ggml.Rope) *ggml.Tensor
	// SwiGLU, when set, makes a SwiGLU block's activation silu(gate·h)·(up·h), whose backward
	// the trainer builds itself (gemmBackward.swiglu); ok false leaves the block to linear.
	SwiGLU func(gate, up, down, h *ggml.Tensor) (act *ggml.Tensor, ok bool)
	// Gather, when set, looks up embedding rows (GetRows otherwise): the trainer differentiates
	// the lookups of trained tables itself.
	Gather func(table, ids *ggml.Tensor) *ggml.Tensor
	// Attend takes layer il's roped queries q [HeadDimK, H, n] and keys k [HeadDimK, Hkv, n]
	// and the values v [HeadDimV·Hkv, n], and returns the attention output [HeadDimV·H, n].
	Attend func(il int, q, k, v *ggml.Tensor) *ggml.Tensor
	// LastOnly computes the logits of the last token only.
	LastOnly bool
	// Rows, when set, are the i32 indices of the tokens whose logits are computed (the last
	// token of each sequence of a batched decode step); the last block finishes for them alone.
	Rows *ggml.Tensor
	// From is the first block the pass runs, and stream, when not nil, the residual stream
	// [d, n] entering it, in place of the token embeddings (a Trainer that recomputes the
	// first blocks starts its graph there).
	From   int
	Stream *ggml.Tensor
	// SortTopK routes experts by a descending argsort instead of ggml's TOP_K, where the
	// backend lacks it (ggml's CUDA backend in this version).
	SortTopK bool
	// Differentiable builds LayerNorm and GELU from ops that have a backward in ggml (which
	// NORM and GELU lack), for training graphs and for the Evaluator, which computes as they do.
	Differentiable bool
	// Capture, when set, sees the residual stream [d, n] after each block il (a DFlash target's
	// hidden states; see Decoder.SetCapture).
	Capture func(il int, x *ggml.Tensor)
}

// norm is the architecture's normalisation with learned scale w (and bias b, with LayerNorm).
func (f *ForwardPass) norm(x, w, b *ggml.Tensor) *ggml.Tensor {
	ctx, eps := f.Ctx, f.A.NormEps
	switch {
	case f.A.Norm == NormRMS:
		if f.RMSNormMul != nil {
			return f.RMSNormMul(x, w)
		}
		return ctx.Mul(ctx.RMSNorm(x, eps), w)
	case f.Differentiable:
		x = ctx.LayerNormComposite(x, eps)
	case f.LayerNormMulAdd != nil:
		return f.LayerNormMulAdd(x, w, b)
	default:
		x = ctx.Norm(x, eps)
	}
	return ctx.Add(ctx.Mul(x, w), b)
}

// gelu is GELU's tanh form.
func (f *ForwardPass) gelu(x *ggml.Tensor) *ggml.Tensor {
	if f.Differentiable {
		return f.Ctx.GeluComposite(x)
	}
	return f.Ctx.Gelu(x)
}

// addBias adds b to x when there is one.
func (f *ForwardPass) addBias(x, b *ggml.Tensor) *ggml.Tensor {
	if b == nil {
		return x
	}
	return f.Ctx.Add(x, b)
}

// qkv projects the normed input h to queries [HeadDimK·H, n], keys [HeadDimK·Hkv, n] and
// values [HeadDimV·Hkv, n], through separate or fused projections.
func (f *ForwardPass) qkv(l *blockWeights, h *ggml.Tensor) (q, k, v *ggml.Tensor) {
	if l.Wqkv == nil {
		q = f.addBias(f.Linear(l.Wq, h), l.bq) // first: a trainer's backward follows the products' order
		k, v = f.kv(l, h)
		return q, k, v
	}
	ctx, a := f.Ctx, f.A
	all := f.addBias(f.Linear(l.Wqkv, h), l.bqkv)
	if all == nil {
		return nil, nil, nil // the context holds the error
	}
	n, nb1 := all.Ne()[1], all.Nb()[1]
	qd, kd, vd := int64(a.NHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimV)
	part := func(rows, offset int64) *ggml.Tensor {
		return ctx.Cont(ctx.View(all, []int64{rows, n}, []int{nb1}, int(offset)*ggml.TypeSize(all.Type())))
	}
	return part(qd, 0), part(kd, qd), part(vd, qd+kd)
}

// kv projects the normed input h to keys and values through separate projections.
func (f *ForwardPass) kv(l *blockWeights, h *ggml.Tensor) (k, v *ggml.Tensor) {
	return f.addBias(f.Linear(l.Wk, h), l.bk), f.addBias(f.Linear(l.Wv, h), l.bv)
}

// heads shapes projected queries or keys x [HeadDimK·heads, n] of block il into heads
// [HeadDimK, heads, n], normalises each by the block's QK norm scale (when it has one) and
// rotates them to the i32 positions pos [n].
func (f *ForwardPass) heads(il int, x, norm *ggml.Tensor, heads, n int64, pos *ggml.Tensor) *ggml.Tensor {
	x = f.Ctx.Reshape(x, int64(f.A.HeadDimK), heads, n)
	if norm != nil {
		x = f.norm(x, norm, nil)
	}
	if f.A.Positions == PosRoPE {
		x = f.rope(x, pos, f.A.Rope(il))
	}
	return x
}

// rope rotates x [HeadDimK, heads, n] by r to the i32 positions pos [n]: through the Rope hook
// when pos is the pass's Pos (the hook's positions), by ggml's RopeExt otherwise.
func (f *ForwardPass) rope(x, pos *ggml.Tensor, r ggml.Rope) *ggml.Tensor {
	if f.Rope != nil && pos == f.Pos {
		return f.Rope(x, r)
	}
	return f.Ctx.RopeExt(x, pos, f.W.RopeFreqs, r)
}

// KeysValues are block il's keys [HeadDimK, NKVHeads, m] (QK-normed, rotated to the i32
// positions pos [m]) and values [HeadDimV·NKVHeads, m] of the normed rows x [d, m], made as
// Block makes those of its stream. A DFlash drafter's blocks also attend to keys and values of
// other rows at other positions (its target's projected context, Features), which it makes,
// or caches, with this.
func (f *ForwardPass) KeysValues(il int, x, pos *ggml.Tensor) (k, v *ggml.Tensor) {
	if x == nil {
		return nil, nil // the context holds the error
	}
	l := &f.W.Layers[il]
	if l.Wqkv == nil {
		k, v = f.kv(l, x)
	} else {
		_, k, v = f.qkv(l, x)
	}
	return f.heads(il, k, l.kNorm, int64(f.A.NKVHeads), x.Ne()[1], pos), v
}

// Features is the input rows [d, n] of a model that reads another's hidden states
// (InputFeatures, a DFlash drafter): feat [Features, n], the target's states side by side,
// projected to the width (fc) and normalised (hidden_norm).
func (f *ForwardPass) Features(feat *ggml.Tensor) *ggml.Tensor {
	return f.norm(f.Linear(f.W.FeatProj, feat), f.W.FeatNorm, nil)
}

// AttendBlocks is an attention (an Attend) over B blocks, each of n queries attending to its
// own m keys and values under mask [m, n, 1, B] (per block, 0 where a query sees a key, -∞
// elsewhere): q [HeadDimK, H, n·B] (rotated), k [HeadDimK, Hkv, m·B] and v
// [HeadDimV·Hkv, m·B], block-major, give [HeadDimV·H, n·B]. It is unfused (k·q, the scaled and
// masked softmax, v·p), with the blocks folded into the heads, so that a training graph
// differentiates it. A DFlash drafter's blocks attend this way to their context rows and their
// own positions, with no causal mask inside the block.
func (f *ForwardPass) AttendBlocks(q, k, v, mask *ggml.Tensor, n, m, blocks int64) *ggml.Tensor {
	ctx, a := f.Ctx, f.A
	hdk, hdv, H, Hkv, B := int64(a.HeadDimK), int64(a.HeadDimV), int64(a.NHeads), int64(a.NKVHeads), blocks
	q = ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(q, hdk, H, n, B), [4]int{0, 2, 1, 3})), hdk, n, H*B)
	k = ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(k, hdk, Hkv, m, B), [4]int{0, 2, 1, 3})), hdk, m, Hkv*B)
	vt := ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(v, hdv, Hkv, m, B), [4]int{1, 2, 0, 3})), m, hdv, Hkv*B)
	kq := ctx.MulMat(k, q) // [m, n, H·B]
	scale := a.QueryScale
	if c := a.AttnSoftcap; c > 0 {
		kq = ctx.Scale(ctx.Tanh(ctx.Scale(kq, scale/c)), c)
		scale = 1
	}
	p := ctx.Reshape(ctx.SoftMaxExt(ctx.Reshape(kq, m, n, H, B), mask, scale, 0), m, n, H*B)
	o := ctx.Reshape(ctx.MulMat(vt, p), hdv, n, H, B)
	return ctx.Reshape(ctx.Cont(ctx.Permute(o, [4]int{0, 2, 1, 3})), hdv*H, n*B)
}

// Logits builds the logits [Vocab, n] (or [Vocab, 1] with LastOnly) of the i32 tokens [n].
// Errors are recorded on the context.
func (f *ForwardPass) Logits(tokens *ggml.Tensor) *ggml.Tensor {
	ctx, a := f.Ctx, f.A
	logits := f.Linear(f.W.Head(), f.Hidden(tokens))
	if c := a.FinalSoftcap; c > 0 {
		logits = ctx.Scale(ctx.Tanh(ctx.Scale(logits, 1/c)), c)
	}
	return logits
}

// Head is the output projection: the output weight, or the token embeddings when tied.
func (w *Weights) Head() *ggml.Tensor {
	if w.Output == nil {
		return w.TokEmbd
	}
	return w.Output
}

// PatchEmbd is an image model's patch embedding (InputPatches), a projection of the pixels;
// nil for a language model.
func (w *Weights) PatchEmbd() *ggml.Tensor { return w.patchEmbd }

// Hidden builds the final hidden states [d, n] of the i32 tokens [n] — after the last block and
// the final norm — which the output projection turns into logits.
func (f *ForwardPass) Hidden(tokens *ggml.Tensor) *ggml.Tensor {
	w := f.W
	x := f.Stream
	if x == nil {
		x = f.Embed(tokens)
	}
	x = f.blocks(x, tokens.Len())
	return f.norm(x, w.OutNorm, w.outNormB)
}

// Embed is the residual stream [d, n] entering the first block: the embeddings of the i32
// tokens [n] (scaled, plus learned positions where the architecture has them).
func (f *ForwardPass) Embed(tokens *ggml.Tensor) *ggml.Tensor {
	ctx, a, w := f.Ctx, f.A, f.W
	x := f.lookup(w.EmbLookup, tokens) // [d, n]
	if a.EmbedScale != 1 {
		x = ctx.Scale(x, a.EmbedScale)
	}
	if a.Positions == PosLearned {
		x = ctx.Add(x, f.lookup(w.PosEmbd, f.Pos))
	}
	return x
}

// lookup gathers the rows ids of an embedding table.
func (f *ForwardPass) lookup(table, ids *ggml.Tensor) *ggml.Tensor {
	if f.Gather != nil {
		return f.Gather(table, ids)
	}
	return f.Ctx.GetRows(table, ids)
}

// blocks runs the transformer blocks from f.from on over the residual stream x [d, n] and
// returns it after the last block, before the final norm.
func (f *ForwardPass) blocks(x *ggml.Tensor, n int64) *ggml.Tensor {
	for il := f.From; il < len(f.W.Layers); il++ {
		x = f.Block(il, x, n)
	}
	return x
}

// Block runs block il over the residual stream x [d, n].
func (f *ForwardPass) Block(il int, x *ggml.Tensor, n int64) *ggml.Tensor {
	ctx, a, w := f.Ctx, f.A, f.W
	l := &w.Layers[il]
	h := f.norm(x, l.AttnNorm, l.attnNormB)
	q, k, v := f.qkv(l, h)
	q, k = f.heads(il, q, l.qNorm, int64(a.NHeads), n, f.Pos), f.heads(il, k, l.kNorm, int64(a.NKVHeads), n, f.Pos)
	o := f.addBias(f.Linear(l.Wo, f.Attend(il, q, k, v)), l.bo)
	if f.LastOnly && il == len(w.Layers)-1 && n > 1 {
		// Only the last token's logits are wanted: finish the last block for it alone.
		o, x = f.lastColumn(o, n), f.lastColumn(x, n)
	}
	if f.Rows != nil && il == len(w.Layers)-1 {
		o, x = ctx.GetRows(o, f.Rows), ctx.GetRows(x, f.Rows)
	}
	if l.postAttnNorm != nil {
		o = f.norm(o, l.postAttnNorm, nil)
	}
	x = ctx.Add(x, o)
	h = f.norm(x, l.FFNNorm, l.ffnNormB)
	var y *ggml.Tensor
	switch {
	case a.IsMoE():
		y = f.moe(l, h)
	case a.FFN == FFNGELU:
		y = f.addBias(f.Linear(l.Down, f.gelu(f.addBias(f.Linear(l.Up, h), l.upB))), l.downB)
	default:
		y = f.ffn(l.Gate, l.Up, l.Down, h)
	}
	if l.postFFNNorm != nil {
		y = f.norm(y, l.postFFNNorm, nil)
	}
	x = ctx.Add(x, y)
	if f.Capture != nil {
		f.Capture(il, x)
	}
	return x
}

// lastColumn views the last column of a [w, n] matrix.
func (f *ForwardPass) lastColumn(x *ggml.Tensor, n int64) *ggml.Tensor {
	if x == nil {
		return nil // the context holds the error
	}
	nb := x.Nb()
	return f.Ctx.View(x, []int64{x.Ne()[0], 1}, []int{nb[1]}, int(n-1)*nb[1])
}

// ffn is the gated feed-forward block down(act(gate·h) ⊙ up·h).
func (f *ForwardPass) ffn(gate, up, down, h *ggml.Tensor) *ggml.Tensor {
	if f.SwiGLU != nil && f.A.FFN != FFNGeGLU {
		if act, ok := f.SwiGLU(gate, up, down, h); ok {
			return f.Linear(down, act)
		}
	}
	g, u := f.Linear(gate, h), f.Linear(up, h)
	if f.A.FFN == FFNGeGLU {
		return f.Linear(down, f.Ctx.GegluSplit(g, u))
	}
	return f.Linear(down, f.Ctx.SwigluSplit(g, u))
}

// topK is the indices of the k largest router probabilities of each token: ggml's TOP_K, or
// the first k of a descending argsort (the same experts, in order) with SortTopK.
func (f *ForwardPass) topK(probs *ggml.Tensor, k int64) *ggml.Tensor {
	if !f.SortTopK {
		return f.Ctx.TopK(probs, int(k))
	}
	sorted := f.Ctx.Argsort(probs, true)
	if sorted == nil {
		return nil // the context holds the error
	}
	return f.Ctx.View(sorted, []int64{k, sorted.Ne()[1]}, []int{sorted.Nb()[1]}, 0)
}

// moe is the mixture-of-experts block: softmax over the router logits, the top NExpertsUsed
// experts (their weights renormalised when NormTopK), each a SwiGLU FFN through MulMatID, the
// weighted sum of their outputs; plus the gated shared expert when there is one.
func (f *ForwardPass) moe(l *blockWeights, h *ggml.Tensor) *ggml.Tensor {
	ctx, a := f.Ctx, f.A
	dm, E, K := int64(a.DModel), int64(a.NExperts), int64(a.NExpertsUsed)
	n := h.Ne()[1]
	probs := ctx.SoftMax(ctx.MulMat(l.router, h)) // [E, n]
	sel := f.topK(probs, K)                       // [K, n]
	w := ctx.GetRows(ctx.Reshape(probs, 1, E, n), sel)
	if a.NormTopK {
		w2 := ctx.Reshape(w, K, n)
		w = ctx.Reshape(ctx.Div(w2, ctx.SumRows(w2)), 1, K, n)
	}
	h3 := ctx.Reshape(h, dm, 1, n)
	up := ctx.MulMatID(l.upExps, h3, sel)   // [ff, K, n]
	gt := ctx.MulMatID(l.gateExps, h3, sel) // [ff, K, n]
	act := ctx.SwigluSplit(gt, up)
	experts := ctx.Mul(ctx.MulMatID(l.downExps, act, sel), w) // [d, K, n]
	var out *ggml.Tensor
	if experts != nil {
		nb := experts.Nb()
		for i := int64(0); i < K; i++ {
			e := ctx.View(experts, []int64{dm, n}, []int{nb[2]}, int(i)*nb[1])
			if out == nil {
				out = e
			} else {
				out = ctx.Add(out, e)
			}
		}
		if K == 1 {
			out = ctx.Cont(out)
		}
	}
	if l.shGateInp != nil {
		sh := f.ffn(l.shGate, l.shUp, l.shDown, h)
		out = ctx.Add(out, ctx.Mul(sh, ctx.Sigmoid(ctx.MulMat(l.shGateInp, h))))
	}
	return out
}

// Target is the weight of block l that the short name adapts; nil where the architecture has
// no such projection.
func (l *blockWeights) Target(name string) *ggml.Tensor {
	return map[string]*ggml.Tensor{"q": l.Wq, "k": l.Wk, "v": l.Wv, "qkv": l.Wqkv, "o": l.Wo, "gate": l.Gate, "up": l.Up, "down": l.Down}[name]
}
