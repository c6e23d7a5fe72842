package ggml

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/cpuload"
)

// ErrUnsupported is wrapped by Compute's error when the backend cannot run an op of the graph
// (a GPU backend lacks some ops, types or shapes the CPU has).
var ErrUnsupported = errors.New("the backend does not support this operation")

// Backend computes graphs on one device. The backend kind is fixed when the binary is built
// (BackendKind); NewBackend opens it.
type Backend struct {
	b       ggmlc.Backend
	threads int
	pool    ggmlc.Threadpool // a CPU backend's workers, kept between graphs
	// load, for a CPU backend of more than one thread, fits the threads a graph computes with
	// to the processors other processes leave free (adaptThreads); nil: always threads.
	load *loadWatch
}

// loadWatch is a CPU backend's view of the machine's load: the meter, the last sample and the
// threads graphs compute with now (at most Backend.threads).
type loadWatch struct {
	meter *cpuload.Meter
	last  cpuload.Sample
	cur   int
}

// loadWindow is how often a CPU backend re-measures the load: long enough for /proc/stat's
// 10 ms ticks to measure it within a few percent on two processors, short enough to follow a
// competing process within a few decoding steps.
const loadWindow = 100 * time.Millisecond

// AdaptThreads, when true (the default), lets a CPU backend of n threads compute each graph
// with fewer when other processes keep processors busy: with n = 2 and one busy process on a
// 2-core machine, a graph's threads would share one core and each operation's barrier would
// wait out a time slice. Benchmarks that must hold the thread count set it false; the
// environment variable TOY_ADAPT_THREADS=0 sets it false for a whole process.
var AdaptThreads = os.Getenv("TOY_ADAPT_THREADS") != "0"

// adaptThreads sets the threads of the next graph from the load measured over the last window:
// the processors others left free (cpuload.Threads), at most the backend's threads.
func (b *Backend) adaptThreads() {
	w := b.load
	if w == nil {
		return
	}
	if !AdaptThreads {
		b.usePool(b.threads)
		return
	}
	if time.Since(w.last.At) < loadWindow {
		return
	}
	now, err := w.meter.Read()
	if err != nil {
		return
	}
	b.usePool(cpuload.Threads(w.meter.CPUs(), cpuload.Others(w.last, now), b.threads))
	w.last = now
}

// ComputeThreads is the number of threads the backend's last graph computed with: Threads, or
// fewer while other processes keep processors busy (AdaptThreads).
func (b *Backend) ComputeThreads() int {
	if b.load != nil {
		return b.load.cur
	}
	return b.threads
}

// UsableThreads is the number of threads a CPU backend computes with when asked for n: n, at
// most the cores this process may run on (runtime.NumCPU, which respects the CPU affinity mask);
// 0 asks for one per usable core. ggml's threads spin at their barriers, so a thread without a
// core of its own stalls every other at each op: -t 4 on 2 cores is hundreds of times slower.
// clamped reports that n was lowered.
func UsableThreads(n int) (threads int, clamped bool) {
	cores := runtime.NumCPU()
	switch {
	case n <= 0:
		return cores, false
	case n > cores:
		return cores, true
	}
	return n, false
}

// NewCPUBackend opens the CPU backend with the given number of threads (0: one per core),
// clamped to the usable cores (UsableThreads); Threads reports the number used. The backend
// keeps its worker threads in a pool between computations until Close.
func NewCPUBackend(threads int) (*Backend, error) {
	if err := linkCheck(); err != nil {
		return nil, fmt.Errorf("ggml: the linked library disagrees with the bindings: %w", err)
	}
	if threads < 0 {
		return nil, fmt.Errorf("ggml: %d threads", threads)
	}
	threads, _ = UsableThreads(threads)
	b := ggmlc.BackendCPUInit()
	if b.IsNil() {
		return nil, fmt.Errorf("ggml: the CPU backend failed to start")
	}
	be := &Backend{b: b}
	if err := be.setCPUThreads(threads); err != nil {
		be.Close()
		return nil, err
	}
	return be, nil
}

