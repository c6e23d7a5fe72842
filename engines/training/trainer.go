package training

import (
	"fmt"
	"math"
	"time"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// Trainer runs training steps of a Trainable on batches of B sequences of T tokens. The graph —
// forward, cross-entropy, backward and one AdamW step per trained tensor — is built and
// allocated once; each Step only uploads the batch and the optimizer parameters and computes
// it, so memory stays flat however many steps run.
type Trainer struct {
	m      *trainable
	T, B   int
	masked bool // the graph takes a loss mask (NewMaskedTrainer)

	state    *ggml.Context // inputs, AdamW moments, the loss-gradient seed
	stateBuf *ggml.Buffer
	in       *batchInputs
	img      *transformer.ImageInputs // an image model's inputs (NewClassifierTrainer); in is nil then
	logits   *ggml.Tensor             // an image model's class logits, read back for the accuracy
	decay    *ggml.Tensor             // f32 [7]: AdamW parameters for matrices
	noDecay  *ggml.Tensor             // f32 [7]: for embeddings, norms and biases
	lossSeed *ggml.Tensor             // f32 scalar 1: d loss / d loss
	moments  map[*ggml.Tensor][2]*ggml.Tensor
	gctx     *ggml.Context
	graph    *ggml.Graph
	alloc    *ggml.Allocator
	loss     *ggml.Tensor
	// value is the cross entropy when the graph's loss is headLoss's surrogate (nil otherwise).
	value *ggml.Tensor
	// rc recomputes an adapter's first blocks (LoRAOptions.Recompute); nil when none are.
	rc *recompute
	// embedParams are the AdamW parameters of the token embeddings: noDecay's, with a zero
	// learning rate while they are held (HoldEmbeddings).
	embedParams *ggml.Tensor
	holdEmbed   bool
	// Sep, when ≥ 0, is the token after which a new document starts in a packed sequence:
	// attention does not cross it (block-causal mask).
	Sep int32
	// keepGrads keeps every weight's gradient readable after a step (tests).
	keepGrads bool
	// gemm differentiates the weight products and trained lookups; weightGrads holds the
	// gradient it builds for each tensor they use.
	gemm        *gemmBackward
	weightGrads map[*ggml.Tensor]*ggml.Tensor
	// dp, set by the DataParallel option, averages the gradients over the replicas of a
	// data-parallel job between the backward pass and AdamW.
	dp *dataParallel
	// timed, when set, sees every node a step computes and its time (SetTimed).
	timed func(node *ggml.Tensor, d time.Duration)
	// norm sums the squares of the gradients AdamW reads in the main graph (or the
	// data-parallel optimizer graph); each recomputed block's graph has its own (rc.norms).
	// gradNormSq is their total in the last step.
	norm       GradNorm
	gradNormSq float64
}

// NewTrainer builds the training graph of m for B sequences of T tokens (T ≤ context). Its
// trained tensors end up marked as params; a second trainer of the same model is correct but
// loses the GEMM weight gradients (ggml has no way to clear the flag), so train a model with one
// trainer.
func NewTrainer(m Trainable, T, B int, opts ...TrainerOption) (*Trainer, error) {
	return newTrainer(m, T, B, false, false, opts...)
}

// NewMaskedTrainer is NewTrainer for batches with a loss mask (StepMasked): only the positions
// the mask keeps count in the loss and its gradients, as when a chat's assistant replies are
// trained and the prompts are not. Its graph gathers the kept rows of the logits, which costs
// two more copies of them.
func NewMaskedTrainer(m Trainable, T, B int, opts ...TrainerOption) (*Trainer, error) {
	return newTrainer(m, T, B, false, true, opts...)
}

func newTrainer(m Trainable, T, B int, keepGrads, masked bool, opts ...TrainerOption) (*Trainer, error) {
	t := m.trainable()
	a := t.arch
	if err := t.checkTrainable(); err != nil {
		return nil, err
	}
	if len(t.params) == 0 {
		return nil, fmt.Errorf("training: nothing to train in the %s model (train a Model, or an Adapter on a GGUFModel)", a.Name)
	}
	if T < 1 || T > a.Context {
		return nil, fmt.Errorf("training: sequence length %d is outside 1..%d (the model's context)", T, a.Context)
	}
	if B < 1 {
		return nil, fmt.Errorf("training: batch size %d", B)
	}
	if a.Input == transformer.InputPatches && T != a.Context {
		return nil, fmt.Errorf("training: an image model reads %d tokens (the class token and %d patches), not %d", a.Context, a.Patches(), T)
	}
	if int64(B)*int64(a.NHeads) > 1024 {
		// ggml's CUDA backend sends larger batched matmuls to the CPU; keep one limit everywhere.
		return nil, fmt.Errorf("training: batch %d × %d heads exceeds 1024; use a smaller batch", B, a.NHeads)
	}
	tr := &Trainer{m: t, T: T, B: B, masked: masked, Sep: -1, moments: map[*ggml.Tensor][2]*ggml.Tensor{}, keepGrads: keepGrads}
	for _, o := range opts {
		o(tr)
	}
	if tr.dp != nil && t.recompute > 0 {
		return nil, fmt.Errorf("data-parallel training cannot recompute blocks: each recomputed block's graph steps its adapters before the replicas could average their gradients")
	}
	if err := tr.build(); err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

func (tr *Trainer) build() error {
	m := tr.m
	var err error
	if tr.state, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 4 + inputTensors + 2*len(m.params) + recomputeStateTensors(m.recompute, len(m.params))}); err != nil {
		return err
	}
	s := tr.state
	if m.arch.Input == transformer.InputPatches {
		tr.img = transformer.NewImageInputs(s, m.arch, tr.B)
	} else {
		hiddenWidth := 0
		if m.headFrozen() {
			hiddenWidth = m.arch.DModel
		}
		tr.in = newBatchInputs(s, tr.T, tr.B, m.arch.Vocab, tr.masked, hiddenWidth, true)
	}
	tr.decay = s.NewTensor(ggml.F32, 7).SetName("adamw.decay")
	tr.noDecay = s.NewTensor(ggml.F32, 7).SetName("adamw.no_decay")
	tr.lossSeed = s.NewTensor(ggml.F32, 1).SetName("loss.seed")
	tr.embedParams = s.NewTensor(ggml.F32, 7).SetName("adamw.embeddings")
	if m.recompute > 0 {
		if tr.in == nil {
			return fmt.Errorf("recomputing blocks is for language models")
		}
		if tr.rc, err = newRecompute(s, m, m.recompute, tr.T*tr.B, tr.keepGrads); err != nil {
			return err
		}
	}
	for _, w := range m.params {
		ne := w.Shape()
		tr.moments[w] = [2]*ggml.Tensor{
			s.NewTensor(ggml.F32, ne...).SetName("adamw.m." + w.Name()),
			s.NewTensor(ggml.F32, ne...).SetName("adamw.v." + w.Name()),
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if tr.stateBuf, err = m.backend.Alloc(s); err != nil {
		return err
	}
	tr.stateBuf.Clear(0)
	if tr.img != nil {
		err = tr.img.SetConstants()
	} else {
		err = tr.in.setPositions()
	}
	if err != nil {
		return err
	}
	if err := tr.lossSeed.SetF32([]float32{1}); err != nil {
		return err
	}
	if tr.rc != nil {
		if err := tr.rc.buildForward(tr); err != nil {
			return err
		}
	}

	size := m.graphSize()
	if tr.gctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size, Grads: true}); err != nil {
		return err
	}
	g := tr.gctx
	// The weight products and trained embedding lookups are differentiated as GEMMs (see
	// gemmBackward); autodiff differentiates the rest (norms, biases, attention).
	if tr.gemm, err = newGemmBackward(g, m.ownKernels(), m.params, 16*m.arch.NLayers+8); err != nil {
		return err
	}
	gb := tr.gemm
	gb.recomputeProbs, gb.keepTransposed = m.recomputeAttention, m.keepTransposed
	var head []*ggml.Tensor // what the graph computes before the loss, in order (headLoss)
	if tr.img != nil {
		tr.logits = m.classify(g, tr.img, gb).SetOutput()
		tr.loss = g.CrossEntropyLoss(tr.logits, tr.img.Labels)
	} else {
		f := m.pass(g, tr.in.pos, tr.in.mask, tr.T, tr.B, gb, nil)
		if tr.rc != nil { // start after the recomputed blocks, from the stream the forward graph stored
			f.From, f.Stream = tr.rc.n, tr.rc.stream[tr.rc.n].SetParam()
		}
		if tr.in.head != nil {
			out := m.w.Head()
			outT := func() *ggml.Tensor { return gb.frozenTranspose(out, headTransposeType(out.Type())) }
			head, tr.value, tr.loss = tr.in.head.loss(g, out, outT, f.Hidden(tr.in.tokens), gb.kernels)
			tr.value = tr.value.SetOutput()
		} else if tr.in.targetAt != nil {
			var copy *ggml.Tensor
			copy, tr.loss = tr.in.crossEntropy(g, f.Logits(tr.in.tokens), tr.lossSeed, gb)
			head = []*ggml.Tensor{copy}
		} else {
			tr.loss = tr.in.loss(g, f.Logits(tr.in.tokens))
		}
	}
	if err := g.Err(); err != nil {
		return err
	}
	tr.loss = tr.loss.SetName("loss").SetLoss().SetOutput()
	// Params must be flagged before they enter the graph; those gemmBackward differentiates
	// must not be params while the backward pass is built.
	for _, w := range m.params {
		if !gb.multiplies(w) && tr.rc.trains(w) { // a recomputed block's graph flags its own
			w.SetParam()
		}
	}
	if tr.graph, err = g.NewGraph(size, true); err != nil {
		return err
	}
	if err := gb.expandCopies(tr.graph); err != nil {
		return err
	}
	for _, t := range head {
		if err := tr.graph.Expand(t); err != nil {
			return err
		}
	}
	if err := tr.graph.Expand(tr.loss); err != nil {
		return err
	}
	accs := make([]*ggml.Tensor, tr.graph.Len())
	gb.accumulators(tr.graph, accs)
	accs[tr.graph.Len()-1] = tr.lossSeed // the loss is the last forward node
	if err := tr.graph.BuildBackward(accs); err != nil {
		return err
	}
	tr.weightGrads = map[*ggml.Tensor]*ggml.Tensor{}
	for _, w := range m.params {
		if gb.multiplies(w) {
			tr.weightGrads[w] = gb.weightGrad(w)
			w.SetParam() // the AdamW step updates params only
		}
	}
	opt := tr.graph // AdamW's steps follow the backward pass, unless the gradients are reduced first
	if tr.dp != nil {
		if err := tr.dp.begin(len(m.params)); err != nil {
			return err
		}
		opt = tr.dp.opt
	}
	for _, w := range m.params {
		if !tr.rc.trains(w) {
			continue // a recomputed block's graph steps it
		}
		params := tr.noDecay
		switch {
		case w == m.w.TokEmbd:
			params = tr.embedParams
		case m.matrix(w):
			params = tr.decay
		}
		mv := tr.moments[w]
		grad := tr.weightGrads[w]
		if grad == nil {
			grad = tr.graph.Grad(w)
		}
		if grad == nil {
			return fmt.Errorf("training: %s has no gradient (it does not reach the loss)", w.Name())
		}
		if tr.keepGrads {
			grad.SetOutput()
			if k := tr.rc.keptGrad(w); k != nil { // the recomputing graphs reuse its memory
				if err := tr.graph.Expand(g.Cpy(grad, k)); err != nil {
					return err
				}
			}
		}
		if tr.dp != nil {
			if err := tr.graph.Expand(grad); err != nil {
				return err
			}
			grad = tr.dp.gradient(grad)
		}
		step := g.OptStepAdamW(w, grad, mv[0], mv[1], params)
		if err := opt.Expand(step); err != nil {
			return err
		}
		if err := tr.norm.Add(g, opt, grad); err != nil {
			return err
		}
	}
	if tr.dp != nil {
		if err := tr.dp.finish(m.backend, g, tr.graph); err != nil {
			return err
		}
	}
	if err := gb.prepare(m.backend); err != nil {
		return err
	}
	if tr.rc != nil {
		if err := tr.graph.Expand(g.Cpy(tr.graph.Grad(tr.rc.stream[tr.rc.n]), tr.rc.grad[tr.rc.n%2])); err != nil {
			return err
		}
		if err := tr.rc.buildBackward(tr); err != nil {
			return err
		}
	}
	if tr.alloc, err = m.backend.NewAllocator(); err != nil {
		return err
	}
	// The graphs share the allocator's buffer: sized for the largest first, each then keeps
	// its own placement in it (they compute one after another).
	graphs := tr.graphs()
	for _, gr := range graphs {
		if err := tr.alloc.Reserve(gr); err != nil {
			return err
		}
	}
	for _, gr := range graphs {
		if err := tr.alloc.Alloc(gr); err != nil {
			return err
		}
	}
	// Reset zeroes the moments of every AdamW node and seeds the loss gradient; the moments
	// live in stateBuf, so a checkpoint can restore them after this.
	tr.graph.Reset()
	if err := tr.lossSeed.SetF32([]float32{1}); err != nil {
		return err
	}
	return nil
}

