package training

import (
	"fmt"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// gemmBackward differentiates the weight products (and embedding lookups) of a training graph
// with GEMMs. ggml's autodiff differentiates z = W·x with OUT_PROD for both operands, whose
// CPU kernel runs at a fraction of a GEMM's speed, and cannot read f16 weights at all. So the
// products are hidden from autodiff and their gradients are built here, inside its backward
// pass:
//
//   - the input x is copied into a leaf (CPY x → in) and the product reads the leaf, so
//     autodiff sees no path from z back to x;
//   - z gets a tap: z + p, where p is a zero param broadcast over z's columns, so that autodiff
//     computes dL/dz. That gradient accumulates in place into a zero tensor made here (dz, p
//     repeated), handed to BuildBackward as the tap's accumulator;
//   - the copy's accumulator is Σ Wᵀ·dz over the products that read the leaf, a GEMM each with
//     a transposed f32 copy of W (inputGrad; by chunks of a long contraction): made every step
//     for a trained or block-quantized W, once for a frozen f32/f16/bf16 one (see transposed
//     and prepare); autodiff passes it on to x as CPY's backward does. It sits in
//     the graph after the dz it reads: ggml adds it when it reaches the copy, which precedes
//     every product in the forward order, so comes after them backwards;
//   - a trained W's gradient is inᵀ·dzᵀ (a GEMM; the products that read one input share its
//     transposed copy), and a trained embedding table's the scatter of its rows' gradients,
//     built after the backward pass (weightGrad);
//   - where the loss's gradient with respect to an output is built by hand (the logits, see
//     batchInputs.crossEntropy), seed makes it that output's gradient, so the backward pass
//     starts there;
//   - attention (attention) is one such block: its inputs q, k and v are copied into leaves,
//     its output is tapped, and its backward — the GEMMs of its two products and the softmax's
//     — is built here from the output's gradient.
//
// The trained tensors it multiplies or gathers must not be params while the backward pass is
// built (ggml would differentiate them with OUT_PROD too): see multiplies.
type gemmBackward struct {
	g *ggml.Context
	// trained are the tensors whose gradient is wanted (weightGrad).
	trained map[*ggml.Tensor]bool
	// taps holds the taps' zero params, one per output width (tapOf).
	taps   *ggml.Context
	tapBuf *ggml.Buffer
	tapOf  map[int64]*ggml.Tensor
	// frozenT are the transposed copies of frozen weights, by weight, made once (prepare);
	// frozen holds them.
	frozen    *ggml.Context
	frozenBuf *ggml.Buffer
	frozenT   map[*ggml.Tensor]*ggml.Tensor
	// inputs are the detached product inputs in the order they were made, by source tensor.
	inputs  []*detachedInput
	inputOf map[ggml.TensorID]*detachedInput
	// products, lora and gathers are every weight product, second product of a LoRA term and
	// trained lookup of the forward pass.
	products []*gemmProduct
	lora     []*loraProduct
	gathers  []*tappedGather
	used     map[*ggml.Tensor]bool
	// backward builds, for each product and attention, its inputs' gradient contributions
	// (detachedInput.grads) from its output's gradient accumulator.
	backward []func()
	// accs are the taps' outputs and their gradient accumulators.
	accs []tapAcc
	// recomputeProbs makes attention's backward recompute the probabilities rather than keep
	// the forward's (LoRAOptions.RecomputeAttention).
	recomputeProbs bool
	// keepTransposed keeps the transposed f32 copies of block-quantized frozen weights too
	// (LoRAOptions.KeepTransposed).
	keepTransposed bool
	// kernels are the lookups of toy's CPU operations the graph runs toy's kernels for (the
	// trainable's ownKernels: empty off the CPU backend): the products, attention's softmax, the
	// dense copies of transposes and SwiGLU's backward (product, attentionProbs, dense, swiglu).
	kernels decoding.KernelSet
}

// tapAcc is a tapped output and the accumulator of its gradient.
type tapAcc struct{ out, grad *ggml.Tensor }

// detachedInput is a product input x and the leaf the products read instead.
type detachedInput struct {
	leaf *ggml.Tensor
	copy *ggml.Tensor // CPY x → leaf, or nil when x is a leaf itself (a graph input)
	// leafT is leafᵀ, made for the first weight gradient that needs it and shared by the
	// others (the query, key and value projections read one input, as do gate and up).
	leafT *ggml.Tensor
	// release reads one element of the copy, so that the leaf's memory is freed after its last
	// reader: the copy's result is a view of the leaf, and ggml's graph allocator frees a
	// tensor only when every view of it has been read, so a view nothing reads would keep the
	// leaf (an activation the backward of a frozen product no longer needs) to the graph's end.
	release *ggml.Tensor
	// grads are the contributions to x's gradient, made by the backward builders.
	grads []*ggml.Tensor
	// consumed marks an x outside autodiff's reach (swiglu's activation, a leaf without a
	// copy) whose gradient a builder sums from grads itself.
	consumed bool
}

// sum is ts[0] + ts[1] + … in that order (ts not empty): an input's gradient contributions.
func (gb *gemmBackward) sum(ts []*ggml.Tensor) *ggml.Tensor {
	s := ts[0]
	for _, t := range ts[1:] {
		s = gb.g.Add(s, t)
	}
	return s
}

// wantsGrad reports whether x's gradient is wanted: carried on by autodiff from the copy, or
// summed by a builder (consumed).
func (in *detachedInput) wantsGrad() bool { return in.copy != nil || in.consumed }

// gemmProduct is one product W·in: its tapped output and the accumulator of its gradient.
type gemmProduct struct {
	w         *ggml.Tensor
	in        *detachedInput
	out, grad *ggml.Tensor
}

// loraProduct is the second product of a LoRA term, scale·B·u, added to the output of the
// product of: its output's gradient is scale times that product's.
type loraProduct struct {
	b     *ggml.Tensor
	u     *detachedInput
	scale float32
	of    *gemmProduct
}

// tappedGather is a lookup of rows ids of a trained table.
type tappedGather struct {
	table, ids, out, grad *ggml.Tensor
}

// maxTaps bounds the distinct output widths of a graph's products (model width, key/value
// width, feed-forward width, vocabulary, LoRA ranks, ...).
const maxTaps = 64

// newGemmBackward prepares the differentiation of a graph built in g, of which the tensors
// trained are trained and at most weights other weights are multiplied, running toy's CPU
// operations for the lookups in ks.
func newGemmBackward(g *ggml.Context, ks decoding.KernelSet, trained []*ggml.Tensor, weights int) (*gemmBackward, error) {
	taps, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: maxTaps})
	if err != nil {
		return nil, err
	}
	frozen, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: weights})
	if err != nil {
		taps.Close()
		return nil, err
	}
	gb := &gemmBackward{g: g, trained: map[*ggml.Tensor]bool{}, taps: taps, tapOf: map[int64]*ggml.Tensor{},
		frozen: frozen, frozenT: map[*ggml.Tensor]*ggml.Tensor{},
		inputOf: map[ggml.TensorID]*detachedInput{}, used: map[*ggml.Tensor]bool{}, kernels: ks}
	for _, t := range trained {
		gb.trained[t] = true
	}
	return gb, nil
}

