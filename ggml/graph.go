package ggml

import (
	"fmt"

	"github.com/toyml/toy/generated/ggmlc"
)

// Graph is a computation graph built in a Context: the forward pass and, when it was made with
// gradients, the backward pass.
type Graph struct {
	ctx   *Context
	g     ggmlc.Graph
	size  int
	grads bool
}

// NewGraph makes an empty graph of at most size nodes in c; grads reserves gradient slots for
// BuildBackward. The context must have been sized for it (ContextOptions.Graphs).
func (c *Context) NewGraph(size int, grads bool) (*Graph, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.c.IsNil() {
		return nil, ErrClosed
	}
	if size <= 0 {
		return nil, fmt.Errorf("ggml: NewGraph: size %d is not positive", size)
	}
	if need, free := ggmlc.GraphOverheadCustom(size, grads), c.Free(); need > free {
		return nil, fmt.Errorf("ggml: NewGraph: a graph of %d nodes needs %d bytes, the context has %d free (raise ContextOptions.Graphs or GraphSize)", size, need, free)
	}
	return &Graph{ctx: c, g: ggmlc.NewGraphCustom(c.c, size, grads), size: size, grads: grads}, nil
}

// Raw is the underlying binding handle.
func (g *Graph) Raw() ggmlc.Graph { return g.g }

// Len is the number of nodes (computed tensors) in the graph.
func (g *Graph) Len() int { return ggmlc.GraphNNodes(g.g) }

// Node is the i-th node in execution order.
func (g *Graph) Node(i int) *Tensor {
	if i < 0 || i >= g.Len() {
		return nil
	}
	return g.ctx.wrap(ggmlc.GraphNode(g.g, i))
}

// Expand adds t and everything it depends on to the graph. Errors recorded on the context while
// building t are returned here.
func (g *Graph) Expand(t *Tensor) error {
	if err := g.ctx.err; err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("ggml: Graph.Expand: invalid tensor")
	}
	if n := countNew(g, t); g.Len()+n > g.size {
		return fmt.Errorf("ggml: Graph.Expand: %d nodes exceed the graph's size %d", g.Len()+n, g.size)
	}
	ggmlc.BuildForwardExpand(g.g, t.t)
	return nil
}

// countNew bounds how many nodes expanding t could add: the nodes reachable from t. It walks
// in Go so that a graph that would overflow is refused before ggml aborts.
func countNew(g *Graph, t *Tensor) int {
	seen := map[ggmlc.Tensor]bool{}
	var walk func(ggmlc.Tensor)
	walk = func(x ggmlc.Tensor) {
		if x.IsNil() || seen[x] {
			return
		}
		seen[x] = true
		for _, s := range x.Src() {
			walk(s)
		}
	}
	walk(t.t)
	return len(seen)
}

// BuildBackward appends the backward pass for the loss (marked with SetLoss) to a graph made
// with grads, after its forward pass was expanded. gradAccs may give, for forward nodes by
// index, persistent tensors to accumulate gradients in; nil lets ggml allocate them in the
// graph's context. The context needs room for the gradient nodes (about twice the forward).
//
// It also applies the fix for ggml's in-place bug on the CPU (GGML-NOTES §1.3): the inputs of
// RMS_NORM_BACK (src 0) and SOFT_MAX_BACK (src 1) are marked as outputs so the allocator never
// lets those kernels overwrite an input they still read.
func (g *Graph) BuildBackward(gradAccs []*Tensor) error {
	if err := g.ctx.err; err != nil {
		return err
	}
	if !g.grads {
		return fmt.Errorf("ggml: BuildBackward: the graph was made without gradients")
	}
	n := g.Len()
	hasLoss := false
	for i := 0; i < n; i++ {
		hasLoss = hasLoss || g.Node(i).t.Flags()&int32(ggmlc.TensorFlagLoss) != 0
	}
	if !hasLoss {
		return fmt.Errorf("ggml: BuildBackward: no node of the graph is marked as the loss")
	}
	if need := 3 * n; g.size < need {
		return fmt.Errorf("ggml: BuildBackward: the graph holds %d nodes; forward and backward of %d forward nodes need up to %d", g.size, n, need)
	}
	if err := g.ctx.room(3 * n); err != nil {
		return fmt.Errorf("ggml: BuildBackward: %w", err)
	}
	var accs []ggmlc.Tensor
	if gradAccs != nil {
		if len(gradAccs) != n {
			return fmt.Errorf("ggml: BuildBackward: %d gradient accumulators for %d forward nodes", len(gradAccs), n)
		}
		accs = make([]ggmlc.Tensor, n)
		for i, a := range gradAccs {
			if a != nil {
				accs[i] = a.t
			}
		}
	}
	ggmlc.BuildBackwardExpand(g.ctx.c, g.g, accs)
	for i := 0; i < g.Len(); i++ {
		t := ggmlc.GraphNode(g.g, i)
		switch t.Op() {
		case ggmlc.OpRMSNormBack:
			ggmlc.SetOutput(t.Src()[0])
		case ggmlc.OpSoftMaxBack:
			ggmlc.SetOutput(t.Src()[1])
		}
	}
	return nil
}

// Grad is the gradient of t in a graph with a backward pass, or nil if t has none.
func (g *Graph) Grad(t *Tensor) *Tensor {
	if t == nil || !g.grads {
		return nil
	}
	return g.ctx.wrap(ggmlc.GraphGetGrad(g.g, t.t))
}

// Reset zeroes the gradient accumulators and AdamW moments and sets the loss gradient to 1.
// Call it once after the graph is allocated, not every step.
func (g *Graph) Reset() { ggmlc.GraphReset(g.g) }
