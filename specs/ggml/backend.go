package ggml

import . "github.com/toyml/toy/specs/spec"

// BackendFuncs are ggml's backend API (ggml-backend.h, the backend helpers of ggml-alloc.h and
// the CPU backend of ggml-cpu.h): backends, buffer types, buffers, moving tensor data, devices
// and their registry, and the scheduler. Each binds ggml_backend_NAME as BackendNAME.
//
// The usual arrangement: persistent tensors (weights, optimizer state) live in a NoAlloc
// context whose tensors are placed with BackendAllocCtxTensors; each step builds a graph in a
// fresh NoAlloc context, which a GraphAllocator (one backend) or a Scheduler (several) then
// allocates and computes.
//
//kernelgen:functions prefix=ggml_backend_ goprefix=Backend
type BackendFuncs interface {
	// ---- the CPU backend ----

	// CPUInit makes a CPU backend (4 threads until CPUSetNThreads).
	CPUInit() Backend
	// IsCPU reports whether be is a CPU backend.
	IsCPU(be Backend) bool
	// CPUSetNThreads sets the number of threads the CPU backend be computes with.
	CPUSetNThreads(be Backend, nThreads Int)
	// CPUBufferType is the buffer type of host memory for the CPU backend.
	CPUBufferType() BufferType
	// CPUBufferFromPtr wraps size bytes of caller-owned host memory at ptr (e.g. an mmapped
	// file) as a CPU buffer without copying; the memory must outlive the buffer.
	CPUBufferFromPtr(ptr Ptr, size Size) BackendBuffer

	// ---- backends ----

	// Name is be's name (e.g. "CPU", "CUDA0").
	Name(be Backend) string
	// Free releases be.
	Free(be Backend)
	// GetDefaultBufferType is the buffer type be computes from (its device memory).
	GetDefaultBufferType(be Backend) BufferType
	// AllocBuffer allocates a buffer of size bytes of be's default buffer type, or returns nil.
	AllocBuffer(be Backend, size Size) BackendBuffer
	// GetAlignment is the alignment of be's default buffer type in bytes.
	GetAlignment(be Backend) Size
	// GetMaxSize is the largest buffer be's default buffer type can allocate.
	GetMaxSize(be Backend) Size
	// GetDevice is the device be runs on.
	GetDevice(be Backend) Device
	// GraphCompute computes every node of g on be and waits for the result. All tensors of g
	// must be allocated in buffers be can use.
	GraphCompute(be Backend, g Graph) Status
	// Synchronize waits until all queued work on be is done.
	Synchronize(be Backend)
	// SupportsOp reports whether be can compute the node op.
	SupportsOp(be Backend, op Const[Tensor]) bool
	// SupportsBuft reports whether be can compute on tensors in buffers of type buft.
	SupportsBuft(be Backend, buft BufferType) bool
	// OffloadOp reports whether be wants to compute op even though its weights live elsewhere
	// (e.g. large batches on a GPU).
	OffloadOp(be Backend, op Const[Tensor]) bool

	// ---- tensor data ----

	// TensorSet copies size bytes from host memory at data into t's data at byte offset;
	// t must be allocated in a buffer.
	TensorSet(t Tensor, data Const[Ptr], offset, size Size)
	// TensorGet copies size bytes of t's data from byte offset into host memory at data;
	// t must be allocated in a buffer.
	TensorGet(t Const[Tensor], data Ptr, offset, size Size)
	// TensorMemset sets size bytes of t's data at byte offset to value.
	TensorMemset(t Tensor, value uint8, offset, size Size)
	// TensorSetAsync is TensorSet queued on be; data must stay valid until Synchronize.
	TensorSetAsync(be Backend, t Tensor, data Const[Ptr], offset, size Size)
	// TensorGetAsync is TensorGet queued on be; data is valid after Synchronize.
	TensorGetAsync(be Backend, t Const[Tensor], data Ptr, offset, size Size)
	// TensorCopy copies the data of src into dst (same shape), across backends if needed.
	TensorCopy(src, dst Tensor)
	// TensorCopyAsync copies src (on backendSrc) into dst (on backendDst) after the work
	// queued on backendSrc; backendDst waits for it.
	TensorCopyAsync(backendSrc, backendDst Backend, src, dst Tensor)
	// TensorAlloc places t's data at addr inside buf (which must contain it) and initializes t.
	TensorAlloc(buf BackendBuffer, t Tensor, addr Ptr) Status
	// ViewInit sets up the data of the view t from its view source, which must be allocated.
	ViewInit(t Tensor) Status
	// AllocCtxTensors allocates one buffer of be's default type holding every tensor of ctx
	// that has no data yet, and places them in it; it returns nil on failure (or when there is
	// nothing to allocate).
	AllocCtxTensors(ctx Context, be Backend) BackendBuffer
	// AllocCtxTensorsFromBuft is AllocCtxTensors with buffers of type buft.
	AllocCtxTensorsFromBuft(ctx Context, buft BufferType) BackendBuffer
	// AllocCtxTensorsFromBuftSize is the size of the buffer AllocCtxTensorsFromBuft would
	// allocate.
	AllocCtxTensorsFromBuftSize(ctx Context, buft BufferType) Size

	// ---- buffer types ----

	// BuftName is the name of buft (e.g. "CPU", "CUDA0").
	BuftName(buft BufferType) string
	// BuftAllocBuffer allocates a buffer of size bytes of type buft, or returns nil.
	BuftAllocBuffer(buft BufferType, size Size) BackendBuffer
	// BuftGetAlignment is the alignment of buft's buffers in bytes.
	BuftGetAlignment(buft BufferType) Size
	// BuftGetMaxSize is the largest buffer buft can allocate.
	BuftGetMaxSize(buft BufferType) Size
	// BuftGetAllocSize is the bytes t needs in a buffer of type buft (Nbytes plus any padding).
	BuftGetAllocSize(buft BufferType, t Const[Tensor]) Size
	// BuftIsHost reports whether buft's buffers are host memory the CPU can read directly.
	BuftIsHost(buft BufferType) bool
	// BuftGetDevice is the device buft's buffers live on.
	BuftGetDevice(buft BufferType) Device

	// ---- buffers ----

	// BufferName is the name of buf's buffer type.
	BufferName(buf BackendBuffer) string
	// BufferFree releases buf; its tensors must not be used afterwards.
	BufferFree(buf BackendBuffer)
	// BufferGetBase is the address of buf's first byte (a device address for GPU buffers).
	BufferGetBase(buf BackendBuffer) Ptr
	// BufferGetSize is buf's size in bytes.
	BufferGetSize(buf BackendBuffer) Size
	// BufferInitTensor lets buf's backend set up t, whose data was just placed in buf.
	BufferInitTensor(buf BackendBuffer, t Tensor) Status
	// BufferGetAlignment is the alignment of buf in bytes.
	BufferGetAlignment(buf BackendBuffer) Size
	// BufferGetMaxSize is the largest tensor buf can hold.
	BufferGetMaxSize(buf BackendBuffer) Size
	// BufferGetAllocSize is the bytes t needs in buf.
	BufferGetAllocSize(buf BackendBuffer, t Const[Tensor]) Size
	// BufferClear sets every byte of buf to value.
	BufferClear(buf BackendBuffer, value uint8)
	// BufferIsHost reports whether buf is host memory the CPU can read directly.
	BufferIsHost(buf BackendBuffer) bool
	// BufferSetUsage tells the scheduler what buf holds; mark weights with
	// BackendBufferUsageWeights so their ops run next to them.
	BufferSetUsage(buf BackendBuffer, usage BackendBufferUsage)
	// BufferGetUsage is what buf holds, as set by BufferSetUsage.
	BufferGetUsage(buf BackendBuffer) BackendBufferUsage
	// BufferGetType is buf's buffer type.
	BufferGetType(buf BackendBuffer) BufferType
	// BufferReset lets buf's backend drop per-tensor state (e.g. before reusing the memory).
	BufferReset(buf BackendBuffer)

	// ---- devices ----

	// DevCount is the number of registered devices.
	DevCount() Size
	// DevGet is registered device index (0 ≤ index < DevCount).
	DevGet(index Size) Device
	// DevByName finds the device with the given name (e.g. "CPU", "CUDA0"), or returns nil.
	DevByName(name string) Device
	// DevByType is the first device of type typ, or nil.
	DevByType(typ DeviceType) Device
	// DevName is dev's short name (e.g. "CPU", "CUDA0").
	DevName(dev Device) string
	// DevDescription describes dev (e.g. the CPU or GPU model).
	DevDescription(dev Device) string
	// DevType is the kind of dev.
	DevType(dev Device) DeviceType
	// DevBackendReg is the registration that provides dev.
	DevBackendReg(dev Device) BackendReg
	// DevInit makes a backend on dev; params are backend-specific options ("" for none).
	DevInit(dev Device, params string) Backend
	// DevReset resets dev (ollama addition; e.g. releases a GPU context).
	//kernelgen:optional
	DevReset(dev Device)
	// DevBufferType is the buffer type of dev's memory.
	DevBufferType(dev Device) BufferType
	// DevHostBufferType is a host buffer type dev transfers from quickly (pinned memory), or
	// nil.
	DevHostBufferType(dev Device) BufferType
	// DevBufferFromHostPtr wraps size bytes of host memory at ptr as a buffer dev can use,
	// without copying (if dev supports it), with tensors up to maxTensorSize bytes.
	DevBufferFromHostPtr(dev Device, ptr Ptr, size, maxTensorSize Size) BackendBuffer
	// DevSupportsOp reports whether dev can compute the node op.
	DevSupportsOp(dev Device, op Const[Tensor]) bool
	// DevSupportsBuft reports whether dev can compute on tensors in buffers of type buft.
	DevSupportsBuft(dev Device, buft BufferType) bool
	// DevOffloadOp reports whether dev wants to compute op even though its weights live
	// elsewhere.
	DevOffloadOp(dev Device, op Const[Tensor]) bool

	// ---- the registry ----

	// RegCount is the number of registered backends.
	RegCount() Size
	// RegGet is registered backend index (0 ≤ index < RegCount).
	RegGet(index Size) BackendReg
	// RegByName finds the registered backend with the given name (e.g. "CUDA"), or returns
	// nil.
	RegByName(name string) BackendReg
	// RegName is reg's name (e.g. "CPU", "CUDA").
	RegName(reg BackendReg) string
	// RegDevCount is the number of devices reg provides.
	RegDevCount(reg BackendReg) Size
	// RegDevGet is device index of reg.
	RegDevGet(reg BackendReg, index Size) Device
	// InitByName makes a backend on the device with the given name; params are
	// backend-specific options ("" for none). It returns nil if there is no such device.
	InitByName(name, params string) Backend
	// InitByType makes a backend on the first device of type typ, or returns nil.
	InitByType(typ DeviceType, params string) Backend
	// InitBest makes a backend on the first GPU, else the first integrated GPU, else the CPU.
	InitBest() Backend
	// Load loads a backend from the shared library at path (e.g. libggml-cuda.so, built from
	// the same ggml sources) and registers it; it returns nil and logs on failure.
	Load(path string) BackendReg
	// Unload unregisters reg and unloads its library.
	Unload(reg BackendReg)
	// LoadAll loads every known backend library found in the default locations.
	LoadAll()
	// LoadAllFromPath loads the best variant of every known backend library in dirPath.
	LoadAllFromPath(dirPath string)

	// ---- the scheduler ----

	// SchedNew makes a scheduler over nBackends backends, earlier ones preferred; the last
	// must be the CPU. bufts gives each backend's compute buffer type (nil for their
	// defaults), graphSize the most nodes a graph may have. parallel keeps several copies of
	// inputs for pipelining; opOffload lets a GPU compute ops whose weights live on the CPU.
	SchedNew(backends []Backend, bufts []BufferType, nBackends Int, graphSize Size,
		parallel, opOffload bool) Scheduler
	// SchedNewExt is SchedNew with allocBuffers false to defer allocating compute buffers
	// (ollama addition).
	//kernelgen:optional
	SchedNewExt(backends []Backend, bufts []BufferType, nBackends Int, graphSize Size,
		parallel, opOffload, allocBuffers bool) Scheduler
	// SchedFree releases s and its compute buffers.
	SchedFree(s Scheduler)
	// SchedSetBatchSize hints the batch size, which decides when ops are offloaded (ollama
	// addition).
	//kernelgen:optional
	SchedSetBatchSize(s Scheduler, batchSize Int)
	// SchedReserve sizes s's compute buffers for the worst-case graph measureGraph without
	// computing it; it returns false if allocation fails.
	SchedReserve(s Scheduler, measureGraph Graph) bool
	// SchedGetNBackends is the number of backends of s.
	SchedGetNBackends(s Scheduler) Int
	// SchedGetBackend is backend i of s.
	SchedGetBackend(s Scheduler, i Int) Backend
	// SchedGetNSplits is the number of parts the last graph was split into.
	SchedGetNSplits(s Scheduler) Int
	// SchedGetNCopies is the number of input copies s keeps (more than 1 when parallel).
	SchedGetNCopies(s Scheduler) Int
	// SchedGetBufferType is the compute buffer type s uses for be.
	SchedGetBufferType(s Scheduler, be Backend) BufferType
	// SchedGetBufferSize is the size of s's compute buffer for be.
	SchedGetBufferSize(s Scheduler, be Backend) Size
	// SchedGetAttemptedBufferSize is the compute buffer size s last tried to allocate for be,
	// even if that failed (ollama addition).
	//kernelgen:optional
	SchedGetAttemptedBufferSize(s Scheduler, be Backend) Size
	// SchedSetTensorBackend pins node to be (call after SchedReset, before allocating).
	SchedSetTensorBackend(s Scheduler, node Tensor, be Backend)
	// SchedGetTensorBackend is the backend node was assigned to, or nil.
	SchedGetTensorBackend(s Scheduler, node Tensor) Backend
	// SchedSplitGraph assigns g's nodes to backends and splits it, without allocating.
	SchedSplitGraph(s Scheduler, g Graph)
	// SchedAllocGraph assigns, splits and allocates g so inputs can be set before compute; it
	// returns false if allocation fails.
	SchedAllocGraph(s Scheduler, g Graph) bool
	// SchedGraphCompute computes g (allocating it first if needed) and waits for the result.
	SchedGraphCompute(s Scheduler, g Graph) Status
	// SchedGraphComputeAsync starts computing g; SchedSynchronize waits for it.
	SchedGraphComputeAsync(s Scheduler, g Graph) Status
	// SchedSynchronize waits until all of s's backends are done.
	SchedSynchronize(s Scheduler)
	// SchedReset drops all assignments and allocations of the previous graph (its tensors'
	// data becomes invalid); call it before allocating a new graph.
	SchedReset(s Scheduler)
}

