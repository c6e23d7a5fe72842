package training

import (
	"fmt"

	"github.com/toyml/toy/ggml"
)

// recompute is the part of a Trainer that keeps the activations of an adapter's first n
// blocks out of memory (gradient checkpointing, LoRAOptions.Recompute): a forward graph runs
// them without a backward pass and keeps only the residual stream entering each; the
// Trainer's main graph starts from the stream entering block n; then, from block n−1 down to
// 0, one graph per block recomputes it from its stored input, back-propagates the gradient
// the block above passed down (the surrogate loss sum(output ⊙ gradient)), and steps the
// block's adapters. The activations of one block live at a time, for one more forward pass
// of those blocks a step. All graphs share the Trainer's allocator buffer, which is sized for
// the largest: they compute one after another and hand values over in state tensors only.
type recompute struct {
	n int
	// stream[l] (l ≤ n) is the residual stream [d, B·T] entering block l; grad[l%2] the
	// loss's gradient with respect to it, from the graph that computes it to the next.
	stream []*ggml.Tensor
	grad   [2]*ggml.Tensor
	// layer maps each trained tensor to the block it adapts.
	layer map[*ggml.Tensor]int
	// kept holds a copy of each adapter gradient (Trainer.keepGrads), which the graphs'
	// shared buffer would not keep.
	kept map[*ggml.Tensor]*ggml.Tensor
	ctxs []*ggml.Context
	// gemms differentiate the recomputed blocks' products, one for each graph of back.
	gemms []*gemmBackward
	fwd   *ggml.Graph
	back  []*ggml.Graph // block n−1's first, in the order they compute
	// norms sum the squares of the gradients each graph of back steps its adapters with.
	norms []*GradNorm
}

// stateTensors is how many state tensors newRecompute declares for params trained tensors.
func recomputeStateTensors(n, params int) int { return n + 3 + params }

// newRecompute checks that t's first n blocks can be recomputed — every trained tensor is a
// LoRA matrix of a block — and declares the state tensors in s.
func newRecompute(s *ggml.Context, t *trainable, n, rows int, keepGrads bool) (*recompute, error) {
	if n < 0 || n > t.arch.NLayers {
		return nil, fmt.Errorf("llama: recompute %d blocks of %d", n, t.arch.NLayers)
	}
	rc := &recompute{n: n, layer: map[*ggml.Tensor]int{}, kept: map[*ggml.Tensor]*ggml.Tensor{}}
	for l := range t.w.Layers {
		for _, name := range LoRATargets {
			for _, term := range t.lora[t.w.Layers[l].Target(name)] {
				rc.layer[term.A], rc.layer[term.B] = l, l
			}
		}
	}
	for _, p := range t.params {
		if _, ok := rc.layer[p]; !ok {
			return nil, fmt.Errorf("llama: recomputing blocks trains LoRA adapters only (%s is not one)", p.Name())
		}
		if keepGrads {
			rc.kept[p] = s.NewTensor(ggml.F32, p.Shape()...).SetName("grad." + p.Name())
		}
	}
	d := int64(t.arch.DModel)
	for l := 0; l <= n; l++ {
		rc.stream = append(rc.stream, s.NewTensor(ggml.F32, d, int64(rows)).SetName(fmt.Sprintf("recompute.stream.%d", l)))
	}
	for i := range rc.grad {
		rc.grad[i] = s.NewTensor(ggml.F32, d, int64(rows)).SetName(fmt.Sprintf("recompute.grad.%d", i))
	}
	return rc, s.Err()
}

// trains reports whether the main graph trains p (p adapts a block it runs).
func (rc *recompute) trains(p *ggml.Tensor) bool { return rc == nil || rc.layer[p] >= rc.n }

