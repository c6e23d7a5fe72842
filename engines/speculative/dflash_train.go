package speculative

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/ggml"
)

// positionWeights are the loss weights of n proposal positions, exp(−k/decay) for the k-th
// from 0 (decay 0: all alike), normalised to sum to 1.
func positionWeights(n int, decay float64) []float64 {
	w := make([]float64, n)
	sum := 0.0
	for k := range w {
		w[k] = 1
		if decay > 0 {
			w[k] = math.Exp(-float64(k) / decay)
		}
		sum += w[k]
	}
	for k := range w {
		w[k] /= sum
	}
	return w
}

// dflashTrainer runs training steps of a DFlash drafter on batches of blocks: forward,
// cross-entropy of the block's proposals against the target's tokens, backward, and one AdamW
// step per drafter tensor. Its graph is built and allocated once.
type dflashTrainer struct {
	df       *DFlash
	in       dflashInputs
	state    *ggml.Context
	stateBuf *ggml.Buffer
	rows     *ggml.Tensor // i32 [(G−1)·B]: the logits rows of the proposals, position by position
	labels   *ggml.Tensor // f32 [Vocab, (G−1)·B]: one-hot target tokens, in rows' order
	weights  []float64    // the loss weight of each proposal position, summing to 1
	decay    *ggml.Tensor
	noDecay  *ggml.Tensor
	lossSeed *ggml.Tensor
	moments  map[*ggml.Tensor][2]*ggml.Tensor
	gctx     *ggml.Context
	graph    *ggml.Graph
	alloc    *ggml.Allocator
	loss     *ggml.Tensor
	logits   *ggml.Tensor      // [Vocab, (G−1)·B], the proposals' logits, for the accuracy
	norm     training.GradNorm // the squared norm of the gradients AdamW reads
}

// newDFlashTrainer builds the training graph of df for B blocks, each reading W context rows,
// the loss of proposal position k weighted by exp(−(k−1)/decay) (0: all alike).
func newDFlashTrainer(df *DFlash, B, W int, decay float64) (*dflashTrainer, error) {
	a := &df.target.Arch
	G := df.Cfg.Gamma
	if B < 1 || W < 1 {
		return nil, fmt.Errorf("dflash training: %d blocks of %d context rows", B, W)
	}
	if B*a.NHeads > 1024 {
		return nil, fmt.Errorf("dflash training: %d blocks × %d heads exceeds 1024; use fewer blocks", B, a.NHeads)
	}
	tr := &dflashTrainer{df: df, in: dflashInputs{B: B, W: W, G: G}, moments: map[*ggml.Tensor][2]*ggml.Tensor{}, weights: positionWeights(G-1, decay)}
	if err := tr.build(); err != nil {
		tr.close()
		return nil, err
	}
	return tr, nil
}