// linear is W·x plus the LoRA terms of W, scale·B·(A·x), for the forward pass (its linear
// hook). W is multiplied in its own type, as an Evaluator multiplies it (product: on the CPU
// toy's packed GEMM converts it to f32 as it packs it): autodiff never differentiates the
// product, so nothing needs an f32 copy of W.
//
// A LoRA term's second product is differentiated here too: its input u = A·x is copied into a
// leaf, and its output's gradient is scale times the tapped product's, so du = scale·Bᵀ·dz (a
// GEMM with a transposed copy of B, r × out) and dB = scale·(dz·uᵀ)ᵀ (weightGrad). Autodiff
// would take both with OUT_PROD along the rank, vector operations of r elements (at rank 16,
// about 30 times the GEMMs' time). The first product, A·x, is left to autodiff, whose OUT_PRODs
// run along x's width, and which carries du to x and to A.
func (gb *gemmBackward) linear(w, x *ggml.Tensor, terms []decoding.LoRATerm) *ggml.Tensor {
	g := gb.g
	in := gb.detach(x)
	z := gb.product(w, in.leaf)
	if z == nil {
		return nil // the context holds the error
	}
	out, grad := gb.tap(z)
	p := &gemmProduct{w: w, in: in, out: out, grad: grad}
	gb.products = append(gb.products, p)
	gb.used[w] = true
	if in.wantsGrad() { // p.grad, not grad: seed may replace it
		gb.backward = append(gb.backward, func() { in.grads = append(in.grads, gb.inputGrad(w, p.grad)) })
	}
	for _, l := range terms {
		// ggml's products: a trained B or A is a param the graph's backward checks.
		u := gb.detach(g.MulMat(l.A, x))
		out = g.Add(out, g.Scale(g.MulMat(l.B, u.leaf), l.Scale))
		gb.lora = append(gb.lora, &loraProduct{b: l.B, u: u, scale: l.Scale, of: p})
		gb.used[l.B] = gb.used[l.B] || gb.trained[l.B]
		gb.backward = append(gb.backward, func() {
			u.grads = append(u.grads, g.Scale(gb.product(gb.transposedF32(l.B), p.grad), l.Scale))
		})
	}
	return out
}

