package llama

import (
	"fmt"

	"github.com/toyml/toy/ggml"
)

// GradientReducer sums float32 buffers across the replicas of a data-parallel job (an MPI
// allreduce): after AllReduceSum returns, every replica's buf holds the element-wise sum of
// every replica's buf. Each replica calls it once per training step, with a buffer of the same
// length.
type GradientReducer interface {
	AllReduceSum(buf []float32) error
}

// TrainerOption configures a Trainer when it is built.
type TrainerOption func(*Trainer)

// DataParallel makes the Trainer one replica of a data-parallel job: each step computes the
// gradients of the replica's share of the global batch, averages them (and the loss) over the
// replicas with one r.AllReduceSum, and only then runs the AdamW step, so every replica that
// starts from the same weights and optimizer state keeps them identical. Each replica's
// gradient counts by the positions its loss covers, so replicas of B sequences each
// reproduce one trainer of the whole batch, up to the order of the float32 sums.
//
// The graph is then computed in two parts (forward and backward, then AdamW) with every
// gradient kept until the reduction: it holds a second copy of the trained weights' size in
// gradients, and the reduction one more in host memory.
func DataParallel(r GradientReducer) TrainerOption {
	return func(tr *Trainer) { tr.dp = &dataParallel{reducer: r} }
}

// dataParallel is a Trainer's share of a data-parallel job: the local gradients, which the
// training graph keeps as outputs, and the reduced ones, leaves of the optimizer graph.
type dataParallel struct {
	reducer GradientReducer
	local   []*ggml.Tensor // each trained tensor's gradient of the local batch, in params order
	reduced []*ggml.Tensor // the averaged gradients AdamW reads
	ctx     *ggml.Context  // reduced's tensors and the optimizer graph
	buf     *ggml.Buffer
	opt     *ggml.Graph // the AdamW steps
	alloc   *ggml.Allocator
	flat    []float32 // every gradient, then the weighted loss and the weight
}

// begin makes the context of the reduced gradients and the optimizer graph for n trained
// tensors.
func (dp *dataParallel) begin(n int) error {
	size := 4*n + 16
	var err error
	dp.ctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: n + size, Graphs: 1, GraphSize: size})
	if err != nil {
		return err
	}
	dp.opt, err = dp.ctx.NewGraph(size, false)
	return err
}

// gradient keeps grad, the local gradient of a trained tensor, as an output of the training
// graph and returns the tensor AdamW reads instead: its average over the replicas.
func (dp *dataParallel) gradient(grad *ggml.Tensor) *ggml.Tensor {
	dp.local = append(dp.local, grad.SetOutput())
	r := dp.ctx.NewTensor(ggml.F32, grad.Shape()...)
	if r != nil {
		r.SetName("dp." + grad.Name())
	}
	dp.reduced = append(dp.reduced, r)
	return r
}

// finish allocates the reduced gradients and the optimizer graph, into which the caller has
// expanded the AdamW steps.
func (dp *dataParallel) finish(be *ggml.Backend) error {
	if err := dp.ctx.Err(); err != nil {
		return err
	}
	n := 2
	for _, g := range dp.local {
		if g.Type() != ggml.F32 {
			return fmt.Errorf("llama: data-parallel training reduces f32 gradients; %s is %s", g.Name(), ggml.TypeName(g.Type()))
		}
		n += int(g.Len())
	}
	var err error
	if dp.buf, err = be.Alloc(dp.ctx); err != nil {
		return err
	}
	if dp.alloc, err = be.NewAllocator(); err != nil {
		return err
	}
	if err := dp.alloc.Alloc(dp.opt); err != nil {
		return err
	}
	dp.flat = make([]float32, n)
	return nil
}

// step averages the local gradients over the replicas, weighting each replica's by weight
// (the positions its loss covers), runs the AdamW steps on the average and returns the
// replicas' weighted mean loss.
func (dp *dataParallel) step(be *ggml.Backend, loss, weight float32) (float32, error) {
	off := 0
	for _, g := range dp.local {
		part := dp.flat[off : off+int(g.Len())]
		if err := g.ReadF32(part); err != nil {
			return 0, err
		}
		off += len(part)
	}
	grads := dp.flat[:off]
	if weight != 1 {
		for i := range grads {
			grads[i] *= weight
		}
	}
	dp.flat[off], dp.flat[off+1] = loss*weight, weight
	if err := dp.reducer.AllReduceSum(dp.flat); err != nil {
		return 0, err
	}
	total := dp.flat[off+1]
	if total <= 0 {
		return 0, fmt.Errorf("llama: data-parallel step: the replicas' losses cover %g positions", total)
	}
	inv := 1 / total
	for i := range grads {
		grads[i] *= inv
	}
	off = 0
	for _, r := range dp.reduced {
		n := int(r.Len())
		if err := r.SetF32(grads[off : off+n]); err != nil {
			return 0, err
		}
		off += n
	}
	if err := be.Compute(dp.opt); err != nil {
		return 0, err
	}
	return dp.flat[len(grads)] * inv, nil
}

// close frees the optimizer graph and the reduced gradients.
func (dp *dataParallel) close() {
	if dp == nil {
		return
	}
	dp.alloc.Close()
	dp.buf.Close()
	if dp.ctx != nil {
		dp.ctx.Close()
	}
}