func (tr *dflashTrainer) build() error {
	df := tr.df
	a := &df.target.Arch
	B, G := tr.in.B, tr.in.G
	var err error
	if tr.state, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 16 + 2*len(df.params)}); err != nil {
		return err
	}
	s := tr.state
	tr.in.declare(s, df)
	tr.rows = s.NewTensor(ggml.I32, int64((G-1)*B)).SetName("dflash_rows")
	tr.labels = s.NewTensor(ggml.F32, int64(a.Vocab), int64((G-1)*B)).SetName("dflash_labels")
	tr.decay = s.NewTensor(ggml.F32, 7).SetName("adamw.decay")
	tr.noDecay = s.NewTensor(ggml.F32, 7).SetName("adamw.no_decay")
	tr.lossSeed = s.NewTensor(ggml.F32, 1).SetName("loss.seed")
	for _, w := range df.params {
		ne := w.Shape()
		tr.moments[w] = [2]*ggml.Tensor{s.NewTensor(ggml.F32, ne...), s.NewTensor(ggml.F32, ne...)}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if tr.stateBuf, err = df.target.Backend().Alloc(s); err != nil {
		return err
	}
	tr.stateBuf.Clear(0)
	rows := make([]int32, 0, (G-1)*B)
	for k := 1; k < G; k++ {
		for b := range B {
			rows = append(rows, int32(b*G+k))
		}
	}
	if err := tr.rows.SetI32(rows); err != nil {
		return err
	}

	size := 4*df.graphSize() + 4*len(df.params) + training.GradNormNodes(len(df.params)) + 256
	if tr.gctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size, Grads: true}); err != nil {
		return err
	}
	g := tr.gctx
	for _, w := range df.params {
		w.SetParam()
	}
	linear := func(w, x *ggml.Tensor) *ggml.Tensor {
		if typ := w.Type(); typ == ggml.F16 || typ == ggml.BF16 {
			// The target's frozen half-precision head: the backward to x multiplies by it with
			// ggml's OUT_PROD, which reads f32 and block-quantized types only.
			return g.MulMat(g.Cast(w, ggml.F32), x)
		}
		return g.MulMat(w, x)
	}
	logits := df.forward(g, &tr.in, linear)
	tr.logits = g.GetRows(logits, tr.rows).SetOutput()
	// The loss: each proposal position's mean cross-entropy over the blocks, weighted. A
	// proposal counts only when those before it are accepted, so the first ones weigh most
	// (DFlash's exponentially decaying loss).
	V := int64(a.Vocab)
	for k, w := range tr.weights {
		rows := g.View(tr.rows, []int64{int64(B)}, nil, k*B*4)
		labels := g.View(tr.labels, []int64{V, int64(B)}, []int{tr.labels.Nb()[1]}, k*B*tr.labels.Nb()[1])
		ce := g.Scale(g.CrossEntropyLoss(g.GetRows(logits, rows), labels), float32(w))
		if tr.loss == nil {
			tr.loss = ce
		} else {
			tr.loss = g.Add(tr.loss, ce)
		}
	}
	tr.loss.SetName("loss").SetLoss().SetOutput()
	if tr.graph, err = g.NewGraph(size, true); err != nil {
		return err
	}
	for _, out := range []*ggml.Tensor{tr.logits, tr.loss} {
		if err := tr.graph.Expand(out); err != nil {
			return fmt.Errorf("building the dflash training graph: %w", err)
		}
	}
	accs := make([]*ggml.Tensor, tr.graph.Len())
	accs[tr.graph.Len()-1] = tr.lossSeed
	if err := tr.graph.BuildBackward(accs); err != nil {
		return err
	}
	for _, w := range df.params {
		params := tr.noDecay
		if len(w.Shape()) > 1 {
			params = tr.decay
		}
		mv := tr.moments[w]
		grad := tr.graph.Grad(w)
		if grad == nil {
			return fmt.Errorf("dflash: %s has no gradient", w.Name())
		}
		if err := tr.graph.Expand(g.OptStepAdamW(w, grad, mv[0], mv[1], params)); err != nil {
			return err
		}
		if err := tr.norm.Add(g, tr.graph, grad); err != nil {
			return err
		}
	}
	if tr.alloc, err = df.target.Backend().NewAllocator(); err != nil {
		return err
	}
	if err := tr.alloc.Alloc(tr.graph); err != nil {
		return err
	}
	tr.graph.Reset()
	return tr.lossSeed.SetF32([]float32{1})
}

func (tr *dflashTrainer) close() {
	tr.alloc.Close()
	if tr.gctx != nil {
		tr.gctx.Close()
	}
	tr.stateBuf.Close()
	if tr.state != nil {
		tr.state.Close()
	}
}