// swiglu is SwigluSplit(Wg·x, Wu·x), the activation of a SwiGLU feed-forward block (the forward
// pass's swiglu hook), with the backward of the two products and the activation built here in
// one operation where the graph runs on the CPU backend: neither product is tapped, the
// activation reads their raw outputs (outside autodiff's reach, so autodiff builds nothing for
// it), and its own gradient is summed from the down projection's input gradient (the
// activation is that product's detached input, without a copy: consumed). From it
// ggml.SwigluBackCPU makes both products' output gradients in one vectorized pass, where
// ggml's autodiff took two taps (an addition, a zero accumulator and a reduction each), two
// products, a SILU and a scalar SILU_BACK. ok is false elsewhere: the caller builds the block
// plainly. It must not be used when the down projection has LoRA terms (autodiff would carry
// their gradient to the activation, which it no longer reaches), nor the gate's or up's.
func (gb *gemmBackward) swiglu(wg, wu, x *ggml.Tensor) (act *ggml.Tensor, ok bool) {
	if !gb.kernels.Has(needSwigluBack) {
		return nil, false
	}
	g := gb.g
	in := gb.detach(x)
	zg, zu := gb.product(wg, in.leaf), gb.product(wu, in.leaf)
	act = g.SwigluSplit(zg, zu)
	if act == nil {
		return nil, true // the context holds the error
	}
	pg, pu := &gemmProduct{w: wg, in: in}, &gemmProduct{w: wu, in: in}
	gb.products = append(gb.products, pg, pu)
	gb.used[wg], gb.used[wu] = true, true
	ain := &detachedInput{leaf: act, consumed: true}
	gb.inputs = append(gb.inputs, ain)
	gb.inputOf[act.ID()] = ain
	gb.backward = append(gb.backward, func() {
		if len(ain.grads) == 0 {
			return // nothing reads the activation's gradient
		}
		d := g.SwigluBackCPU(zg, zu, gb.sum(ain.grads)) // [ff, n, 2]: the gate's output gradient, then up's
		if d == nil {
			return // the context holds the error
		}
		ne, nb := []int64{d.Ne()[0], d.Ne()[1]}, []int{d.Nb()[1]}
		pg.grad, pu.grad = g.View(d, ne, nb, 0), g.View(d, ne, nb, d.Nb()[2])
		if in.wantsGrad() {
			in.grads = append(in.grads, gb.inputGrad(wg, pg.grad), gb.inputGrad(wu, pu.grad))
		}
	})
	return act, true
}

// inputGradChunk bounds the contraction of one GEMM of inputGrad: ggml's f32 GEMM (tinyBLAS)
// runs along the whole contraction for each tile of its result, and slows down on one much
// longer than its caches hold (1.5× over the 49152 outputs of a vocabulary head). A variable
// for tests.
var inputGradChunk int64 = 4096