// graphs are the trainer's graphs in the order a step computes them.
func (tr *Trainer) graphs() []*ggml.Graph {
	if tr.rc == nil {
		return []*ggml.Graph{tr.graph}
	}
	return append([]*ggml.Graph{tr.rc.fwd, tr.graph}, tr.rc.back...)
}

// HoldEmbeddings keeps the token embeddings (and so a tied output projection) as they are in
// the steps that follow, while hold is true: their learning rate is zero, but their gradients
// are computed and their AdamW moments follow them, so training them resumes from moments
// that are up to date. A warm start holds the transplanted embeddings for its first steps.
func (tr *Trainer) HoldEmbeddings(hold bool) { tr.holdEmbed = hold }

// GraphPeak is what one of a Trainer's graphs holds in the allocator's buffer at its peak
// (ggml.Graph.PeakLive).
type GraphPeak struct {
	Node, Bytes int
	Live        []ggml.LiveTensor
}

// PeakLive is the peak of each of the trainer's graphs, in the order a step computes them.
func (tr *Trainer) PeakLive() []GraphPeak {
	var out []GraphPeak
	for _, g := range tr.graphs() {
		n, b, live := g.PeakLive()
		out = append(out, GraphPeak{n, b, live})
	}
	return out
}

// Close frees the trainer's graph and optimizer state (not the model).
func (tr *Trainer) Close() error {
	tr.dp.close()
	tr.alloc.Close()
	if tr.gemm != nil {
		tr.gemm.Close()
	}
	tr.rc.close()
	if tr.gctx != nil {
		tr.gctx.Close()
	}
	tr.stateBuf.Close()
	if tr.state != nil {
		tr.state.Close()
	}
	return nil
}