// step trains on B blocks, labels[b] holding the G−1 tokens the target puts after each block's
// anchor, and returns the loss before the update and the share of proposals whose argmax was
// the label.
func (tr *dflashTrainer) step(blocks []dflashBlock, labels [][]int32, decay, noDecay [7]float32) (loss, acc float64, err error) {
	V, G := tr.df.target.Arch.Vocab, tr.in.G
	if len(blocks) != tr.in.B || len(labels) != tr.in.B {
		return 0, 0, fmt.Errorf("dflash training: %d blocks and %d label rows for a graph of %d", len(blocks), len(labels), tr.in.B)
	}
	if err := tr.in.set(tr.df, blocks); err != nil {
		return 0, 0, err
	}
	B := tr.in.B
	oneHot := make([]float32, V*(G-1)*B)
	for b, ls := range labels {
		for k, l := range ls {
			oneHot[(k*B+b)*V+int(l)] = 1
		}
	}
	for _, e := range []error{tr.labels.SetF32(oneHot), tr.decay.SetF32(decay[:]), tr.noDecay.SetF32(noDecay[:])} {
		if e != nil {
			return 0, 0, e
		}
	}
	if err := tr.df.target.Backend().Compute(tr.graph); err != nil {
		return 0, 0, err
	}
	l, err := tr.loss.F32()
	if err != nil {
		return 0, 0, err
	}
	sq, err := tr.norm.Value()
	if err != nil {
		return 0, 0, err
	}
	if err := training.CheckLoss(l[0]); err != nil {
		return 0, 0, err
	}
	if err := training.CheckGradNorm(sq, l[0]); err != nil {
		return 0, 0, err
	}
	logits, err := tr.logits.F32()
	if err != nil {
		return 0, 0, err
	}
	flat := make([]int32, 0, (G-1)*B)
	for k := range G - 1 {
		for _, ls := range labels {
			flat = append(flat, ls[k])
		}
	}
	return float64(l[0]), float64(training.CountCorrect(logits, flat, V)) / float64(len(flat)), nil
}

// checkTokens reports the first of tokens outside a vocabulary of vocab.
func checkTokens(tokens []int32, vocab int) error {
	for i, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("token %d (at %d) is outside the target's vocabulary 0..%d", t, i, vocab-1)
		}
	}
	return nil
}

// newCaptureDecoder is the target's decoder of a drafter's training and evaluation: it reads
// windows of up to seqLen tokens in one batch, capturing the hidden states of layers.
func newCaptureDecoder(target *decoding.GGUFModel, opts decoding.DecoderOptions, seqLen int, layers []int) (*decoding.Decoder, error) {
	opts.MaxContext, opts.Batch, opts.ContextFull = seqLen, seqLen, decoding.ContextError
	dec, err := decoding.NewDecoder(target, opts)
	if err != nil {
		return nil, err
	}
	if err := dec.SetCapture(layers); err != nil {
		dec.Close()
		return nil, err
	}
	return dec, nil
}

// anchoredBlock is the block of G positions anchored at position a of seq, which the target
// read into logits and rows (its captured hidden states): the anchor, and the rows of at most
// W positions before it. labels are the target's tokens at the block's G−1 proposal positions
// (its argmax after the text up to the position before each).
func anchoredBlock(seq []int32, logits, rows [][]float32, a, G, W int) (blk dflashBlock, labels []int32) {
	labels = make([]int32, G-1)
	for k := 1; k < G; k++ {
		labels[k-1] = int32(training.Argmax(logits[a+k-1]))
	}
	return dflashBlock{Anchor: seq[a], Pos: a, Ctx: rows[max(0, a-W):a]}, labels
}

// DFlashTrainOptions configure TrainDFlash.
type DFlashTrainOptions struct {
	// Steps is the number of optimizer steps.
	Steps int
	// Sequences is the number of corpus windows of SeqLen tokens the target reads per step;
	// Anchors blocks are drawn from each.
	Sequences, SeqLen, Anchors int
	// Window is the number of context rows a training block reads when the pairing reads the
	// whole context (DFlashConfig.Window 0); otherwise the pairing's window.
	Window int
	// LossDecay weighs the loss of the k-th proposal of a block (from 0) by exp(−k/LossDecay),
	// as DFlash's training does: a proposal counts only when all before it are accepted.
	// 0 weighs all alike.
	LossDecay float64
	// AdamW and the cosine schedule from LR down to MinLR after Warmup steps.
	AdamW          train.AdamW
	LR, MinLR      float64
	Warmup         int
	Seed           uint64
	DecoderOptions decoding.DecoderOptions
	Progress       func(step int, loss, acc float64, lr float64)
	Interrupted    context.Context
}

