package ggml_test

import (
	"fmt"

	"github.com/toyml/toy/ggml"
)

// Example is the README's walk through the Go layer: weights in a backend buffer, a graph in a
// context of its own, an allocator for its intermediates, compute, read back.
func Example() {
	be, err := ggml.NewBackend(2)
	if err != nil {
		panic(err)
	}
	defer be.Close()
	w, _ := ggml.NewContext(ggml.ContextOptions{MaxTensors: 2})
	defer w.Close()
	a, b := w.NewTensor(ggml.F32, 3, 2), w.NewTensor(ggml.F32, 3, 4)
	buf, _ := be.Alloc(w)
	defer buf.Close()
	_ = a.SetF32([]float32{1, 2, 3, 4, 5, 6})
	_ = b.SetF32([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1})

	c, _ := ggml.NewContext(ggml.ContextOptions{MaxTensors: 8, Graphs: 1, GraphSize: 8})
	defer c.Close()
	out := c.MulMat(a, b) // [2, 4]: row i of a dotted with row j of b
	g, _ := c.NewGraph(8, false)
	if err := g.Expand(out); err != nil {
		panic(err)
	}
	al, _ := be.NewAllocator()
	defer al.Close()
	_ = al.Alloc(g)
	_ = be.Compute(g)
	vals, _ := out.F32()
	fmt.Println(out.Shape(), vals)

	bad := c.MulMat(a, c.NewTensor(ggml.F32, 5, 2)) // a mismatched shape: an error, no abort
	fmt.Println(bad == nil, c.Err() != nil)
	// Output:
	// [2 4] [1 4 2 5 3 6 6 15]
	// true true
}
