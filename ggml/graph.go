package ggml

import (
	"fmt"

	"github.com/toyml/toy/generated/ggmlc"
)

// Graph is a computation graph built in a Context: the forward pass and, when it was made with
// gradients, the backward pass.
type Graph struct {
	ctx  *Context
	g    ggmlc.Graph
	size int
	// members are the tensors Expand has put in the graph, and leafs how many of them are
	// leaves: Expand counts only what is new against the graph's size.
	members map[ggmlc.Tensor]bool
	leafs   int
	grads   bool
	// checkedOn is the backend a Compute last checked the graph for; the check is repeated
	// only after the graph changes (Expand, BuildBackward) or on another backend.
	checkedOn ggmlc.Backend
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
	return &Graph{ctx: c, g: ggmlc.NewGraphCustom(c.c, size, grads), size: size, grads: grads, members: map[ggmlc.Tensor]bool{}}, nil
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
	added, nodes, leafs := g.newMembers(t)
	if g.Len()+nodes > g.size || g.leafs+leafs > g.size {
		for _, x := range added {
			delete(g.members, x)
		}
		return fmt.Errorf("ggml: Graph.Expand: %d nodes and %d leaves exceed the graph's size %d", g.Len()+nodes, g.leafs+leafs, g.size)
	}
	ggmlc.BuildForwardExpand(g.g, t.t)
	g.leafs += leafs
	g.checkedOn = ggmlc.Backend{}
	return nil
}

// newMembers adds to g.members, in Go, what expanding t adds to the graph — the tensors
// reachable from t that it does not hold yet — and counts them as ggml does: a tensor no op
// computes and that is not a param is a leaf, anything else a node. So a graph that would
// overflow is refused before ggml aborts (the caller then removes added), and each tensor is
// walked once over all Expands.
func (g *Graph) newMembers(t *Tensor) (added []ggmlc.Tensor, nodes, leafs int) {
	var walk func(ggmlc.Tensor)
	walk = func(x ggmlc.Tensor) {
		if x.IsNil() || g.members[x] {
			return
		}
		g.members[x] = true
		added = append(added, x)
		for _, s := range x.Src() {
			walk(s)
		}
		if x.Op() == ggmlc.OpNone && x.Flags()&int32(ggmlc.TensorFlagParam) == 0 {
			leafs++
		} else {
			nodes++
		}
	}
	walk(t.t)
	return added, nodes, leafs
}