// setCPUThreads gives the CPU backend a pool of n threads (the caller's included), replacing
// any other: ggml's workers then wait between graphs instead of being started and joined by
// every Compute, which costs a thread start per worker and graph (a decode step is one graph).
// With more than one thread, the backend follows the machine's load (adaptThreads), starting
// from what is running now.
func (b *Backend) setCPUThreads(n int) error {
	if !b.pool.IsNil() && b.threads == n {
		return nil
	}
	if err := b.newPool(n); err != nil {
		return err
	}
	b.threads, b.load = n, nil
	if n > 1 {
		if m, err := cpuload.NewMeter(); err == nil {
			if first, err := m.Read(); err == nil {
				b.load = &loadWatch{meter: m, last: first, cur: n}
				if others, err := m.RunningOthers(); err == nil && AdaptThreads {
					b.usePool(cpuload.Threads(m.CPUs(), others, n)) // until the first window has passed
				}
			}
		}
	}
	return nil
}

// newPool gives the CPU backend a pool of exactly n threads, replacing any other.
func (b *Backend) newPool(n int) error {
	params := ggmlc.ThreadpoolParamsDefault(n)
	pool := ggmlc.ThreadpoolNew(&params)
	if pool.IsNil() {
		return fmt.Errorf("ggml: cannot start a pool of %d CPU threads", n)
	}
	ggmlc.BackendCPUSetNThreads(b.b, n)
	ggmlc.BackendCPUSetThreadpool(b.b, pool)
	if !b.pool.IsNil() {
		ggmlc.ThreadpoolFree(b.pool)
	}
	b.pool = pool
	return nil
}

// usePool makes the load watch's graphs compute with n threads, in a pool of n: a pool of more
// would keep its idle workers polling for the next graph, each a processor's worth of spinning
// on a machine that has none to spare. A pool that cannot start leaves the threads as they were.
func (b *Backend) usePool(n int) {
	if w := b.load; w != nil && n != w.cur && b.newPool(n) == nil {
		w.cur = n
	}
}

// Raw is the underlying binding handle.
func (b *Backend) Raw() ggmlc.Backend { return b.b }

// Name is the backend's name ("CPU").
func (b *Backend) Name() string { return ggmlc.BackendName(b.b) }

// IsCPU reports whether the backend is ggml's CPU backend, the one that computes toy's own CPU
// operations (ContCPU).
func (b *Backend) IsCPU() bool { return !b.b.IsNil() && ggmlc.BackendIsCPU(b.b) }

// Threads is the number of threads a CPU backend computes with.
func (b *Backend) Threads() int { return b.threads }

// SetThreads changes the number of threads of a CPU backend, clamped to the usable cores
// (UsableThreads).
func (b *Backend) SetThreads(n int) error {
	if n <= 0 {
		return fmt.Errorf("ggml: %d threads", n)
	}
	n, _ = UsableThreads(n)
	if b.b.IsNil() {
		return ErrClosed
	}
	if !ggmlc.BackendIsCPU(b.b) {
		return fmt.Errorf("ggml: %s is not a CPU backend", b.Name())
	}
	return b.setCPUThreads(n)
}

// PauseWorkers lets a CPU backend's pooled workers sleep until its next graph, which wakes
// them, instead of polling for it. For a process that computes on another backend meanwhile:
// two pools' polling workers would otherwise share the cores with the one computing.
func (b *Backend) PauseWorkers() {
	if b != nil && !b.pool.IsNil() {
		ggmlc.ThreadpoolPause(b.pool)
	}
}

// Close frees the backend. It is safe to call more than once.
func (b *Backend) Close() error {
	if b == nil || b.b.IsNil() {
		return nil
	}
	ggmlc.BackendFree(b.b)
	b.b = ggmlc.Backend{}
	if !b.pool.IsNil() {
		ggmlc.ThreadpoolFree(b.pool)
		b.pool = ggmlc.Threadpool{}
	}
	return nil
}

// Buffer is backend memory holding the data of a context's tensors.
type Buffer struct {
	buf ggmlc.BackendBuffer
}