// TrainDFlash trains a DFlash drafter for target by distillation from the target itself: each
// step the target reads Sequences random windows of the corpus (token ids of its vocabulary),
// capturing its hidden states at cfg.TargetLayers; blocks are anchored at random positions of
// them, and the drafter learns to put at each block position the token the target predicts
// there (its argmax after the corpus text up to the position before), reading the target's
// states of the positions before the anchor. The drafter starts from a random init (seed).
// It stops early, with what it learned, when o.Interrupted is done.
func TrainDFlash(target *decoding.GGUFModel, cfg DFlashConfig, corpus []int32, o DFlashTrainOptions) (*DFlash, error) {
	G := cfg.Gamma
	switch {
	case o.Steps < 1 || o.Sequences < 1 || o.Anchors < 1:
		return nil, fmt.Errorf("dflash training: %d steps of %d sequences × %d anchors", o.Steps, o.Sequences, o.Anchors)
	case o.SeqLen < G+1 || o.SeqLen > target.Arch.Context:
		return nil, fmt.Errorf("dflash training: sequences of %d tokens: want %d..%d (the block plus one, the target's context)", o.SeqLen, G+1, target.Arch.Context)
	case o.LossDecay < 0 || math.IsNaN(o.LossDecay):
		return nil, fmt.Errorf("dflash training: loss decay %v: want 0 (none) or more", o.LossDecay)
	case len(corpus) < o.SeqLen:
		return nil, fmt.Errorf("dflash training: a corpus of %d tokens is shorter than one sequence of %d", len(corpus), o.SeqLen)
	}
	if err := checkTokens(corpus, target.Arch.Vocab); err != nil {
		return nil, fmt.Errorf("dflash training: corpus %w", err)
	}
	W := cfg.Window
	if W == 0 {
		W = o.Window
	}
	df, err := NewDFlash(target, cfg, o.Seed)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			df.Close()
		}
	}()
	tr, err := newDFlashTrainer(df, o.Sequences*o.Anchors, W, o.LossDecay)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	dec, err := newCaptureDecoder(target, o.DecoderOptions, o.SeqLen, cfg.TargetLayers)
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	sched := train.Cosine{Peak: o.LR, Min: o.MinLR, Warmup: o.Warmup, Total: o.Steps}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7472))
	blocks := make([]dflashBlock, 0, o.Sequences*o.Anchors)
	labels := make([][]int32, 0, o.Sequences*o.Anchors)
	for step := range o.Steps {
		if o.Interrupted != nil && o.Interrupted.Err() != nil {
			break
		}
		blocks, labels = blocks[:0], labels[:0]
		for range o.Sequences {
			off := rng.IntN(len(corpus) - o.SeqLen + 1)
			seq := corpus[off : off+o.SeqLen]
			logits, err := dec.Logits(seq)
			if err != nil {
				return nil, err
			}
			rows := slices.Clone(dec.Captured())
			for range o.Anchors {
				a := 1 + rng.IntN(o.SeqLen-G) // the anchor; its block ends at a+G−1 ≤ SeqLen−1
				blk, ls := anchoredBlock(seq, logits, rows, a, G, W)
				blocks, labels = append(blocks, blk), append(labels, ls)
			}
		}
		lr := sched.LR(step)
		decay, err := o.AdamW.Params(step, lr, true)
		if err != nil {
			return nil, err
		}
		noDecay, err := o.AdamW.Params(step, lr, false)
		if err != nil {
			return nil, err
		}
		loss, acc, err := tr.step(blocks, labels, decay, noDecay)
		if err != nil {
			return nil, fmt.Errorf("dflash training: step %d: %w", step, err)
		}
		if o.Progress != nil {
			o.Progress(step, loss, acc, lr)
		}
	}
	ok = true
	return df, nil
}

