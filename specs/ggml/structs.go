package ggml

import . "github.com/toyml/toy/specs/spec"

// InitParams configures a new Context (see Init).
//
//kernelgen:struct struct ggml_init_params
type InitParams struct {
	// MemSize is the size of the context's arena in bytes: TensorOverhead() per tensor plus
	// GraphOverhead per graph, plus the tensor data unless NoAlloc is set.
	MemSize Size
	// MemBuffer is caller-owned memory of MemSize bytes to use as the arena, or nil to let ggml
	// allocate (and free) it.
	MemBuffer Ptr
	// NoAlloc makes the context hold tensor metadata only; the data is allocated later in a
	// backend buffer (BackendAllocCtxTensors, a GraphAllocator or a Scheduler).
	NoAlloc bool
}

// GGUFInitParams configures GGUFInitFromFile.
//
//kernelgen:struct struct gguf_init_params
type GGUFInitParams struct {
	// NoAlloc, together with Ctx, creates the file's tensors without data (shape, type and name
	// only); when false the whole tensor data blob is read into the new context.
	NoAlloc bool
	// Ctx, when not nil, receives a new Context holding one tensor per tensor in the file. The
	// caller frees it with Free.
	Ctx *Context
}