// Alloc places every tensor of ctx that has no memory yet in one new buffer of the backend
// (weights, optimizer state, persistent inputs). The buffer is marked as holding weights, so a
// scheduler keeps ops next to it.
func (b *Backend) Alloc(ctx *Context) (*Buffer, error) {
	if b.b.IsNil() || ctx.c.IsNil() {
		return nil, ErrClosed
	}
	if ctx.err != nil {
		return nil, ctx.err
	}
	if ggmlc.GetFirstTensor(ctx.c).IsNil() {
		return nil, fmt.Errorf("ggml: Alloc: the context has no tensors")
	}
	buf := ggmlc.BackendAllocCtxTensors(ctx.c, b.b)
	if buf.IsNil() {
		return nil, fmt.Errorf("ggml: Alloc: the backend could not allocate %d bytes", ggmlc.BackendAllocCtxTensorsFromBuftSize(ctx.c, ggmlc.BackendGetDefaultBufferType(b.b)))
	}
	ggmlc.BackendBufferSetUsage(buf, ggmlc.BackendBufferUsageWeights)
	return &Buffer{buf: buf}, nil
}

// Size is the buffer's size in bytes.
func (buf *Buffer) Size() int { return ggmlc.BackendBufferGetSize(buf.buf) }

// Clear sets every byte of the buffer to value.
func (buf *Buffer) Clear(value byte) { ggmlc.BackendBufferClear(buf.buf, value) }

// AdviseHugePages asks the system to back a host buffer with transparent huge pages as its
// pages are first written (Linux, where the system allows it; elsewhere, and for a buffer in
// device memory, it does nothing): a buffer read in strides a page or more apart, such as a
// key/value cache whose sequences each own a region of every row, then costs a TLB entry per
// 2 MiB instead of per 4 KiB. Call it before the first write (Clear) for it to take effect.
func (buf *Buffer) AdviseHugePages() {
	if !buf.buf.IsNil() && buf.IsHost() {
		adviseHugePages(ggmlc.BackendBufferGetBase(buf.buf), buf.Size())
	}
}

// IsHost reports whether the buffer is in host memory (every buffer of the CPU backend), which
// HostF32 can read and write in place.
func (buf *Buffer) IsHost() bool { return ggmlc.BackendBufferIsHost(buf.buf) }

// HostF32 is the whole buffer as float32 values in place, for a buffer in host memory whose
// tensors are all F32 (bytes between them, which alignment leaves, read as whatever they hold:
// zero after Clear(0)). It aliases C memory: it is valid until Close, and a computation that
// writes the buffer's tensors changes it.
func (buf *Buffer) HostF32() ([]float32, error) {
	if buf.buf.IsNil() {
		return nil, ErrClosed
	}
	if !buf.IsHost() {
		return nil, fmt.Errorf("ggml: HostF32: the buffer is in device memory (%s)", ggmlc.BackendBufferName(buf.buf))
	}
	return unsafe.Slice((*float32)(ggmlc.BackendBufferGetBase(buf.buf)), buf.Size()/4), nil
}

// DeviceAddress is the address of the buffer's memory on its device (a CUDA device pointer in a
// cuda build); an error for a buffer in host memory.
func (buf *Buffer) DeviceAddress() (uintptr, error) {
	if buf.buf.IsNil() {
		return 0, ErrClosed
	}
	if buf.IsHost() {
		return 0, fmt.Errorf("ggml: DeviceAddress: the buffer is in host memory (%s)", ggmlc.BackendBufferName(buf.buf))
	}
	return uintptr(ggmlc.BackendBufferGetBase(buf.buf)), nil
}

// Holds reports whether t's data lies in the buffer.
func (buf *Buffer) Holds(t *Tensor) bool {
	return t.HasMemory() && t.t.Buffer() == buf.buf
}

// Close frees the buffer; its tensors lose their memory. Safe to call more than once.
func (buf *Buffer) Close() error {
	if buf == nil || buf.buf.IsNil() {
		return nil
	}
	ggmlc.BackendBufferFree(buf.buf)
	buf.buf = ggmlc.BackendBuffer{}
	return nil
}

// Allocator places the intermediate tensors of graphs in one reusable backend buffer, reusing
// memory between nodes whose lifetimes do not overlap (ggml's graph allocator).
type Allocator struct {
	ga ggmlc.GraphAllocator
	b  *Backend
}

// NewAllocator makes a graph allocator for the backend's default buffer type.
func (b *Backend) NewAllocator() (*Allocator, error) {
	if b.b.IsNil() {
		return nil, ErrClosed
	}
	ga := ggmlc.GallocrNew(ggmlc.BackendGetDefaultBufferType(b.b))
	if ga.IsNil() {
		return nil, fmt.Errorf("ggml: cannot make a graph allocator")
	}
	return &Allocator{ga: ga, b: b}, nil
}