// Moments returns the AdamW first and second moments of weight w.
func (tr *Trainer) Moments(w *ggml.Tensor) (m, v *ggml.Tensor) {
	mv := tr.moments[w]
	return mv[0], mv[1]
}

// ComputeBytes is the size of the graph's compute buffer.
func (tr *Trainer) ComputeBytes() int { return tr.alloc.Size() }

// Step trains on one batch — B sequences of T+1 ids — with the given AdamW parameters (the
// 7 floats of ggml's step, one set for matrices and one, without weight decay, for the rest)
// and returns the batch's loss before the update.
func (tr *Trainer) Step(seqs [][]int32, decay, noDecay [7]float32) (float32, error) {
	return tr.StepMasked(seqs, nil, decay, noDecay)
}

// StepMasked is Step with a loss mask, for a trainer made with NewMaskedTrainer: keep[s][t]
// tells whether position t of sequence s (its prediction of id t+1) counts. The loss it
// returns, and the gradients, are the mean over the kept positions. A nil keep keeps every
// position.
func (tr *Trainer) StepMasked(seqs [][]int32, keep [][]bool, decay, noDecay [7]float32) (float32, error) {
	if tr.in == nil {
		return 0, fmt.Errorf("training: Step on a trainer of an image model (use StepImages)")
	}
	if err := tr.in.upload(seqs, keep, tr.Sep); err != nil {
		return 0, err
	}
	seed, weight := float32(1), float32(1) // replicas of equal batches count equally
	if tr.masked {
		weight = float32(tr.in.kept)
		if tr.value == nil { // the graph's loss is a mean over all B·T rows: scale its gradient to the kept ones
			seed = float32(tr.T*tr.B) / float32(tr.in.kept)
		}
	}
	share, err := tr.seedShare(seed, weight)
	if err != nil {
		return 0, err
	}
	if err := tr.decay.SetF32(decay[:]); err != nil {
		return 0, err
	}
	if err := tr.noDecay.SetF32(noDecay[:]); err != nil {
		return 0, err
	}
	embed := noDecay
	if tr.holdEmbed {
		embed[0] = 0
	}
	if err := tr.embedParams.SetF32(embed[:]); err != nil {
		return 0, err
	}
	value := tr.loss
	if tr.value != nil {
		value = tr.value
	}
	var loss []float32
	tr.gradNormSq = 0
	for i, g := range tr.graphs() {
		if err := tr.compute(g); err != nil {
			return 0, err
		}
		if g == tr.graph { // read before a recomputing graph reuses its memory
			var err error
			if loss, err = value.F32(); err != nil {
				return 0, err
			}
			if tr.dp == nil {
				if err := tr.addGradNorm(&tr.norm); err != nil {
					return 0, err
				}
			}
		}
		if tr.rc != nil && i >= 2 { // a recomputed block's graph, after the forward and main ones
			if err := tr.addGradNorm(tr.rc.norms[i-2]); err != nil {
				return 0, err
			}
		}
	}
	l := tr.in.maskedLoss(loss[0])
	if tr.dp != nil {
		var err error
		if l, err = tr.dp.step(tr.m.backend, l*share); err != nil {
			return 0, err
		}
		if err := tr.addGradNorm(&tr.norm); err != nil {
			return 0, err
		}
	}
	return l, tr.checkStep(l)
}

