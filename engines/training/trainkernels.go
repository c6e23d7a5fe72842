package training

import (
	"slices"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// Training reaches toy's own CPU operations through the kernel table as the decoders do
// (engines/decoding's kernels.go): each use in a training graph — a Trainer's, and an Evaluator's, whose plain
// pass computes as the Trainer's does — is a lookup, TrainNeeds lists those a model's graphs
// make, and a graph runs toy's kernel for a lookup that resolved and ggml's operation for any
// other. A Trainable made by WithKernels resolves what the commands' gate resolved; any other
// resolves against the build's own cpu table (kernelrt.Builtin), which is what every training
// graph ran before the lookups existed.

// TrainNeeds lists the lookups of toy's CPU operations that a Trainer or an Evaluator of m
// makes: the packed GEMM over f32 (activations, trained weights, attention) and over each type
// of m's weight matrices (an adapter's frozen base), the softmax of attention, the dense copy of
// a transpose and, for a SwiGLU feed-forward, its backward. Nothing is looked up on a GPU
// backend, nor in a build whose CPU kernels are scalar (ggml.CPUKernelsFast), where ggml's
// operations run alone.
func TrainNeeds(m Trainable) []kernelrt.Need { return m.trainable().needs() }

// WithKernels returns m, whose Trainers and Evaluators run toy's CPU operations for the lookups
// in resolved only (what the gate's audit resolved: kernelrt.Report.Resolved) and ggml's for
// every other. Pass it to NewTrainer, NewEvaluator and their kin in place of m.
func WithKernels(m Trainable, resolved []kernelrt.Need) Trainable {
	s := decoding.KernelSet{}
	for _, n := range resolved {
		s[n] = true
	}
	return gatedTrainable{m, s}
}

// gatedTrainable is a Trainable with the kernels the gate resolved for it (WithKernels).
type gatedTrainable struct {
	Trainable
	resolved decoding.KernelSet
}

func (g gatedTrainable) trainable() *trainable {
	t := g.Trainable.trainable()
	t.kernels = decoding.KernelSet{}
	if t.mayOwnKernels() {
		t.kernels = g.resolved
	}
	return t
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