// GallocrFuncs are ggml's graph allocator (ggml-alloc.h), bound as Gallocr*: it places the
// intermediate tensors of a graph in one backend buffer, reusing memory between nodes.
//
//kernelgen:functions prefix=ggml_gallocr_ goprefix=Gallocr
type GallocrFuncs interface {
	// New makes a graph allocator for buffers of type buft (e.g.
	// BackendGetDefaultBufferType(be)).
	New(buft BufferType) GraphAllocator
	// NewN makes a graph allocator with nBufs buffers, one per buffer type in bufts.
	NewN(bufts []BufferType, nBufs Int) GraphAllocator
	// Free releases ga and its buffers.
	Free(ga GraphAllocator)
	// Reserve sizes ga's buffer for the worst-case graph g without allocating g's tensors; it
	// returns false if allocation fails.
	Reserve(ga GraphAllocator, g Graph) bool
	// AllocGraph allocates every tensor of g that has no data yet, growing the buffer if
	// needed (single buffer); inputs are placed first and outputs are never reused. It returns
	// false on failure.
	AllocGraph(ga GraphAllocator, g Graph) bool
	// GetBufferSize is the size of ga's buffer bufferID (0 for a single buffer).
	GetBufferSize(ga GraphAllocator, bufferID Int) Size
	// GetAttemptedBufferSize is the size ga last tried to allocate for buffer bufferID, even if
	// that failed (ollama addition).
	//kernelgen:optional
	GetAttemptedBufferSize(ga GraphAllocator, bufferID Int) Size
}