// addGradNorm adds a graph's squared gradient norm, read after it computed, to the step's.
func (tr *Trainer) addGradNorm(n *GradNorm) error {
	v, err := n.Value()
	tr.gradNormSq += v
	return err
}

// checkStep returns a NonFiniteError when the step's loss or gradient norm is not finite, or
// the gradient vanished.
func (tr *Trainer) checkStep(loss float32) error {
	if err := CheckLoss(loss); err != nil {
		return err
	}
	return CheckGradNorm(tr.gradNormSq, loss)
}

// SetTimed makes the steps that follow compute their graphs one node at a time and call each
// with every node and the time it took (ggml.Backend.ComputeTimed), to see where a step's time
// goes; nil computes them whole again. The results do not change.
func (tr *Trainer) SetTimed(each func(node *ggml.Tensor, d time.Duration)) { tr.timed = each }

// compute runs one of the step's graphs, node by node when SetTimed asked for it.
func (tr *Trainer) compute(g *ggml.Graph) error {
	if tr.timed != nil {
		return tr.m.backend.ComputeTimed(g, tr.timed)
	}
	return tr.m.backend.Compute(g)
}

// seedShare seeds the backward pass with the gradient seed of the loss, times, in a
// data-parallel step, the replica's share (weight over the replicas' total, which it agrees on
// with them); it returns the share (1 without replicas).
func (tr *Trainer) seedShare(seed, weight float32) (float32, error) {
	share := float32(1)
	if tr.dp != nil {
		var err error
		if share, err = tr.dp.scale(weight); err != nil {
			return 0, err
		}
	}
	return share, tr.lossSeed.SetF32([]float32{seed * share})
}