// inputGrad is Wᵀ·dz [k, n], the gradient of the input of a product of W [k, m] from its
// output's gradient dz [m, n]: one GEMM, or, for a trained or block-quantized W with more
// than inputGradChunk outputs, one per chunk of them, each taken transposed (dz's rows of the
// chunk as the first operand, which ggml's GEMM reads at any stride, the chunk of Wᵀ as the
// second), summed and transposed back. On the CPU, toy's packed GEMM reads an f32, f16, bf16 or
// q8_0 W transposed in place: no copy of Wᵀ at all, neither each step nor kept for a frozen
// weight (4 bytes a parameter).
func (gb *gemmBackward) inputGrad(w, dz *ggml.Tensor) *ggml.Tensor {
	g := gb.g
	k, m := w.Ne()[0], w.Ne()[1]
	if dz != nil {
		if wt := g.Transpose(w); packs(gb.kernels, wt, dz, ggml.Dense) {
			return g.MulMatPacked(wt, dz)
		}
	}
	if !gb.transposedEachStep(w) || m <= inputGradChunk {
		return gb.product(gb.transposed(w), dz)
	}
	if dz == nil {
		return nil // the context holds the error
	}
	var sumT *ggml.Tensor // [n, k]
	for r := int64(0); r < m; r += inputGradChunk {
		rows := min(inputGradChunk, m-r)
		wc := g.View(w, []int64{k, rows}, []int{w.Nb()[1]}, int(r)*w.Nb()[1])
		dzc := g.View(dz, []int64{rows, dz.Ne()[1]}, []int{dz.Nb()[1]}, int(r)*dz.Nb()[0])
		part := gb.product(dzc, gb.transposedF32(wc))
		if sumT == nil {
			sumT = part
		} else {
			sumT = g.Add(sumT, part)
		}
	}
	return gb.dense(g.Transpose(sumT))
}

// seed makes grad the gradient of t, a tensor of the forward pass whose loss gradient is built
// by hand (crossEntropy's logits): autodiff starts there. When t is a product's tapped output,
// grad replaces the tap's accumulator, so the product's GEMMs read it directly.
func (gb *gemmBackward) seed(t, grad *ggml.Tensor) {
	for _, p := range gb.products {
		if p.out == t {
			p.grad = grad
		}
	}
	for i := range gb.accs {
		if gb.accs[i].out == t {
			gb.accs[i].grad = grad
			return
		}
	}
	gb.accs = append(gb.accs, tapAcc{t, grad})
}

// attention is softmax(kᵀ·q·scale + mask)·v for each of the H·B heads of q [hdk, t, H·B],
// sharing the Hkv·B heads of k [hdk, t, Hkv·B] and vt (vᵀ) [t, hdv, Hkv·B] by groups of H/Hkv
// consecutive heads; the mask is [t, t, 1, B] and the result [hdv, t, H·B]. Its backward is
// built here: from the output's gradient do, dp = v·do and dvᵀ = pᵀ-wise GEMMs, the softmax's
// backward gives d(kᵀq), and from it dq and dk. With recomputeProbs the backward computes the
// probabilities p again, by the same ops (so to the bit), and the forward's are freed once
// multiplied. causal says the mask hides every key after its query (a language model's), so
// toy's kernel skips what that makes zero (attentionModes).
func (gb *gemmBackward) attention(k, q, vt, mask *ggml.Tensor, scale float32, H, B int64, causal bool) *ggml.Tensor {
	g := gb.g
	scores, probs, probsT := attentionModes(causal)
	kin, qin, vin := gb.detach(k), gb.detach(q), gb.detach(vt)
	kq := gb.causalProduct(kin.leaf, qin.leaf, scores) // [t, t, H·B]
	if kq == nil {
		return nil // the context holds the error
	}
	softmax := func(kq *ggml.Tensor) *ggml.Tensor { return attentionProbs(g, gb.kernels, kq, mask, scale, H, B) }
	p := softmax(kq)
	o := gb.causalProduct(vin.leaf, p, probs) // [hdv, t, H·B]
	if o == nil {
		return nil
	}
	out, do := gb.tap(o)
	G := k.Ne()[2]
	gb.backward = append(gb.backward, func() {
		if gb.recomputeProbs {
			p = softmax(gb.causalProduct(kin.leaf, qin.leaf, scores))
		}
		dp := gb.causalProduct(gb.transposedView(vin.leaf), do, scores)
		dkq := g.SoftMaxExtBack(dp, p, scale)
		vin.grads = append(vin.grads, gb.causalProduct(gb.groupsT(p, G), gb.groupsT(do, G), probsT))
		qin.grads = append(qin.grads, gb.causalProduct(gb.transposedView(kin.leaf), dkq, probs))
		if gb.kernels.Has(decoding.NeedPacked(ggml.F32)) {
			// dkᵀ from d(kᵀq)'s groups read in place, where toy's kernel skips their zeros,
			// and q's, transposed back: this copies q's groups and dkᵀ ([t·r, hdk] and
			// [t, hdk]) where dk = q·d(kᵀq)ᵀ copies d(kᵀq)'s ([t·r, t]); the same sums.
			dkT := gb.causalProduct(gb.groupsT(dkq, G), gb.groupsT(qin.leaf, G), probsT)
			kin.grads = append(kin.grads, gb.dense(g.Transpose(dkT)))
		} else {
			kin.grads = append(kin.grads, gb.productGradA(gb.groupsT(qin.leaf, G), dkq))
		}
	})
	return out
}

