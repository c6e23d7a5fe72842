//go:build cuda

package mpi

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/generated/nccl"
)

// NCCL is this rank's NCCL communicator over the GPUs of the job: one rank per GPU, the
// unique id that names the group made by rank 0 and broadcast over MPI. Its collectives work
// on device memory, queued on the device's default stream. It exists in cuda builds only;
// DeviceWorld is what training uses of it.
//
// It has been run only against a stand-in library (mpi/testdata/fakenccl.c): no machine with
// NCCL and a GPU was available (docs/DISTRIBUTED.md).
type NCCL struct {
	comm nccl.Comm
	w    *World
}

// ncclCheck turns an NCCL result into an error.
func ncclCheck(r nccl.Result, op string) error {
	if r == nccl.ResultSuccess {
		return nil
	}
	return fmt.Errorf("nccl: %s: %s (%s)", op, nccl.GetErrorString(r), r)
}

// NewNCCL loads NCCL and makes this rank's communicator: rank 0 creates the unique id, MPI
// broadcasts it, and every rank joins. The calling thread's current CUDA device must be this
// rank's GPU. Every rank must call it.
func (w *World) NewNCCL() (*NCCL, error) {
	if err := nccl.Load(); err != nil {
		return nil, fmt.Errorf("%w (install NCCL, e.g. NVIDIA's libnccl2, or put libnccl.so.2 on LD_LIBRARY_PATH)", err)
	}
	var id [128]byte
	if w.Rank() == 0 {
		if err := ncclCheck(nccl.GetUniqueID(unsafe.Pointer(&id[0])), "ncclGetUniqueId"); err != nil {
			return nil, err
		}
	}
	if err := w.Broadcast(id[:], 0); err != nil {
		return nil, err
	}
	c := &NCCL{w: w}
	if err := ncclCheck(nccl.CommInitRank(&c.comm, w.Size(), nccl.UniqueID{Internal: string(id[:])}, w.Rank()), "ncclCommInitRank"); err != nil {
		return nil, err
	}
	return c, nil
}

// AllReduceSum sums count float32 values at the device address send over the ranks into recv
// on every rank (send == recv works in place).
func (c *NCCL) AllReduceSum(send, recv unsafe.Pointer, count int) error {
	return ncclCheck(nccl.AllReduce(send, recv, count, nccl.DataTypeFloat32, nccl.RedOpSum, c.comm, nccl.Stream{}), "ncclAllReduce")
}

// Broadcast copies count float32 values at root's device address send into recv on every rank.
func (c *NCCL) Broadcast(send, recv unsafe.Pointer, count, root int) error {
	return ncclCheck(nccl.Broadcast(send, recv, count, nccl.DataTypeFloat32, root, c.comm, nccl.Stream{}), "ncclBroadcast")
}

// Close frees the communicator.
func (c *NCCL) Close() error {
	if c == nil || c.comm.IsNil() {
		return nil
	}
	err := ncclCheck(nccl.CommDestroy(c.comm), "ncclCommDestroy")
	c.comm = nccl.Comm{}
	return err
}

// DeviceWorld is a World whose ranks each drive one GPU: besides the World's collectives on
// host memory, it sums float32 gradients in device memory with ncclAllReduce
// (training.DeviceReducer), in place.
type DeviceWorld struct {
	*World
	nccl *NCCL
	wait func() error
}

// OnDevices makes this rank's NCCL communicator (NewNCCL; every rank must call it) and returns
// the World with it. The process must see its GPU alone, as device 0 (PinGPU), since NCCL
// takes the calling thread's current device and Go moves calls between threads. wait blocks
// until the device has finished the work queued on it (cuCtxSynchronize): ggml computes on
// streams of its own, which do not wait for NCCL's.
func (w *World) OnDevices(wait func() error) (*DeviceWorld, error) {
	c, err := w.NewNCCL()
	if err != nil {
		return nil, err
	}
	return &DeviceWorld{World: w, nccl: c, wait: wait}, nil
}

// AllReduceSumDevice replaces the count float32 values at device address addr, on every rank,
// by their sum over the ranks, and returns when the device holds the result. It is bounded by
// the World's collective timeout.
func (d *DeviceWorld) AllReduceSumDevice(addr uintptr, count int) error {
	// A device address, never Go memory: the conversion through memory keeps vet's check of
	// uintptr conversions, which guards Go pointers, out of it.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finalized {
		return fmt.Errorf("mpi: ncclAllReduce after Finalize")
	}
	return d.guard("ncclAllReduce", d.opts.Timeout, func() error {
		if err := d.nccl.AllReduceSum(p, p, count); err != nil {
			return err
		}
		return d.wait()
	})
}

// Close frees the NCCL communicator (the World stays).
func (d *DeviceWorld) Close() error { return d.nccl.Close() }