// buildForward builds the graph that runs the embeddings and blocks 0..n−1 without a backward
// pass, storing the stream entering each block and the main graph's input. Call it before the
// main graph marks that input as a param.
func (rc *recompute) buildForward(tr *Trainer) error {
	m, in := tr.m, tr.in
	size := 16 + (64+4*len(m.lora)/max(1, m.arch.NLayers))*rc.n + 2*(rc.n+1)
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size})
	if err != nil {
		return err
	}
	rc.ctxs = append(rc.ctxs, ctx)
	// The products compute as gemmBackward.linear's do (W·x in W's type), and the attention's
	// scores as gemmBackward.short's, so the streams are bit for bit those of a graph that
	// keeps every activation.
	f := m.pass(ctx, in.pos, in.mask, tr.T, tr.B, nil, m.ownKernels())
	if rc.fwd, err = ctx.NewGraph(size, false); err != nil {
		return err
	}
	x := f.Embed(in.tokens)
	for l := 0; ; l++ {
		if err := rc.fwd.Expand(ctx.Cpy(x, rc.stream[l])); err != nil {
			return err
		}
		if l == rc.n {
			return nil
		}
		x = f.Block(l, x, int64(tr.T*tr.B))
	}
}

// buildBackward builds, for each recomputed block, the graph that recomputes it from its
// stored input, back-propagates the gradient of its output through it into its adapters
// (stepped with AdamW) and into the gradient of its input. Its products, LoRA terms and
// attention are differentiated as the Trainer's main graph does them (gemmBackward), so the
// gradients are bit for bit those of a graph that keeps every activation.
func (rc *recompute) buildBackward(tr *Trainer) error {
	m, in := tr.m, tr.in
	for l := rc.n - 1; l >= 0; l-- {
		var params []*ggml.Tensor
		for _, p := range m.params {
			if rc.layer[p] == l {
				params = append(params, p)
			}
		}
		products := 7 + 1
		size := 4*(64+10*products+4*len(params)) + 4*len(params) + GradNormNodes(len(params)) + 64
		ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size, Grads: true})
		if err != nil {
			return err
		}
		rc.ctxs = append(rc.ctxs, ctx)
		gb, err := newGemmBackward(ctx, m.ownKernels(), params, 16)
		if err != nil {
			return err
		}
		gb.keepTransposed = m.keepTransposed
		rc.gemms = append(rc.gemms, gb)
		x := rc.stream[l]
		if l > 0 {
			x.SetParam() // for its gradient, which the block below needs; nothing steps it
		}
		f := m.pass(ctx, in.pos, in.mask, tr.T, tr.B, gb, nil)
		loss := ctx.Sum(ctx.Mul(f.Block(l, x, int64(tr.T*tr.B)), rc.grad[(l+1)%2])).SetLoss()
		for _, p := range params { // as the Trainer's main graph flags its own
			if !gb.multiplies(p) {
				p.SetParam()
			}
		}
		g, err := ctx.NewGraph(size, true)
		if err != nil {
			return err
		}
		if err := gb.expandCopies(g); err != nil {
			return err
		}
		if err := g.Expand(loss); err != nil {
			return err
		}
		accs := make([]*ggml.Tensor, g.Len())
		gb.accumulators(g, accs)
		accs[g.Len()-1] = tr.lossSeed
		if err := g.BuildBackward(accs); err != nil {
			return err
		}
		var out []*ggml.Tensor
		norm := &GradNorm{}
		rc.norms = append(rc.norms, norm)
		for _, p := range params {
			grad := g.Grad(p)
			if gb.multiplies(p) {
				grad = gb.weightGrad(p)
				p.SetParam() // the AdamW step updates params only
			}
			mv := tr.moments[p]
			out = append(out, ctx.OptStepAdamW(p, grad, mv[0], mv[1], tr.noDecay), norm.sum(ctx, grad))
			if k := rc.kept[p]; k != nil {
				out = append(out, ctx.Cpy(grad, k))
			}
		}
		if l > 0 {
			out = append(out, ctx.Cpy(g.Grad(x), rc.grad[l%2]))
		}
		for _, t := range out {
			if err := g.Expand(t); err != nil {
				return err
			}
		}
		if err := gb.prepare(m.backend); err != nil {
			return err
		}
		rc.back = append(rc.back, g) // in the order they compute: block n−1 first
	}
	return nil
}

// keptGrad is the copy of p's gradient a recomputed block's graph keeps (nil if none).
func (rc *recompute) keptGrad(p *ggml.Tensor) *ggml.Tensor {
	if rc == nil {
		return nil
	}
	return rc.kept[p]
}

// close frees the graphs' contexts.
func (rc *recompute) close() {
	if rc == nil {
		return
	}
	for _, gb := range rc.gemms {
		gb.Close()
	}
	for _, c := range rc.ctxs {
		c.Close()
	}
	rc.ctxs, rc.gemms = nil, nil
}