// attentionModes are what toy's kernel may skip in attention's products (ggml.Causality): of
// the scores kᵀ·q (and dp = v·do), of products with the probabilities (and d(kᵀq)) as their
// second operand, and with them transposed by groups as their first. Without a causal mask,
// nothing.
func attentionModes(causal bool) (scores, probs, probsT ggml.Causality) {
	if !causal {
		return ggml.Dense, ggml.Dense, ggml.Dense
	}
	return ggml.CausalScores, ggml.CausalProbs, ggml.CausalProbsT
}

// productGradA is the gradient of a in z = MulMat(a, b), a [K, M, G], b [K, N, G·r] (each
// head of a serving r consecutive heads of b), from bᵀ = groupsT(b, G) and z's gradient dz
// [M, N, G·r]: the GEMM bᵀ·dzᵀ over the N·r columns of each group, [K, M, G].
func (gb *gemmBackward) productGradA(bT, dz *ggml.Tensor) *ggml.Tensor {
	if bT == nil {
		return nil // the context holds the error
	}
	return gb.product(bT, gb.groupsT(dz, bT.Ne()[2]))
}

// groupsT is x [K, N, G·r] (or [K, N·G·r]) as G groups of its columns, each transposed:
// [N·r, K, G], an operand of product (transposedView).
func (gb *gemmBackward) groupsT(x *ggml.Tensor, groups int64) *ggml.Tensor {
	if x == nil {
		return nil // the context holds the error
	}
	k := x.Ne()[0]
	return gb.transposedView(gb.g.Reshape(x, k, x.Len()/(k*groups), groups))
}

// product is MulMat(a, b) in a training graph: on the CPU backend by toy's own kernel where it
// takes the operands (cpuProduct), elsewhere by ggml's. Either operand may be a transposed view
// (transposedView): toy's kernel reads a transposed a as it is (it packs a's rows anyway), and a
// transposed b whose rows are short (maxStridedB); the others are copied dense first (ggml's
// GEMM reading a transposed b in place, a row of it per value of the shared dimension, ran 2×
// slower than its copy and product).
func (gb *gemmBackward) product(a, b *ggml.Tensor) *ggml.Tensor {
	return gb.causalProduct(a, b, ggml.Dense)
}

// causalProduct is product for a product of causal attention: toy's kernel skips what mode
// says is zero or unread (ggml.Causality); ggml's computes every value.
func (gb *gemmBackward) causalProduct(a, b *ggml.Tensor, mode ggml.Causality) *ggml.Tensor {
	if a == nil || b == nil {
		return nil // the context holds the error
	}
	if b.Nb()[1] != ggml.TypeSize(b.Type()) || b.Nb()[0] > maxStridedB {
		b = gb.rows(b)
	}
	if packs(gb.kernels, a, b, mode) {
		return gb.g.MulMatPackedCausal(a, b, mode)
	}
	return gb.g.MulMat(gb.rows(a), gb.rows(b))
}

// maxStridedB is the longest step between the values of a transposed b's column (the
// transpose's row length, in bytes) that toy's packed GEMM reads in place: 5–15 % faster than
// copying it dense first for a layer's weight gradients (a step of 2 or 6 KiB), twice as slow
// for the vocabulary head's (192 KiB: each value on another page).
const maxStridedB = 16 << 10

// packs reports whether cpuProduct multiplies a and b (as mode allows) with toy's packed GEMM,
// which ks must resolve for a's type.
func packs(ks decoding.KernelSet, a, b *ggml.Tensor, mode ggml.Causality) bool {
	return a != nil && b != nil && ks.Has(decoding.NeedPacked(a.Type())) && a.Ne()[1] >= packedMinRows && ggml.CPUKernelsFast() && ggml.MulMatPackedCausalFits(a, b, mode) == nil
}

// rows is x with contiguous rows that do not overlap (ggml.Tensor.DenseRows), as ggml's GEMM
// reads its operands: x itself, or a dense copy of a transposed view — also of the transpose
// of a single row or column (a head of size 1, one position, a feed-forward of width 1), whose
// first stride looks dense but whose rows overlap.
func (gb *gemmBackward) rows(x *ggml.Tensor) *ggml.Tensor {
	if x.DenseRows() {
		return x
	}
	return gb.dense(x)
}