// grad returns the gradient of the last step's loss with respect to weight w, for a trainer
// made with keepGrads.
func (tr *Trainer) grad(w *ggml.Tensor) ([]float32, error) {
	if k := tr.rc.keptGrad(w); k != nil {
		return k.F32()
	}
	g := tr.weightGrads[w]
	if g == nil {
		g = tr.graph.Grad(w)
	}
	if g == nil {
		return nil, fmt.Errorf("training: %s has no gradient", w.Name())
	}
	return g.F32()
}

// TrainerOption configures a Trainer when it is built.
type TrainerOption func(*Trainer)

// DataParallel makes the Trainer one replica of a data-parallel job: each step computes the
// gradients of the replica's share of the global batch, averages them (and the loss) over the
// replicas with r, and only then runs the AdamW step, so every replica that starts from the
// same weights and optimizer state keeps them identical. Each replica's gradient counts by the
// positions its loss covers, so replicas of B sequences each reproduce one trainer of the
// whole batch, up to the order of the float32 sums.
//
// The graph is then computed in two parts (forward and backward, then AdamW). The backward
// pass computes the gradients, already weighted by the replica's share, straight into one
// buffer of the backend, which the reducer sums in place and AdamW then reads: the gradients
// take memory of the trained weights' size until the AdamW step, and the reduction no more.
func DataParallel(r GradientReducer) TrainerOption {
	return func(tr *Trainer) { tr.dp = &dataParallel{reducer: r} }
}

// GradNorm is the L2 norm of the gradients of the trainer's last step, over every trained
// tensor (after the replicas' average in a data-parallel step).
func (tr *Trainer) GradNorm() float64 { return math.Sqrt(tr.gradNormSq) }

// CheckFinite reports the first trained tensor that holds a NaN or an infinity, or nil: the
// recipes check before they save a checkpoint, so none holds a non-finite weight.
func (tr *Trainer) CheckFinite() error {
	return checkFiniteTensors(tr.m.params)
}

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