// DFlashEval is how well a drafter predicts its target's greedy tokens over a text, from every
// anchor of it: EvalDFlash.
type DFlashEval struct {
	// Blocks is the number of blocks evaluated: one per anchor.
	Blocks int
	// Matching[k] is the share of blocks whose proposal k (from 0) was the target's token.
	Matching []float64
	// Accepted is the mean number of proposals a greedy verification accepts per block: the
	// run of matching proposals from the first. Decoding sees fewer, since its blocks start
	// where the previous ones failed.
	Accepted float64
}

// EvalDFlash measures df on text (token ids of its target's vocabulary): the target reads it in
// windows of seqLen tokens, capturing its hidden states, and a block is anchored at every
// position of a window that leaves room for one (as in training), reading the positions
// before its anchor (within the pairing's window, else all of the window's); its proposals are
// compared with the target's argmax at each position. opts configure the target's decoder.
func EvalDFlash(df *DFlash, text []int32, seqLen int, opts decoding.DecoderOptions) (DFlashEval, error) {
	m := df.target
	G := df.Cfg.Gamma
	if seqLen < G+1 || seqLen > m.Arch.Context {
		return DFlashEval{}, fmt.Errorf("dflash evaluation: windows of %d tokens: want %d..%d (the block plus one, the target's context)", seqLen, G+1, m.Arch.Context)
	}
	if err := checkTokens(text, m.Arch.Vocab); err != nil {
		return DFlashEval{}, fmt.Errorf("dflash evaluation: %w", err)
	}
	W := df.Cfg.Window
	if W == 0 {
		W = seqLen
	}
	const B = 16 // blocks a forward
	dec, err := newCaptureDecoder(m, opts, seqLen, df.Cfg.TargetLayers)
	if err != nil {
		return DFlashEval{}, err
	}
	defer dec.Close()
	g, err := df.buildInference(B, W)
	if err != nil {
		return DFlashEval{}, err
	}
	defer g.close()
	V := m.Arch.Vocab
	ev := DFlashEval{Matching: make([]float64, G-1)}
	run := 0
	var blocks []dflashBlock
	var labels [][]int32
	flush := func() error {
		n := len(blocks)
		for len(blocks) < B {
			blocks = append(blocks, blocks[0]) // padding, not counted
		}
		if err := g.in.set(df, blocks); err != nil {
			return err
		}
		if err := m.Backend().Compute(g.graph); err != nil {
			return err
		}
		out, err := g.logits.F32()
		if err != nil {
			return err
		}
		for b, ls := range labels[:n] {
			accepting := true
			for k, l := range ls {
				row := out[(b*G+k+1)*V : (b*G+k+2)*V]
				if int32(training.Argmax(row)) == l {
					ev.Matching[k]++
					if accepting {
						run++
					}
				} else {
					accepting = false
				}
			}
		}
		ev.Blocks += n
		blocks, labels = blocks[:0], labels[:0]
		return nil
	}
	for off := 0; off+G+1 <= len(text); off += seqLen {
		seq := text[off:min(off+seqLen, len(text))]
		logits, err := dec.Logits(seq)
		if err != nil {
			return DFlashEval{}, err
		}
		rows := slices.Clone(dec.Captured())
		for a := 1; a+G <= len(seq); a++ {
			blk, ls := anchoredBlock(seq, logits, rows, a, G, W)
			blocks, labels = append(blocks, blk), append(labels, ls)
			if len(blocks) == B {
				if err := flush(); err != nil {
					return DFlashEval{}, err
				}
			}
		}
		if len(blocks) > 0 {
			// The context rows are this window's: evaluate before the next one overwrites them.
			if err := flush(); err != nil {
				return DFlashEval{}, err
			}
		}
	}
	if ev.Blocks == 0 {
		return DFlashEval{}, fmt.Errorf("dflash evaluation: %d tokens hold no block of %d", len(text), G)
	}
	for k := range ev.Matching {
		ev.Matching[k] /= float64(ev.Blocks)
	}
	ev.Accepted = float64(run) / float64(ev.Blocks)
	return ev, nil
}

