package ggml

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/toyml/toy/generated/ggmlc"
)

// ErrClosed is returned when a closed Context, Backend or file is used.
var ErrClosed = errors.New("ggml: use after Close")

var linkCheck = sync.OnceValue(ggmlc.CheckLinked)

// ContextOptions size a Context. ggml contexts are fixed-size arenas: every tensor, view and op
// result takes one slot of tensor metadata, so MaxTensors bounds what a graph may build.
type ContextOptions struct {
	// MaxTensors is the number of tensor objects (inputs, views and op results) it can hold.
	MaxTensors int
	// Graphs is the number of graphs it can hold, each of GraphSize nodes (Grads: with
	// gradient slots).
	Graphs    int
	GraphSize int
	Grads     bool
}

// Context owns tensor metadata; the data of its tensors lives in backend buffers
// (Backend.Alloc for weights, an Allocator for graphs). It is not safe for concurrent use.
// Close frees it; tensors from it must not be used afterwards.
type Context struct {
	c   ggmlc.Context
	err error
	// memSize is the arena's size; tensorOverhead is what one tensor object takes of it.
	memSize, tensorOverhead int
	// pins keeps the parameters of toy's own operations (pinned) where ggml's nodes point to
	// them, until Close.
	pins runtime.Pinner
}

// NewContext makes a Context with room for what opts asks.
func NewContext(opts ContextOptions) (*Context, error) {
	if err := linkCheck(); err != nil {
		return nil, fmt.Errorf("ggml: the linked library disagrees with the bindings: %w", err)
	}
	if opts.MaxTensors < 0 || opts.Graphs < 0 || opts.GraphSize < 0 {
		return nil, fmt.Errorf("ggml: negative context size in %+v", opts)
	}
	if opts.Graphs > 0 && opts.GraphSize <= 0 {
		opts.GraphSize = DefaultGraphSize
	}
	// One extra tensor slot keeps a little headroom for ggml's own bookkeeping.
	mem := (opts.MaxTensors+1)*ggmlc.TensorOverhead() + opts.Graphs*ggmlc.GraphOverheadCustom(opts.GraphSize, opts.Grads)
	c := ggmlc.Init(ggmlc.InitParams{MemSize: mem, NoAlloc: true})
	if c.IsNil() {
		return nil, fmt.Errorf("ggml: cannot allocate a context of %d bytes", mem)
	}
	return wrapContext(c), nil
}

// wrapContext makes a Context of a ggml context the bindings created.
func wrapContext(c ggmlc.Context) *Context {
	return &Context{c: c, memSize: ggmlc.GetMemSize(c), tensorOverhead: ggmlc.TensorOverhead()}
}

// DefaultGraphSize is ggml's default number of nodes in a graph (GGML_DEFAULT_GRAPH_SIZE).
const DefaultGraphSize = 2048

// Close frees the context. It is safe to call more than once.
func (c *Context) Close() error {
	if c == nil || c.c.IsNil() {
		return nil
	}
	ggmlc.Free(c.c)
	c.pins.Unpin()
	c.c = ggmlc.Context{}
	c.err = ErrClosed
	return nil
}

// Err is the first error recorded while building in this context.
func (c *Context) Err() error { return c.err }

// Free is the number of bytes left in the context's arena.
func (c *Context) Free() int {
	if c.c.IsNil() {
		return 0
	}
	return c.memSize - ggmlc.UsedMem(c.c)
}

// room checks that n more tensor objects fit.
func (c *Context) room(n int) error {
	if c.c.IsNil() {
		return ErrClosed
	}
	if need, free := n*c.tensorOverhead, c.Free(); need > free {
		return fmt.Errorf("context is full: %d more tensors need %d bytes, %d are free (raise ContextOptions.MaxTensors)", n, need, free)
	}
	return nil
}
