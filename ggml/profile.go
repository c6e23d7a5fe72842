package ggml

import (
	"fmt"
	"time"

	"github.com/toyml/toy/generated/ggmlc"
)

// ComputeTimed is Compute one node at a time, in the graph's order, calling each with every
// node and the wall time it took: where a graph's time goes, by op. The results are Compute's
// (the nodes run in the same order on the same memory); each node pays a compute call of its
// own (on the CPU backend a wake-up of the thread pool, some microseconds), so the times add up
// to a little more than Compute's. Compute itself does not time anything.
func (b *Backend) ComputeTimed(g *Graph, each func(node *Tensor, d time.Duration)) error {
	if err := b.ready(g, "ComputeTimed"); err != nil {
		return err
	}
	ctx, err := NewContext(ContextOptions{Graphs: 1, GraphSize: 1})
	if err != nil {
		return err
	}
	defer ctx.Close()
	one, err := ctx.NewGraph(1, false)
	if err != nil {
		return err
	}
	for i := 0; i < g.Len(); i++ {
		n := ggmlc.GraphNode(g.g, i)
		ggmlc.GraphClear(one.g)
		ggmlc.GraphAddNode(one.g, n)
		t0 := time.Now()
		if st := ggmlc.BackendGraphCompute(b.b, one.g); st != ggmlc.StatusSuccess {
			return fmt.Errorf("ggml: ComputeTimed: node %d (%s): %s", i, describeNode(n), ggmlc.StatusToString(st))
		}
		each(g.ctx.wrap(n), time.Since(t0))
	}
	return nil
}

// OpLabel names the op that computes t, with the unary or GLU function where it has one:
// "MUL_MAT", "UNARY(SILU)", "GLU(SWIGLU)", "NONE" for a leaf.
func (t *Tensor) OpLabel() string {
	op := ggmlc.OpName(t.t.Op())
	switch t.t.Op() {
	case ggmlc.OpUnary:
		op += "(" + ggmlc.UnaryOpName(ggmlc.GetUnaryOp(t.t)) + ")"
	case ggmlc.OpGlu:
		op += "(" + ggmlc.GluOpName(ggmlc.GetGluOp(t.t)) + ")"
	}
	return op
}
