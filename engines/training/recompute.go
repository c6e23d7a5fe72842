package training

import (
	"fmt"

	"github.com/toyml/toy/ggml"
)

// recompute is the part of a Trainer that keeps the activations of an adapter's first n
// blocks out of memory (gradient checkpointing, LoRAOptions.Recompute): a forward graph runs
// them without a backward pass and keeps only the residual stream entering each; the
// Trainer's main graph starts from the stream entering block n; then, from block n−1 down to
// 0, one graph per block recomputes it from its stored input, back-propagates the gradient
// the block above passed down (the surrogate loss sum(output ⊙ gradient)), and steps the
// block's adapters. The activations of one block live at a time, for one more forward pass
// of those blocks a step. All graphs share the Trainer's allocator buffer, which is sized for
// the largest: they compute one after another and hand values over in state tensors only.
type recompute struct {
	n int
	// stream[l] (l ≤ n) is the residual stream [d, B·T] entering block l; grad[l%2] the
	// loss's gradient with respect to it, from the graph that computes it to the next.
	stream []*ggml.Tensor
	grad   [2]*ggml.Tensor
	// layer maps each trained tensor to the block it adapts.
	layer map[*ggml.Tensor]int
	// kept holds a copy of each adapter gradient (Trainer.keepGrads), which the graphs'
	// shared buffer would not keep.
	kept map[*ggml.Tensor]*ggml.Tensor
	ctxs []*ggml.Context
	// gemms differentiate the recomputed blocks' products, one for each graph of back.
	gemms []*gemmBackward
	fwd   *ggml.Graph
	back  []*ggml.Graph // block n−1's first, in the order they compute
	// norms sum the squares of the gradients each graph of back steps its adapters with.
	norms []*GradNorm
}

// stateTensors is how many state tensors newRecompute declares for params trained tensors.
func recomputeStateTensors(n, params int) int { return n + 3 + params }

// newRecompute checks that t's first n blocks can be recomputed — every trained tensor is a
// LoRA matrix of a block — and declares the state tensors in s.
func newRecompute(s *ggml.Context, t *trainable, n, rows int, keepGrads bool) (*recompute, error) {
	if n < 0 || n > t.arch.NLayers {
		return nil, fmt.Errorf("training: recompute %d blocks of %d", n, t.arch.NLayers)
	}
	rc := &recompute{n: n, layer: map[*ggml.Tensor]int{}, kept: map[*ggml.Tensor]*ggml.Tensor{}}
	for l := range t.w.Layers {
		for _, name := range LoRATargets {
			for _, term := range t.lora[t.w.Layers[l].Target(name)] {
				rc.layer[term.A], rc.layer[term.B] = l, l
			}
		}
	}
	for _, p := range t.params {
		if _, ok := rc.layer[p]; !ok {
			return nil, fmt.Errorf("recomputing blocks trains LoRA adapters only (%s is not one)", p.Name())
		}
		if keepGrads {
			rc.kept[p] = s.NewTensor(ggml.F32, p.Shape()...).SetName("grad." + p.Name())
		}
	}
	d := int64(t.arch.DModel)
	for l := 0; l <= n; l++ {
		rc.stream = append(rc.stream, s.NewTensor(ggml.F32, d, int64(rows)).SetName(fmt.Sprintf("recompute.stream.%d", l)))
	}
	for i := range rc.grad {
		rc.grad[i] = s.NewTensor(ggml.F32, d, int64(rows)).SetName(fmt.Sprintf("recompute.grad.%d", i))
	}
	return rc, s.Err()
}

// trains reports whether the main graph trains p (p adapts a block it runs).
func (rc *recompute) trains(p *ggml.Tensor) bool { return rc == nil || rc.layer[p] >= rc.n }

// keptGrad is the copy of p's gradient a recomputed block's graph keeps (nil if none).
func (rc *recompute) keptGrad(p *ggml.Tensor) *ggml.Tensor {
	if rc == nil {
		return nil
	}
	return rc.kept[p]
}

// close frees the graphs' contexts.
func (rc *recompute) close() {
	if rc == nil {
		return
	}
	for _, gb := range rc.gemms {
		gb.Close()
	}
	for _, c := range rc.ctxs {
		c.Close()
	}
	rc.ctxs, rc.gemms = nil, nil
}