// Reserve sizes the allocator's buffer for the worst case g, so later graphs of the same shape
// allocate without growing it.
func (a *Allocator) Reserve(g *Graph) error {
	if !ggmlc.GallocrReserve(a.ga, g.g) {
		return fmt.Errorf("ggml: Allocator.Reserve: out of memory for a graph of %d nodes", g.Len())
	}
	return nil
}

// Alloc gives every tensor of g that has no memory a place in the allocator's buffer.
func (a *Allocator) Alloc(g *Graph) error {
	if g.Len() == 0 {
		return fmt.Errorf("ggml: Allocator.Alloc: the graph is empty")
	}
	if !ggmlc.GallocrAllocGraph(a.ga, g.g) {
		return fmt.Errorf("ggml: Allocator.Alloc: out of memory for a graph of %d nodes", g.Len())
	}
	g.checkedOn = ggmlc.Backend{}
	return nil
}

// Size is the allocator's buffer size in bytes.
func (a *Allocator) Size() int { return ggmlc.GallocrGetBufferSize(a.ga, 0) }

// Close frees the allocator and its buffer. Safe to call more than once.
func (a *Allocator) Close() error {
	if a == nil || a.ga.IsNil() {
		return nil
	}
	ggmlc.GallocrFree(a.ga)
	a.ga = ggmlc.GraphAllocator{}
	return nil
}

// Supports reports whether the backend can compute the op node t, which may be built in any
// context and needs no memory: a GPU backend lacks some ops, types and shapes the CPU has.
func (b *Backend) Supports(t *Tensor) bool {
	return t != nil && !b.b.IsNil() && ggmlc.BackendSupportsOp(b.b, t.t)
}

// Compute runs the graph on the backend. Every tensor it reads must have memory (weights from
// Alloc, the rest from an Allocator). The first Compute of a graph on a backend checks every
// node (memory, and the backend's support for the op); later ones skip that walk until the
// graph changes, so a graph reused every step (a decoder's, a trainer's) pays for it once.
// Such a graph's inputs are set before every Compute, not once: the graph allocator places
// later nodes over an input after its last reader (a decoder's token ids, read only by the
// embedding lookup), so computing it again without them reads what those nodes left (ggml
// may then abort on a GetRows index out of range, or compute garbage).
func (b *Backend) Compute(g *Graph) error {
	if err := b.ready(g, "Compute"); err != nil {
		return err
	}
	b.adaptThreads()
	if st := ggmlc.BackendGraphCompute(b.b, g.g); st != ggmlc.StatusSuccess {
		return fmt.Errorf("ggml: Compute: %s", ggmlc.StatusToString(st))
	}
	return nil
}

// ready refuses to compute g (for the method op) on a closed backend, an empty graph, or one
// that fails check, which runs once per graph and backend until the graph changes.
func (b *Backend) ready(g *Graph, op string) error {
	if b.b.IsNil() {
		return ErrClosed
	}
	if g.Len() == 0 {
		return fmt.Errorf("ggml: %s: the graph is empty", op)
	}
	if g.checkedOn != b.b {
		if err := b.check(g); err != nil {
			return err
		}
		g.checkedOn = b.b
	}
	return nil
}

// check refuses a graph with a node that has no memory or that the backend cannot compute.
func (b *Backend) check(g *Graph) error {
	// A GPU backend aborts the process on an op it cannot run: ask it first.
	checkSupport := !ggmlc.BackendIsCPU(b.b)
	for i := 0; i < g.Len(); i++ {
		n := ggmlc.GraphNode(g.g, i)
		if checkSupport && !ggmlc.BackendSupportsOp(b.b, n) {
			return fmt.Errorf("ggml: Compute: the %s backend cannot compute node %d (%s of %s): %w", b.Name(), i, ggmlc.OpName(n.Op()), ggmlc.TypeName(n.Type()), ErrUnsupported)
		}
		if n.Buffer().IsNil() && n.Data() == nil {
			return fmt.Errorf("ggml: Compute: node %d (%s) has no memory; allocate the graph first", i, ggmlc.OpName(n.Op()))
		}
		for _, s := range n.Src() {
			if !s.IsNil() && s.Data() == nil {
				return fmt.Errorf("ggml: Compute: an operand of node %d (%s) has no memory", i, ggmlc.OpName(n.Op()))
			}
		}
	}
	return nil
}
