// Package ggml declares the C surface of the ggml tensor library that toy binds: handles, structs,
// enums and functions of ggml.h, ggml-alloc.h, ggml-backend.h, ggml-cpu.h and gguf.h, as linked
// from github.com/ollama/ollama/ml/backend/ggml/ggml/src. It is a spec: cmd/kernelgen reads it and
// emits the cgo bindings in generated/; nothing imports it at run time. See docs/SPECS.md.
package ggml

import . "github.com/toyml/toy/specs/spec"

// Context is a ggml context: an arena that owns the metadata (and, unless created with
// NoAlloc, the data) of every tensor and graph made in it. Everything made in a context dies
// with Free.
//
//kernelgen:handle struct ggml_context
type Context struct{}

// Tensor is an n-dimensional ggml tensor (at most 4 dimensions). Its shape is Ne, innermost
// dimension first (Ne[0] is the row length), and its byte strides are Nb. A tensor made by an
// operation is a graph node: Op and Src record how it is computed, and its data is only valid
// after the graph has been computed. Its fields (see TensorFields) are read-only from Go.
//
//kernelgen:handle struct ggml_tensor
type Tensor struct{}

// TensorFields is the C layout of Tensor (struct ggml_tensor, 336 bytes on 64-bit hosts); each
// named field becomes a read-only accessor on Tensor.
//
//kernelgen:fields Tensor
type TensorFields struct {
	// Type is the element type.
	Type Type
	// Buffer is the backend buffer that holds the data, or nil when the tensor is not allocated
	// in one (e.g. data in a context's own memory, or not allocated yet).
	Buffer BackendBuffer
	// Ne is the number of elements in each dimension, innermost first; unused dimensions are 1.
	Ne [4]int64
	// Nb is the stride of each dimension in bytes: Nb[0] is the type size, Nb[1] is the size of
	// a row (Nb[0]*Ne[0]/BlckSize for block-quantized types), and Nb[i] = Nb[i-1]*Ne[i-1] for a
	// contiguous tensor.
	Nb [4]Size
	// Op is the operation that computes this tensor (OpNone for leaves).
	Op Op
	// OpParams holds the operation's parameters (e.g. eps, rope settings) as raw 32-bit words.
	OpParams [16]int32
	// Flags is a bit set of TensorFlag values (input, output, param, loss).
	Flags int32
	// Src are the operation's operands; unused slots are nil.
	Src [10]Tensor
	// ViewSrc is the tensor this one is a view of, or nil.
	ViewSrc Tensor
	// ViewOffs is the byte offset of this view into ViewSrc.
	ViewOffs Size
	// Data is the address of the first element; on a GPU backend it is a device address, so
	// use BackendTensorGet/BackendTensorSet rather than dereferencing it.
	Data Ptr
	// Name is the tensor's name (at most 63 bytes), as set by SetName.
	Name [64]Char
	// Extra is backend-private data.
	Extra Ptr
	_     [8]Char //kernelgen:c padding
}

// Graph is a computation graph (ggml's cgraph): the nodes (operations) and leaves needed to
// compute a set of output tensors, and for training the gradient of every parameter. It lives in
// the context it was made in.
//
//kernelgen:handle struct ggml_cgraph
type Graph struct{}

// Backend is an initialized compute backend (a stream on one device: CPU, CUDA, Metal, ...).
// It computes graphs whose tensors live in buffers it can use.
//
//kernelgen:handle ggml_backend_t = struct ggml_backend
type Backend struct{}

// BackendBuffer is a block of backend memory (host or device) in which tensors are allocated.
//
//kernelgen:handle ggml_backend_buffer_t = struct ggml_backend_buffer
type BackendBuffer struct{}

// BufferType is a kind of backend memory (e.g. CPU host memory, CUDA device memory); it
// allocates BackendBuffers and knows their alignment.
//
//kernelgen:handle ggml_backend_buffer_type_t = struct ggml_backend_buffer_type
type BufferType struct{}

// Device is a compute device known to the backend registry (the CPU, a GPU, an accelerator).
// DevInit makes a Backend on it.
//
//kernelgen:handle ggml_backend_dev_t = struct ggml_backend_device
type Device struct{}

// BackendReg is a backend registration: one backend implementation (e.g. "CPU", "CUDA"),
// statically linked or loaded from a shared library, and the devices it provides.
//
//kernelgen:handle ggml_backend_reg_t = struct ggml_backend_reg
type BackendReg struct{}

// GraphAllocator (ggml's gallocr) allocates the intermediate tensors of a graph in one backend
// buffer, reusing memory between nodes whose lifetimes do not overlap.
//
//kernelgen:handle ggml_gallocr_t = struct ggml_gallocr
type GraphAllocator struct{}

// Scheduler (ggml's backend sched) splits a graph across several backends, allocates the
// intermediate tensors of each part and copies tensors between backends as needed; ops run
// next to their weights and fall back to later backends (usually the CPU) when a backend does
// not support them.
//
//kernelgen:handle ggml_backend_sched_t = struct ggml_backend_sched
type Scheduler struct{}

// GGUF is a GGUF file in memory: its key-value metadata and tensor infos (and, when loaded
// with data, the tensor data), read from a file or built up for writing.
//
//kernelgen:handle struct gguf_context
type GGUF struct{}