// transposedView is xᵀ as an operand of product: on the CPU, where toy's packed GEMM reads a
// transposed operand as it is, a view (product copies it for ggml's GEMM if it must); elsewhere
// a dense copy.
func (gb *gemmBackward) transposedView(x *ggml.Tensor) *ggml.Tensor {
	if x == nil {
		return nil // the context holds the error
	}
	if x.Type() == ggml.F32 && gb.kernels.Has(decoding.NeedPacked(ggml.F32)) {
		return gb.g.Transpose(x)
	}
	return gb.dense(gb.g.Transpose(x))
}

// packedMinRows is the fewest rows of a (the result's rows) for which toy's packed kernel
// computes a product: it fills its registers 64 rows at a time, so narrower products (LoRA's
// rank) stay with ggml's.
const packedMinRows = 64

// cpuProduct is MulMat(a, b) by toy's packed GEMM (ggml.MulMatPacked: 1.3–1.7× ggml's f32 GEMM
// on SmolLM2's training products, 3–7× on attention's over a head's 64 values, where ggml's
// spends as long on horizontal sums as on FMAs) where ks resolves it for a's type and the
// operands fit it, ggml's otherwise: the one choice of every training graph's products
// (gemmBackward.product, and the plain passes that must match it bit for bit, the Evaluator's
// too). An f16, bf16 or q8_0 weight is converted to f32 as it is packed and b stays f32, where
// ggml's kernels round b to the weight's type (f16, or q8_0 blocks): as the decoder keeps its
// columns f32 on the CPU for f16 and bf16 weights; for q8_0 it keeps ggml's integer kernels
// (a relative difference of about 1e-3 in the logits). Autodiff cannot differentiate toy's
// kernel: a graph ggml differentiates passes no ks. mode is what toy's kernel may skip in a
// product of causal attention (ggml.Causality; ggml.Dense: nothing).
func cpuProduct(ctx *ggml.Context, ks decoding.KernelSet, a, b *ggml.Tensor, mode ggml.Causality) *ggml.Tensor {
	if packs(ks, a, b, mode) {
		return ctx.MulMatPackedCausal(a, b, mode)
	}
	return ctx.MulMat(a, b)
}

// attentionProbs is softmax(scale·kq + mask) of the scores kq [t, t, H·B] of B sequences under
// mask [t, t, 1, B], [t, t, H·B]: where ks resolves it, by toy's own kernel (ggml.SoftMaxCPU: two passes over each row where ggml's kernel makes six,
// about 3× faster on SmolLM2's 512-token heads), elsewhere by ggml's. The one choice of every
// training graph's attention, like cpuProduct.
func attentionProbs(ctx *ggml.Context, ks decoding.KernelSet, kq, mask *ggml.Tensor, scale float32, H, B int64) *ggml.Tensor {
	if kq == nil {
		return nil // the context holds the error
	}
	t := kq.Ne()[0]
	return ctx.Reshape(transformer.CPUSoftMax(ctx, ks.Has(decoding.NeedSoftMax), ctx.Reshape(kq, t, t, H, B), mask, scale), t, t, H*B)
}

// dense is a dense copy of the f32 view x (a transpose): on the CPU backend by toy's own
// kernel where the graph's lookups resolve it, which copies by tiles (ggml's copy reads a
// transpose an element per cache line and took a fifth of a training step), elsewhere by
// ggml's.
func (gb *gemmBackward) dense(x *ggml.Tensor) *ggml.Tensor {
	if x != nil && x.Type() == ggml.F32 && gb.kernels.Has(needCont) {
		return gb.g.ContCPU(x)
	}
	return gb.g.Cont(x)
}

// gather is the rows ids of table (the forward pass's gather hook); a trained table's rows are
// tapped.
func (gb *gemmBackward) gather(table, ids *ggml.Tensor) *ggml.Tensor {
	rows := gb.g.GetRows(table, ids)
	if rows == nil || !gb.trained[table] {
		return rows
	}
	out, grad := gb.tap(rows)
	gb.gathers = append(gb.gathers, &tappedGather{table: table, ids: ids, out: out, grad: grad})
	gb.used[table] = true
	return out
}