// TeacherPromptTokens is the length of the text's openings a teacher continues to make a
// distillation corpus (toy train -teacher, the dflash recipe's -generated).
const TeacherPromptTokens = 16

// TeacherPrompts draws n prompts of length tokens from corpus, at offsets a PCG seeded with
// seed picks: the openings a teacher continues to make a distillation corpus (TargetText).
func TeacherPrompts(corpus []int32, n, length int, seed uint64) ([][]int32, error) {
	if length < 1 || len(corpus) < length {
		return nil, fmt.Errorf("dflash training: the data holds %d tokens, fewer than a prompt of %d", len(corpus), length)
	}
	rng := rand.New(rand.NewPCG(seed, 0x67656e))
	prompts := make([][]int32, n)
	for i := range prompts {
		off := rng.IntN(len(corpus) - length + 1)
		prompts[i] = corpus[off : off+length]
	}
	return prompts, nil
}

// targetTextSlots is the number of sequences TargetText generates at once.
const targetTextSlots = 8

// TargetText generates a distillation corpus from the target itself: for each prompt, the
// prompt and n tokens the target generates after it with sampler params p (greedy: its own
// argmax chain, on which a drafter's labels are exactly the next tokens), concatenated in the
// prompts' order, in the target's token ids (not re-tokenized text: a model's greedy chain is
// often not the tokenizer's own split of its text, and a draft must predict the chain). A
// drafter or draft model trained on the target's own text sees at training the contexts it
// meets when drafting. Up to 8 prompts are generated at once, through a BatchDecoder (one
// step carries every sequence's next token: about 4× the tokens per second of one sequence on
// two cores); a batched step's logits are the single decoder's within float32 rounding
// (TestBatchDecoderMatchesDecoder), so a greedy chain may part from a lone decoder's only at a
// near-tie. progress, when not nil, is called as prompts complete with the number done, in
// order; a cancelled ctx stops it between steps with ctx's error.
func TargetText(ctx context.Context, target *decoding.GGUFModel, prompts [][]int32, n int, p sample.Params, opts decoding.DecoderOptions, progress func(done int)) ([]int32, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	longest := 0
	for _, pr := range prompts {
		longest = max(longest, len(pr))
	}
	slotCtx := min(longest+n, target.Arch.Context)
	for _, pr := range prompts {
		if len(pr) == 0 || len(pr) >= slotCtx {
			return nil, fmt.Errorf("dflash training: a prompt of %d tokens for a context of %d", len(pr), slotCtx)
		}
	}
	slots := min(targetTextSlots, len(prompts))
	if slots == 0 {
		return nil, nil
	}
	bd, err := decoding.NewBatchDecoder(target, decoding.BatchDecoderOptions{Slots: slots, SlotContext: slotCtx, KVType: opts.KVType,
		FlashAttention: opts.FlashAttention, Threads: opts.Threads, Batch: max(256, slots*longest)})
	if err != nil {
		return nil, err
	}
	defer bd.Close()
	s := sample.NewSampler(p)
	var out []int32
	for first := 0; first < len(prompts); first += slots {
		group := prompts[first:min(first+slots, len(prompts))]
		hists := make([][]int32, len(group))
		in := make([]decoding.BatchInput, len(group))
		for i, pr := range group {
			bd.Release(i)
			hists[i] = slices.Clone(pr)
			in[i] = decoding.BatchInput{Slot: i, Tokens: pr}
		}
		for len(in) > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			logits, err := bd.Step(in)
			if err != nil {
				return nil, err
			}
			next := in[:0]
			for j, x := range in {
				i := x.Slot
				h := append(hists[i], s.Sample(logits[j], hists[i]))
				hists[i] = h
				if len(h) < slotCtx && len(h) < len(group[i])+n {
					next = append(next, decoding.BatchInput{Slot: i, Tokens: h[len(h)-1:]})
				}
			}
			in = next
		}
		for i, h := range hists {
			out = append(out, h...)
			if progress != nil {
				progress(first + i + 1)
			}
		}
	}
	return out, nil
}
