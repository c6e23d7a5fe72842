package training

import (
	"github.com/toyml/toy/engines/decoding"
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