// detach returns the leaf the products of x read.
func (gb *gemmBackward) detach(x *ggml.Tensor) *detachedInput {
	if x == nil {
		return &detachedInput{}
	}
	if in := gb.inputOf[x.ID()]; in != nil {
		return in
	}
	in := &detachedInput{leaf: x}
	if !x.IsLeaf() || x.IsParam() {
		in.leaf = gb.g.NewTensor(x.Type(), x.Shape()...)
		in.copy = gb.g.Cpy(x, in.leaf)
		in.release = gb.g.Cont(gb.g.View(in.copy, []int64{1}, nil, 0))
	}
	gb.inputs = append(gb.inputs, in)
	gb.inputOf[x.ID()] = in
	return in
}

// tap returns z + p (p the zero param of z's width) and the zero tensor z's gradient will
// accumulate in (in place: ggml adds each contribution to a given accumulator).
func (gb *gemmBackward) tap(z *ggml.Tensor) (out, grad *ggml.Tensor) {
	width := z.Ne()[0]
	p := gb.tapOf[width]
	if p == nil {
		p = gb.taps.NewTensor(ggml.F32, width, 1).SetName(fmt.Sprintf("grad.tap.%d", width)).SetParam()
		gb.tapOf[width] = p
	}
	// The accumulator is p repeated, not z scaled by 0: it must not keep z alive until the
	// backward pass.
	out, grad = gb.g.Add(z, p), gb.g.Repeat(p, z)
	gb.accs = append(gb.accs, tapAcc{out, grad})
	return out, grad
}

// multiplies reports whether the backward of t's uses is built here: t must not be a param
// while ggml builds the backward pass.
func (gb *gemmBackward) multiplies(t *ggml.Tensor) bool { return gb.used[t] }

// transposed is Wᵀ in f32 for the gradient of a product's input: the copy made once for a
// frozen weight (frozenTranspose), or a copy made in the graph each step (transposedF32). It is
// f32 because ggml's GEMM rounds its second operand, the output's gradient, to the first's type:
// an f16 Wᵀ would flush gradient entries below 6e-8 to zero and keep 11 bits of the others.
func (gb *gemmBackward) transposed(w *ggml.Tensor) *ggml.Tensor {
	if gb.transposedEachStep(w) {
		return gb.transposedF32(w)
	}
	return gb.frozenTranspose(w, ggml.F32)
}

// transposedEachStep reports whether transposed copies W in the graph each step: for a trained
// W, and for a block-quantized one unless keepTransposed (kept, its f32 copy would cost 4 bytes
// a parameter beside the base's 0.5–1).
func (gb *gemmBackward) transposedEachStep(w *ggml.Tensor) bool {
	return gb.trained[w] || ggml.IsQuantized(w.Type()) && !gb.keepTransposed
}

// frozenTranspose is Wᵀ for a frozen weight, a copy of type typ made once (prepare); nil for
// a trained weight. A weight has one copy: the type of the first request.
func (gb *gemmBackward) frozenTranspose(w *ggml.Tensor, typ ggml.Type) *ggml.Tensor {
	if gb.trained[w] {
		return nil
	}
	wt := gb.frozenT[w]
	if wt == nil {
		ne := w.Ne()
		wt = gb.frozen.NewTensor(typ, ne[1], ne[0]).SetName("transposed." + w.Name())
		gb.frozenT[w] = wt
	}
	return wt
}

// prepare places the taps' params (zeroed) and the frozen weights' transposes in memory of the
// backend, and computes the transposes (through an f32 copy where the types differ).
func (gb *gemmBackward) prepare(be *ggml.Backend) error {
	for _, c := range []*ggml.Context{gb.taps, gb.frozen} {
		if err := c.Err(); err != nil {
			return err
		}
	}
	var err error
	if len(gb.tapOf) > 0 {
		if gb.tapBuf, err = be.Alloc(gb.taps); err != nil {
			return err
		}
		gb.tapBuf.Clear(0)
	}
	if len(gb.frozenT) == 0 {
		return nil
	}
	if gb.frozenBuf, err = be.Alloc(gb.frozen); err != nil {
		return err
	}
	n := 3*len(gb.frozenT) + 8
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: n, Graphs: 1, GraphSize: n})
	if err != nil {
		return err
	}
	defer ctx.Close()
	graph, err := ctx.NewGraph(n, false)
	if err != nil {
		return err
	}
	for w, wt := range gb.frozenT {
		if w.Type() != wt.Type() {
			w = ctx.Cast(w, ggml.F32) // ggml copies block-quantized rows only whole
		}
		if err := graph.Expand(ctx.Cpy(ctx.Transpose(w), wt)); err != nil {
			return err
		}
	}
	alloc, err := be.NewAllocator()
	if err != nil {
		return err
	}
	defer alloc.Close()
	if err := alloc.Alloc(graph); err != nil {
		return err
	}
	return be.Compute(graph)
}

