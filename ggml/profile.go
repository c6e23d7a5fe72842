package ggml

import (
	"fmt"
	"sort"
	"time"

	"github.com/toyml/toy/generated/ggmlc"
)

// ComputeTimed is Compute one node at a time, in the graph's order, calling each with every
// node and the wall time it took: where a graph's time goes, by op. The results are Compute's
// (the nodes run in the same order on the same memory); each node pays a compute call of its
// own (on the CPU backend a wake-up of the thread pool, some microseconds), so the times add up
// to a little more than Compute's. Compute itself does not time anything. Like Compute, it
// needs the graph's inputs set before each call.
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

// LiveTensor is a tensor the graph allocator holds at the peak of a graph (Graph.PeakLive).
type LiveTensor struct {
	Tensor *Tensor
	Bytes  int
}

// PeakLive replays, on an allocated graph, what ggml's graph allocator does with its buffer —
// a graph's leaves placed before its first node, every other tensor when its node runs, in
// place of its only remaining operand where the op allows it, and freed after its last reader
// unless it is an output — and returns the node at which the most bytes are held, those bytes
// and the tensors holding them, largest first. The allocator's buffer is at least that large;
// what it has beyond is fragmentation.
func (g *Graph) PeakLive() (node, peak int, live []LiveTensor) {
	// The allocator's own tensors are those in the buffer most non-view nodes are in.
	count := map[ggmlc.BackendBuffer]int{}
	for i := 0; i < g.Len(); i++ {
		if n := ggmlc.GraphNode(g.g, i); n.ViewSrc().IsNil() {
			count[n.Buffer()]++
		}
	}
	var own ggmlc.BackendBuffer
	for b, c := range count {
		if c > count[own] {
			own = b
		}
	}
	type state struct{ children, views, size int }
	st := map[ggmlc.Tensor]*state{}
	get := func(t ggmlc.Tensor) *state {
		s := st[t]
		if s == nil {
			s = &state{}
			st[t] = s
		}
		return s
	}
	isOwn := func(t ggmlc.Tensor) bool { return t.ViewSrc().IsNil() && t.Buffer() == own }
	held := map[ggmlc.Tensor]bool{}
	bytes := 0
	hold := func(t ggmlc.Tensor) {
		if isOwn(t) && !held[t] {
			held[t] = true
			get(t).size = ggmlc.BackendBufferGetAllocSize(own, t)
			bytes += get(t).size
		}
	}
	release := func(t ggmlc.Tensor) {
		if held[t] && t.Flags()&int32(ggmlc.TensorFlagOutput) == 0 {
			delete(held, t)
			bytes -= get(t).size
		}
	}
	for i := 0; i < g.Len(); i++ {
		n := ggmlc.GraphNode(g.g, i)
		if v := n.ViewSrc(); !v.IsNil() && n.Op() != ggmlc.OpNone {
			get(v).views++
		}
		for _, s := range n.Src() {
			if s.IsNil() {
				continue
			}
			get(s).children++
			if s.Op() == ggmlc.OpNone {
				hold(s) // a leaf: placed before the first node
			}
		}
	}
	snapshot := func() []LiveTensor {
		out := make([]LiveTensor, 0, len(held))
		for t := range held {
			out = append(out, LiveTensor{g.ctx.wrap(t), get(t).size})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
		return out
	}
	peak, node, live = bytes, -1, snapshot()
	for i := 0; i < g.Len(); i++ {
		n := ggmlc.GraphNode(g.g, i)
		if isOwn(n) && !held[n] {
			reused := false
			if inPlaceOps[n.Op()] {
				for _, s := range n.Src() {
					if !s.IsNil() && held[s] && s.Flags()&int32(ggmlc.TensorFlagOutput) == 0 && get(s).children == 1 && get(s).views == 0 &&
						s.Type() == n.Type() && s.Ne() == n.Ne() && s.Nb() == n.Nb() {
						delete(held, s)
						held[n] = true
						get(n).size = get(s).size
						reused = true
						break
					}
				}
			}
			if !reused {
				hold(n)
			}
		}
		if bytes > peak {
			peak, node, live = bytes, i, snapshot()
		}
		for _, s := range n.Src() {
			if s.IsNil() {
				continue
			}
			p := get(s)
			p.children--
			if p.children == 0 && p.views == 0 {
				if v := s.ViewSrc(); !v.IsNil() {
					vs := get(v)
					vs.views--
					if vs.views == 0 && vs.children == 0 {
						release(v)
					}
				} else {
					release(s)
				}
			}
		}
	}
	return node, peak, live
}

// inPlaceOps are the ops whose result the graph allocator may place over an operand
// (ggml_op_can_inplace in ggml-alloc.c).
var inPlaceOps = map[ggmlc.Op]bool{
	ggmlc.OpFill: true, ggmlc.OpScale: true, ggmlc.OpDiagMaskZero: true, ggmlc.OpDiagMaskInf: true,
	ggmlc.OpAdd: true, ggmlc.OpAddID: true, ggmlc.OpAdd1: true, ggmlc.OpSub: true, ggmlc.OpMul: true,
	ggmlc.OpDiv: true, ggmlc.OpSqr: true, ggmlc.OpSqrt: true, ggmlc.OpLog: true, ggmlc.OpUnary: true,
	ggmlc.OpRope: true, ggmlc.OpRopeBack: true, ggmlc.OpSiluBack: true, ggmlc.OpRMSNorm: true,
	ggmlc.OpRMSNormBack: true, ggmlc.OpSoftMax: true, ggmlc.OpSoftMaxBack: true,
}
