package training

import (
	"fmt"
	"slices"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// Trainable is what a Trainer trains and an Evaluator runs: a Model (every weight), an
// Adapter (LoRA matrices on a frozen GGUFModel), or a GGUFModel (evaluated only).
type Trainable interface {
	trainable() *trainable
}

// trainable is a model as the training graph sees it: the transformer's weights, the tensors
// AdamW updates, and the LoRA terms added to weight products.
type trainable struct {
	arch    *transformer.Architecture
	w       *transformer.Weights
	backend *ggml.Backend
	// params are the tensors AdamW updates, in file order.
	params []*ggml.Tensor
	// matrix reports whether a param is a weight matrix: weight decay applies to it, and the
	// trainer computes its gradient itself as a GEMM (see Trainer.build).
	matrix func(*ggml.Tensor) bool
	// lora holds the low-rank terms added to the products of adapted weights.
	lora map[*ggml.Tensor][]decoding.LoRATerm
	// recompute is how many first blocks the Trainer recomputes (LoRAOptions.Recompute).
	recompute int
	// recomputeAttention recomputes the attention probabilities of the blocks the main graph
	// runs in its backward pass (LoRAOptions.RecomputeAttention).
	recomputeAttention bool
	// keepTransposed keeps the transposed copies of block-quantized frozen weights
	// (LoRAOptions.KeepTransposed).
	keepTransposed bool
	// kernels are the lookups of toy's CPU operations the graphs run toy's kernels for
	// (ownKernels, WithKernels); nil until resolved.
	kernels decoding.KernelSet
}

// pass is the model's forward pass over B packed sequences of T tokens under mask (pos their
// positions, nil for an image model), with the LoRA terms added to the products of adapted
// weights. In a training graph gb differentiates the weight products with their LoRA terms,
// the trained lookups and the attention (gemmBackward); nil builds them plainly, as an
// Evaluator does, with the products and the attention's probabilities as a CPU training graph
// computes them with toy's kernels in ks (cpuProduct, attendPacked).
func (t *trainable) pass(ctx *ggml.Context, pos, mask *ggml.Tensor, T, B int, gb *gemmBackward, ks decoding.KernelSet) *transformer.ForwardPass {
	linear := func(w, x *ggml.Tensor) *ggml.Tensor {
		y := cpuProduct(ctx, ks, w, x, ggml.Dense)
		for _, l := range t.lora[w] {
			y = ctx.Add(y, ctx.Scale(ctx.MulMat(l.B, ctx.MulMat(l.A, x)), l.Scale))
		}
		return y
	}
	var gather func(table, ids *ggml.Tensor) *ggml.Tensor
	var swiglu func(gate, up, down, h *ggml.Tensor) (*ggml.Tensor, bool)
	if gb != nil {
		linear = func(w, x *ggml.Tensor) *ggml.Tensor { return gb.linear(w, x, t.lora[w]) }
		gather = gb.gather
		swiglu = func(gate, up, down, h *ggml.Tensor) (*ggml.Tensor, bool) {
			if len(t.lora[gate])+len(t.lora[up])+len(t.lora[down]) > 0 {
				return nil, false // the LoRA terms' gradients go through autodiff
			}
			return gb.swiglu(gate, up, h)
		}
	}
	return &transformer.ForwardPass{Ctx: ctx, A: t.arch, W: t.w, Pos: pos, Attend: attendPacked(ctx, t.arch, mask, T, B, gb, ks),
		Differentiable: true, Gather: gather, Linear: linear, SwiGLU: swiglu}
}

// forward builds the logits [vocab, T·B] of B packed sequences of T tokens (see
// Model.Forward and pass).
func (t *trainable) forward(ctx *ggml.Context, tokens, pos, mask *ggml.Tensor, T, B int, gb *gemmBackward) *ggml.Tensor {
	return t.pass(ctx, pos, mask, T, B, gb, t.ownKernels()).Logits(tokens)
}

// headFrozen reports whether the output projection is neither trained nor adapted, so the
// Trainer can take its loss a chunk at a time (headLoss).
func (t *trainable) headFrozen() bool {
	head := t.w.Head()
	return t.arch.Input != transformer.InputPatches && t.arch.FinalSoftcap == 0 && len(t.lora[head]) == 0 && !slices.Contains(t.params, head)
}

// graphSize bounds the nodes of a training graph (forward, backward, AdamW): 64 nodes per
// layer, 10 per weight product (its input copy and release, tap, and the GEMMs of its
// backward, see gemmBackward) and 6 per LoRA term, and 8 per chunk of its input gradient
// (inputGrad), four times over for the backward pass.
func (t *trainable) graphSize() int {
	a := t.arch
	products := 7 + 1
	chunks := func(width int) int { return 8 * int((int64(width)+inputGradChunk-1)/inputGradChunk) }
	perLayer := chunks(a.NHeads*a.HeadDimK) + 2*chunks(a.NKVHeads*max(a.HeadDimK, a.HeadDimV)) + 2*chunks(a.DModel) + 2*chunks(a.DFF)
	terms := 0
	for _, ts := range t.lora {
		terms += len(ts)
	}
	fwd := 16 + (64+10*products+perLayer+6*terms/a.NLayers)*a.NLayers + 16*headChunks(a.Vocab, a.Context) + chunks(a.Vocab)
	return 4*fwd + 4*len(t.params) + GradNormNodes(len(t.params)) + 256
}

// checkTrainable refuses an architecture whose graph has no backward in ggml.
func (t *trainable) checkTrainable() error {
	a := t.arch
	switch {
	case a.IsMoE():
		return fmt.Errorf("training %s: mixtures of experts are not trainable (ggml has no backward for their routing)", a.Name)
	case a.FFN == transformer.FFNGeGLU:
		return fmt.Errorf("training %s: ggml has no backward for GELU, which its GeGLU feed-forward uses", a.Name)
	case a.AttnSoftcap > 0 || a.FinalSoftcap > 0:
		return fmt.Errorf("training %s: ggml has no backward for tanh, which its logit soft-caps use", a.Name)
	case a.SlidingWindow > 0:
		return fmt.Errorf("training %s: sliding-window attention is not trainable yet", a.Name)
	}
	return nil
}

// mayOwnKernels says whether toy's CPU operations may run in t's graphs: on the CPU backend,
// in a build whose kernels are vectorized.
func (t *trainable) mayOwnKernels() bool { return t.backend.IsCPU() && ggml.CPUKernelsFast() }

// needs lists the lookups t's graphs make (TrainNeeds).
func (t *trainable) needs() []kernelrt.Need {
	if !t.mayOwnKernels() {
		return nil
	}
	ns := []kernelrt.Need{decoding.NeedPacked(ggml.F32)}
	for _, ty := range t.multipliedTypes() {
		if ty != ggml.F32 {
			ns = append(ns, decoding.NeedPacked(ty))
		}
	}
	ns = append(ns, decoding.NeedSoftMax, needCont)
	if t.arch.FFN == transformer.FFNSwiGLU && !t.arch.IsMoE() {
		ns = append(ns, needSwigluBack)
	}
	return ns
}

// multipliedTypes are the types, in ggml's order, of the weight matrices t's graphs multiply:
// the blocks' projections, the output head and an image model's patch embedding.
func (t *trainable) multipliedTypes() []ggml.Type {
	seen := map[ggml.Type]bool{}
	add := func(w *ggml.Tensor) {
		if w != nil {
			seen[w.Type()] = true
		}
	}
	add(t.w.Head())
	add(t.w.PatchEmbd())
	for _, l := range t.w.Layers {
		for _, w := range []*ggml.Tensor{l.Wq, l.Wk, l.Wv, l.Wqkv, l.Wo, l.Gate, l.Up, l.Down} {
			add(w)
		}
	}
	var ts []ggml.Type
	for ty := range seen {
		ts = append(ts, ty)
	}
	slices.Sort(ts)
	return ts
}

// ownKernels is the set t's graphs run toy's kernels for: what WithKernels gave it, else every
// lookup of t's the build's cpu table resolves with its own modules (kernelrt.Builtin).
func (t *trainable) ownKernels() decoding.KernelSet {
	if t.kernels == nil {
		t.kernels = decoding.KernelSet{}
		for _, n := range kernelrt.Builtin(kernelrt.BuildTarget(kernels.BackendCPU), t.needs()) {
			t.kernels[n] = true
		}
	}
	return t.kernels
}

// classify builds the class logits [classes, B] of the uploaded images (see
// transformer.ForwardPass.Classify and trainable.pass).
func (t *trainable) classify(ctx *ggml.Context, in *transformer.ImageInputs, gb *gemmBackward) *ggml.Tensor {
	f := t.pass(ctx, nil, in.Mask, t.arch.Context, in.B, gb, nil)
	return f.Classify(in)
}