// expandCopies puts the input copies (and their releases) into the graph, in the order they
// were made, before anything else: each must run before the products that read its leaf.
func (gb *gemmBackward) expandCopies(graph *ggml.Graph) error {
	for _, in := range gb.inputs {
		if in.copy != nil {
			if err := graph.Expand(in.release); err != nil {
				return err
			}
		}
	}
	return nil
}

// accumulators sets, in accs (BuildBackward's, indexed by the graph's forward nodes), each
// tap's gradient accumulator and each input copy's: the sum of the contributions the backward
// builders make.
func (gb *gemmBackward) accumulators(graph *ggml.Graph, accs []*ggml.Tensor) {
	index := make(map[ggml.TensorID]int, len(accs))
	for i := range accs {
		index[graph.Node(i).ID()] = i
	}
	set := func(node, acc *ggml.Tensor) {
		if node == nil || acc == nil {
			return
		}
		if i, ok := index[node.ID()]; ok {
			accs[i] = acc
		}
	}
	for _, a := range gb.accs {
		set(a.out, a.grad)
	}
	// From the loss back to the inputs, as a backward pass runs: a builder that sums a
	// consumed input's gradient (swiglu) runs after those that make its parts.
	for i := len(gb.backward) - 1; i >= 0; i-- {
		gb.backward[i]()
	}
	for _, in := range gb.inputs {
		if in.copy == nil || len(in.grads) == 0 {
			continue
		}
		set(in.copy, gb.sum(in.grads))
	}
}

// weightGrad builds the gradient of a trained tensor from its products (inᵀ·dzᵀ), its LoRA
// products (linear) and lookups (the scatter of the rows' gradients), after the backward
// pass; nil when it has none.
func (gb *gemmBackward) weightGrad(w *ggml.Tensor) *ggml.Tensor {
	g := gb.g
	var grad *ggml.Tensor
	add := func(d *ggml.Tensor) {
		if grad == nil {
			grad = d
		} else {
			grad = g.Add(grad, d)
		}
	}
	for _, p := range gb.products {
		if p.w == w {
			if p.in.leafT == nil {
				p.in.leafT = gb.groupsT(p.in.leaf, 1)
			}
			add(gb.productGradA(p.in.leafT, p.grad))
		}
	}
	for _, lp := range gb.lora {
		if lp.b == w { // [r, out] from OUT_PROD's [out, r], which runs along out
			add(g.Scale(gb.dense(g.Transpose(g.OutProd(lp.of.grad, lp.u.leaf))), lp.scale))
		}
	}
	for _, gr := range gb.gathers {
		if gr.table == w {
			add(g.GetRowsBack(gr.grad, gr.ids, w))
		}
	}
	return grad
}

// Close frees the taps and the transposed weights.
func (gb *gemmBackward) Close() {
	gb.tapBuf.Close()
	gb.taps.Close()
	gb.frozenBuf.Close()
	gb.frozen.Close()
}

// transposedF32 is Wᵀ in f32 as an operand of product: a view of an f32 W (transposedView), one
// conversion for half-precision types, a conversion then a copy for block-quantized ones (whose
// blocks run along W's rows).
func (gb *gemmBackward) transposedF32(w *ggml.Tensor) *ggml.Tensor {
	g := gb.g
	switch w.Type() {
	case ggml.F32:
		return gb.transposedView(w)
	case ggml.F16, ggml.BF16:
		return g.Cast(g.Transpose(w), ggml.F32)
	}
	return gb.dense(g.Transpose(g.Cast(w, ggml.F32)))
}

var (
	// needCont is toy's dense copy of an f32 transpose (ggml.ContCPU: gemmBackward.dense).
	needCont = kernelrt.Need{Kernel: kernels.KernelCPUContContF32}
	// needSwigluBack is toy's backward of a SwiGLU block's activation (ggml.SwigluBackCPU:
	// gemmBackward.swiglu).
	needSwigluBack = kernelrt.Need{Kernel: kernels.KernelCPUSwigluBackSwigluBack}
)
