package training

import (
	"fmt"

	"github.com/toyml/toy/ggml"
)

// GradientReducer sums float32 buffers across the replicas of a data-parallel job (an MPI
// allreduce): after AllReduceSum returns, every replica's buf holds the element-wise sum of
// every replica's buf. Each replica makes the same calls, with buffers of the same lengths.
type GradientReducer interface {
	AllReduceSum(buf []float32) error
}

// DeviceReducer is a GradientReducer that also sums gradients a GPU backend keeps in device
// memory (NCCL): after AllReduceSumDevice returns, the count float32 values at the device
// address addr hold, on every replica, the sum of every replica's, and the next computation on
// the device may read them. A data-parallel trainer on a GPU backend needs one.
type DeviceReducer interface {
	GradientReducer
	AllReduceSumDevice(addr uintptr, count int) error
}

// dataParallel is a Trainer's share of a data-parallel job. Each trained tensor's gradient
// has a slot, a tensor of ctx, and every slot, then the loss, lies in buf, which the reducer
// sums as a whole. A gradient the graph can compute in place shares its slot's memory; any
// other (a view) is copied into its slot by the training graph.
type dataParallel struct {
	reducer GradientReducer
	grads   []*ggml.Tensor // each trained tensor's gradient of the local batch, in params order
	slots   []*ggml.Tensor // where the reducer sums them, and AdamW reads them
	loss    *ggml.Tensor   // the replica's weighted loss, then the mean over the replicas
	ctx     *ggml.Context  // slots, loss and the optimizer graph
	buf     *ggml.Buffer
	host    []float32   // buf in place, on a backend whose memory is the host's
	opt     *ggml.Graph // the AdamW steps
	alloc   *ggml.Allocator
	// share is the positions the replica's loss covers, then those of every replica: an
	// allocation of its own, since cgo refuses memory that holds Go pointers.
	share []float32
}

// begin makes the context of the slots and the optimizer graph for n trained tensors.
func (dp *dataParallel) begin(n int) error {
	size := 4*n + GradNormNodes(n) + 16
	var err error
	dp.ctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: n + 1 + size, Graphs: 1, GraphSize: size})
	if err != nil {
		return err
	}
	dp.opt, err = dp.ctx.NewGraph(size, false)
	return err
}

// gradient keeps grad, the local gradient of a trained tensor, as an output of the training
// graph and returns the tensor AdamW reads instead: its slot, which holds the average over the
// replicas after the reduction.
func (dp *dataParallel) gradient(grad *ggml.Tensor) *ggml.Tensor {
	dp.grads = append(dp.grads, grad.SetOutput())
	slot := dp.ctx.NewTensor(ggml.F32, grad.Shape()...)
	if slot != nil {
		slot.SetName("dp." + grad.Name())
	}
	dp.slots = append(dp.slots, slot)
	return slot
}

// finish allocates the slots and places each gradient in its own (or copies it there, adding
// the copy to graph), then allocates the optimizer graph, into which the caller has expanded
// the AdamW steps.
func (dp *dataParallel) finish(be *ggml.Backend, g *ggml.Context, graph *ggml.Graph) error {
	dp.loss = dp.ctx.NewTensor(ggml.F32, 1)
	if err := dp.ctx.Err(); err != nil {
		return err
	}
	for _, gr := range dp.grads {
		if gr.Type() != ggml.F32 {
			return fmt.Errorf("data-parallel training reduces f32 gradients; %s is %s", gr.Name(), ggml.TypeName(gr.Type()))
		}
	}
	var err error
	if dp.buf, err = be.Alloc(dp.ctx); err != nil {
		return err
	}
	dp.buf.Clear(0) // the bytes alignment leaves between slots are summed too
	for _, t := range append(dp.slots, dp.loss) {
		if !dp.buf.Holds(t) {
			return fmt.Errorf("data-parallel training: the %s backend split the gradients over several buffers", be.Name())
		}
	}
	if dp.buf.IsHost() {
		if dp.host, err = dp.buf.HostF32(); err != nil {
			return err
		}
	} else if _, ok := dp.reducer.(DeviceReducer); !ok {
		return fmt.Errorf("data-parallel training on the %s backend reduces its gradients in device memory, which this reducer cannot (NCCL can)", be.Name())
	}
	for i, gr := range dp.grads {
		if gr.ShareMemory(dp.slots[i]) == nil {
			continue
		}
		// A view, or a tensor with memory of its own: the graph copies it.
		if err := graph.Expand(g.Cpy(gr, dp.slots[i])); err != nil {
			return err
		}
	}
	if dp.alloc, err = be.NewAllocator(); err != nil {
		return err
	}
	return dp.alloc.Alloc(dp.opt)
}

// scale agrees with the other replicas on how much this replica's gradient counts: its share
// weight/Σweight of the positions the replicas' losses cover. The trainer seeds the backward
// pass with it, so the reduction's sum is the average.
func (dp *dataParallel) scale(weight float32) (float32, error) {
	if dp.share == nil {
		dp.share = make([]float32, 1)
	}
	dp.share[0] = weight
	if err := dp.reducer.AllReduceSum(dp.share); err != nil {
		return 0, err
	}
	if total := dp.share[0]; total <= 0 {
		return 0, fmt.Errorf("data-parallel step: the replicas' losses cover %g positions", total)
	}
	return weight / dp.share[0], nil
}

// step sums the weighted gradients and loss of every replica in place, runs the AdamW steps on
// the average and returns the replicas' mean loss.
func (dp *dataParallel) step(be *ggml.Backend, weightedLoss float32) (float32, error) {
	if err := dp.loss.SetF32([]float32{weightedLoss}); err != nil {
		return 0, err
	}
	if dp.host != nil {
		if err := dp.reducer.AllReduceSum(dp.host); err != nil {
			return 0, err
		}
	} else {
		addr, err := dp.buf.DeviceAddress()
		if err != nil {
			return 0, err
		}
		if err := dp.reducer.(DeviceReducer).AllReduceSumDevice(addr, dp.buf.Size()/4); err != nil {
			return 0, err
		}
	}
	if err := be.Compute(dp.opt); err != nil {
		return 0, err
	}
	loss, err := dp.loss.F32()
	if err != nil {
		return 0, err
	}
	return loss[0], nil
}

// close frees the optimizer graph and the slots.
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
