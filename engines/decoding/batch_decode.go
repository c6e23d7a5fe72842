package decoding

import (
	"fmt"
	"math"
	"slices"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// BatchDecoderOptions configure a BatchDecoder.
type BatchDecoderOptions struct {
	// Slots is the number of sequences the cache holds at once (default 1).
	Slots int
	// SlotContext is the number of positions each sequence may use (default: the model's
	// trained context, Architecture.Context).
	SlotContext int
	// KVType is the cache's element type (default f16). q8_0 needs FlashAttention.
	KVType KVCacheType
	// FlashAttention stores the values for flash attention, as DecoderOptions.FlashAttention.
	FlashAttention bool
	// Threads is the number of CPU threads (0: those of the model's backend).
	Threads int
	// Batch is the most tokens, over all sequences, that one step may carry (default 256).
	Batch int
}

// maxBatchGraphs bounds the graphs a BatchDecoder keeps (least recently used evicted).
const maxBatchGraphs = 24

// BatchDecoder decodes several independent sequences at once with one graph per step: the
// continuous batching of an inference server. Each sequence owns a slot of the key/value cache;
// a step carries any slots' new tokens (a prompt chunk for one, the last sampled token for
// another) and returns the logits after the last token of each. Sequences join and leave
// between steps (Release).
//
// The cache is one tensor per layer in which each slot owns a region of SlotContext cells:
// position p of slot s is cell s·SlotContext+p. A step's attention reads only the regions of
// its own sequences, up to the longest one's position rounded up to a bucket: the sequences of
// one token each (the generating ones) are one batched attention over the regions of the
// slots from the first of them to the last, each sequence of a prompt chunk one over its own
// region, and a mask per query row keeps each token to its earlier positions. The transformer
// is the one forward pass every engine shares (transformer.ForwardPass), with this attention as its attend
// hook; each token carries its own position for RoPE. On the CPU the weights multiply a step's
// few columns with toy's own kernel (GGUFModel.ownColumns), so a sequence's logits do not
// depend on which other sequences share its step.
//
// A BatchDecoder is not safe for concurrent use.
type BatchDecoder struct {
	m       *GGUFModel
	opts    BatchDecoderOptions
	slots   int
	slotCtx int
	bucket  int
	kvCache // a region of slotCtx cells per slot

	graphs map[batchKey]*batchGraph
	clock  int64
	pos    []int     // positions used per slot
	out    []float32 // the logits Step returns
	// capture lists the layers whose outputs each step reads into captured (SetCapture).
	capture  []int
	captured [][]float32
}

// BatchInput is one sequence's new tokens in a step.
type BatchInput struct {
	Slot   int
	Tokens []int32
	// Logits is the number of the input's last tokens after each of which Step returns the
	// logits (0: 1, the last token's): a speculative verification reads the target's logits
	// after the last committed token and after each proposal.
	Logits int
}

// logits is the number of logit rows Step returns for the input.
func (s BatchInput) logits() int { return max(1, s.Logits) }

// batchBucket is the granularity of the cells a BatchDecoder's step attends per sequence
// (kvBucket's counterpart: smaller, as every sequence of a step attends that many).
const batchBucket = 64

// batchKey identifies a cached graph: n tokens per step over seqs sequences (outs logit rows),
// attending to
// kvLen cells of each, in the attention groups layout prints (BatchDecoder.layout); direct
// when the tokens are the query rows in order (no padding rows), so that the graph gathers and
// scatters nothing.
type batchKey struct {
	n, seqs, outs, kvLen int
	layout               string
	direct               bool
}

type batchGraph struct {
	key    batchKey
	ctx    *ggml.Context
	graph  *ggml.Graph
	alloc  *ggml.Allocator
	tokens *ggml.Tensor // i32 [n]
	pos    *ggml.Tensor // i32 [n]: RoPE positions
	cell   *ggml.Tensor // i32 [n]: cache cells written
	rows   *ggml.Tensor // i32 [outs]: the tokens whose logits are returned
	// gather (i32 [Σ T·S]) and scatter (i32 [n]) map the step's tokens to the attention's
	// query rows and back (attnLayout); nil in a direct graph (batchKey).
	gather, scatter *ggml.Tensor
	cacheInputs
	logits  *ggml.Tensor   // [Vocab, outs]
	hidden  []*ggml.Tensor // the captured layers' outputs [d, n] (BatchDecoder.SetCapture)
	lastUse int64

	posBuf, cellBuf, rowBuf, gatherBuf, scatterBuf []int32
	queryPos                                       []int // the position of each query row's token; -1: padding
}

// NewBatchDecoder prepares a batched decoder of m: it allocates the cache of Slots·SlotContext
// cells (zeroed) and checks opts.
func NewBatchDecoder(m *GGUFModel, opts BatchDecoderOptions) (*BatchDecoder, error) {
	a := &m.Arch
	if opts.Slots == 0 {
		opts.Slots = 1
	}
	if opts.SlotContext == 0 {
		opts.SlotContext = a.Context
	}
	if opts.Batch == 0 {
		opts.Batch = 256
	}
	switch {
	case opts.Slots < 1:
		return nil, fmt.Errorf("batch decoder: %d slots: want at least 1", opts.Slots)
	case opts.SlotContext < 1:
		return nil, fmt.Errorf("batch decoder: slot context %d: want at least 1", opts.SlotContext)
	case opts.Batch < 1:
		return nil, fmt.Errorf("batch decoder: batch %d: want at least 1", opts.Batch)
	case opts.Threads < 0:
		return nil, fmt.Errorf("batch decoder: %d threads", opts.Threads)
	case opts.KVType < KVF16 || opts.KVType > KVF32:
		return nil, fmt.Errorf("batch decoder: unknown KV cache type %d", opts.KVType)
	}
	if a.Positions == transformer.PosLearned && opts.SlotContext > a.Context {
		return nil, fmt.Errorf("batch decoder: a context of %d: %s's learned positions stop at its trained context, %d", opts.SlotContext, a.Name, a.Context)
	}
	kvt := opts.KVType.ggmlType()
	if ggml.IsQuantized(kvt) {
		if !opts.FlashAttention {
			return nil, fmt.Errorf("batch decoder: a %s KV cache needs flash attention (without it, values are stored transposed, which block types cannot be)", kvt.String())
		}
		if bs := ggml.BlockSize(kvt); a.HeadDimK%bs != 0 || a.HeadDimV%bs != 0 {
			return nil, fmt.Errorf("batch decoder: a %s KV cache needs head sizes that are multiples of %d, not %d and %d", ggml.TypeName(kvt), bs, a.HeadDimK, a.HeadDimV)
		}
	}
	cells := int64(opts.Slots) * int64(opts.SlotContext)
	if c := int64(a.NKVHeads * a.HeadDimV); cells*c > math.MaxInt32 {
		return nil, fmt.Errorf("batch decoder: %d slots of %d positions with %d-wide values are too many cache cells", opts.Slots, opts.SlotContext, c)
	}
	b := &BatchDecoder{m: m, opts: opts, slots: opts.Slots, slotCtx: opts.SlotContext,
		bucket: batchBucket, graphs: map[batchKey]*batchGraph{}, pos: make([]int, opts.Slots)}
	if err := b.open(m, opts.KVType, opts.FlashAttention, opts.Threads, int(cells)); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close frees the cache, the graphs and the decoder's backend (not the model).
func (b *BatchDecoder) Close() error {
	for k, g := range b.graphs {
		g.close()
		delete(b.graphs, k)
	}
	b.kvCache.close()
	return nil
}

func (g *batchGraph) close() {
	g.alloc.Close()
	g.ctx.Close()
}

// Slots is the number of sequences the decoder holds.
func (b *BatchDecoder) Slots() int { return b.slots }

// SlotContext is the number of positions each sequence may use.
func (b *BatchDecoder) SlotContext() int { return b.slotCtx }

// Model is the model the decoder runs.
func (b *BatchDecoder) Model() *GGUFModel { return b.m }

// MaxBatch is the most tokens one step may carry.
func (b *BatchDecoder) MaxBatch() int { return b.opts.Batch }

// Pos is the number of positions slot has used.
func (b *BatchDecoder) Pos(slot int) int { return b.pos[slot] }

// Release empties slot: its next tokens start a new sequence at position 0.
func (b *BatchDecoder) Release(slot int) { b.pos[slot] = 0 }

// Truncate keeps the first n positions of slot's sequence and drops the rest: its next tokens
// continue at position n, attending the n cells kept (a server reusing the prefix a new prompt
// shares with the slot's last sequence). Truncate(slot, 0) is Release.
func (b *BatchDecoder) Truncate(slot, n int) error {
	if slot < 0 || slot >= b.slots {
		return fmt.Errorf("batch decoder: slot %d outside 0..%d", slot, b.slots-1)
	}
	if n < 0 || n > b.pos[slot] {
		return fmt.Errorf("batch decoder: slot %d: cannot keep %d positions of %d", slot, n, b.pos[slot])
	}
	b.pos[slot] = n
	return nil
}

// CopyPrefix makes slot dst hold the first n positions of slot src's sequence: it copies their
// keys and values, cell for cell, into dst's region, and dst's next tokens continue at position
// n (a server starting a request whose prompt shares a prefix with another slot's sequence,
// such as a common system message, from that prefix instead of computing it again). src keeps
// its sequence; dst's own is dropped. The copies are the same to the bit as src's cells, which
// sit at the same positions, so the keys' rotations hold.
func (b *BatchDecoder) CopyPrefix(dst, src, n int) error {
	switch {
	case dst < 0 || dst >= b.slots || src < 0 || src >= b.slots:
		return fmt.Errorf("batch decoder: slots %d and %d: want slots in 0..%d", dst, src, b.slots-1)
	case dst == src:
		return b.Truncate(dst, n)
	case n < 0 || n > b.pos[src]:
		return fmt.Errorf("batch decoder: slot %d: cannot copy %d positions of %d", src, n, b.pos[src])
	case n == 0:
		b.Release(dst)
		return nil
	}
	nl := len(b.kCache)
	size := 8*nl + 8 // per layer two copies of a view into a view, and the two cache tensors
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 6 * nl, Graphs: 1, GraphSize: size})
	if err != nil {
		return err
	}
	defer ctx.Close()
	// region views the cells [0, n) of slot's region in a cache tensor: whole rows where a row is
	// a cell (keys, and values for flash attention: each head's rows in a plane of its own), n
	// elements of each row where the values are stored transposed.
	region := func(t *ggml.Tensor, slot int, cellsAreRows bool) *ggml.Tensor {
		ne, nb := t.Ne(), t.Nb()
		first := slot * b.slotCtx
		if cellsAreRows {
			return ctx.View(t, []int64{ne[0], int64(n), ne[2]}, []int{nb[1], nb[2]}, first*nb[1])
		}
		return ctx.View(t, []int64{int64(n), ne[1]}, []int{nb[1]}, first*ggml.TypeSize(t.Type()))
	}
	var copies []*ggml.Tensor
	for il := range nl {
		copies = append(copies,
			ctx.Cpy(region(b.kCache[il], src, true), region(b.kCache[il], dst, true)),
			ctx.Cpy(region(b.vCache[il], src, b.flash), region(b.vCache[il], dst, b.flash)))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("batch decoder: copying %d positions from slot %d to %d: %w", n, src, dst, err)
	}
	g, err := ctx.NewGraph(size, false)
	if err != nil {
		return err
	}
	for _, c := range copies {
		if err := g.Expand(c); err != nil {
			return err
		}
	}
	if err := b.backend.Compute(g); err != nil {
		return fmt.Errorf("batch decoder: copying %d positions from slot %d to %d: %w", n, src, dst, err)
	}
	b.pos[dst] = n
	return nil
}

// Step appends each input's tokens to its slot's sequence, all in one graph, and returns the
// logits after the last token of each input, in order (Vocab values each); an input with
// Logits m > 1 gets m rows, after each of its last m tokens in order. The slices belong
// to the decoder and are overwritten by its next Step. Input that does not fit its slot's
// context is refused (ErrContextFull) and nothing is processed.
func (b *BatchDecoder) Step(in []BatchInput) ([][]float32, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("batch decoder: a step of no sequences")
	}
	v := b.m.Arch.Vocab
	n, maxEnd, outs := 0, 0, 0
	seen := make([]bool, b.slots)
	for _, s := range in {
		if s.Slot < 0 || s.Slot >= b.slots {
			return nil, fmt.Errorf("batch decoder: slot %d outside 0..%d", s.Slot, b.slots-1)
		}
		if seen[s.Slot] {
			return nil, fmt.Errorf("batch decoder: slot %d twice in one step", s.Slot)
		}
		seen[s.Slot] = true
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("batch decoder: slot %d: no tokens to process", s.Slot)
		}
		if s.Logits < 0 || s.Logits > len(s.Tokens) {
			return nil, fmt.Errorf("batch decoder: slot %d: the logits of %d of its %d tokens", s.Slot, s.Logits, len(s.Tokens))
		}
		outs += s.logits()
		for i, t := range s.Tokens {
			if t < 0 || int(t) >= v {
				return nil, fmt.Errorf("batch decoder: slot %d: token %d (at %d) is outside the vocabulary 0..%d of %s", s.Slot, t, i, v-1, b.m.path)
			}
		}
		end := b.pos[s.Slot] + len(s.Tokens)
		if end > b.slotCtx {
			return nil, fmt.Errorf("batch decoder: slot %d: %d positions used and %d more tokens do not fit a context of %d: %w", s.Slot, b.pos[s.Slot], len(s.Tokens), b.slotCtx, ErrContextFull)
		}
		maxEnd = max(maxEnd, end)
		n += len(s.Tokens)
	}
	if n > b.opts.Batch {
		return nil, fmt.Errorf("batch decoder: a step of %d tokens: at most %d", n, b.opts.Batch)
	}
	kvLen := min((maxEnd+b.bucket-1)/b.bucket*b.bucket, b.slotCtx)
	groups, rowOf, direct := b.layout(in)
	g, err := b.graphFor(batchKey{n: n, seqs: len(in), outs: outs, kvLen: kvLen, layout: fmt.Sprint(groups), direct: direct}, groups)
	if err != nil {
		return nil, err
	}
	if err := g.setInputs(b, in, rowOf); err != nil {
		return nil, err
	}
	if err := b.backend.Compute(g.graph); err != nil {
		return nil, err
	}
	for _, s := range in {
		b.pos[s.Slot] += len(s.Tokens)
	}
	if b.captured, err = readHidden(g.hidden, n, b.m.Arch.DModel); err != nil {
		return nil, err
	}
	if cap(b.out) < outs*v {
		b.out = make([]float32, outs*v)
	}
	b.out = b.out[:outs*v]
	if err := g.logits.ReadF32Into(b.out); err != nil {
		return nil, err
	}
	rows := make([][]float32, 0, outs)
	for _, s := range in {
		for range s.logits() {
			i := len(rows)
			rows = append(rows, b.out[i*v:(i+1)*v:(i+1)*v])
			if j := NonFinite(rows[i]); j >= 0 {
				return nil, fmt.Errorf("%s: the logits of slot %d hold %g: the model's weights or metadata have non-finite values", b.m.path, s.Slot, rows[i][j])
			}
		}
	}
	return rows, nil
}

// layout groups the sequences of a step for attention (attnLayout): the inputs of one length
// together, the shortest first (the generating ones, of one token), each group over the regions
// of its slots' range. Slots of that range without an input of that length get padding rows,
// which nothing reads; where they would outnumber the real rows (prompt chunks of one length in
// slots far apart), each chunk of that length is a group of its own. Every group is a few nodes
// a layer, so a step that several new prompts join (a burst of requests, each computing the few
// tokens the prompt cache left) attends in one group per length rather than one per prompt.
// rowOf[i] is the query row of input i's first token; direct says the tokens are the query rows
// in order, with no padding rows between them (batchKey).
func (b *BatchDecoder) layout(in []BatchInput) (groups []attnGroup, rowOf []int, direct bool) {
	rowOf = make([]int, len(in))
	byLen := map[int][]int{} // the indices of the inputs of each length
	var lens []int
	for i, s := range in {
		t := len(s.Tokens)
		if byLen[t] == nil {
			lens = append(lens, t)
		}
		byLen[t] = append(byLen[t], i)
	}
	slices.Sort(lens)
	row := 0
	for _, t := range lens {
		of := byLen[t]
		lo, hi := b.slots, -1
		for _, i := range of {
			lo, hi = min(lo, in[i].Slot), max(hi, in[i].Slot)
		}
		if span := hi - lo + 1; t == 1 || span <= 2*len(of) {
			g := attnGroup{T: int64(t), S: int64(span), first: int64(lo * b.slotCtx), stride: int64(b.slotCtx)}
			groups = append(groups, g)
			for _, i := range of {
				rowOf[i] = row + (in[i].Slot-lo)*t
			}
			row += int(g.rows())
			continue
		}
		for _, i := range of {
			g := attnGroup{T: int64(t), S: 1, first: int64(in[i].Slot * b.slotCtx), stride: int64(b.slotCtx)}
			groups = append(groups, g)
			rowOf[i] = row
			row += int(g.rows())
		}
	}
	direct, t := true, 0
	for i, s := range in {
		direct = direct && rowOf[i] == t
		t += len(s.Tokens)
	}
	return groups, rowOf, direct && t == row
}

// setInputs uploads the inputs of the step in, whose inputs' first query rows are rowOf.
func (g *batchGraph) setInputs(b *BatchDecoder, in []BatchInput, rowOf []int) error {
	a := &b.m.Arch
	toks := make([]int32, 0, g.key.n)
	for r := range g.gatherBuf {
		g.gatherBuf[r] = 0
		g.queryPos[r] = -1
	}
	t, o := 0, 0
	for i, s := range in {
		p0 := b.pos[s.Slot]
		for j := range s.Tokens {
			g.posBuf[t] = int32(p0 + j)
			g.cellBuf[t] = int32(s.Slot*b.slotCtx + p0 + j)
			r := rowOf[i] + j
			g.gatherBuf[r], g.scatterBuf[t], g.queryPos[r] = int32(t), int32(r), p0+j
			t++
		}
		toks = append(toks, s.Tokens...)
		for j := s.logits(); j > 0; j-- {
			g.rowBuf[o] = int32(t - j)
			o++
		}
	}
	for _, x := range []struct {
		t   *ggml.Tensor
		buf []int32
	}{{g.tokens, toks}, {g.pos, g.posBuf}, {g.cell, g.cellBuf}, {g.rows, g.rowBuf}, {g.gather, g.gatherBuf}, {g.scatter, g.scatterBuf}} {
		if x.t == nil {
			continue // a direct graph's gather and scatter
		}
		if err := x.t.SetI32(x.buf); err != nil {
			return err
		}
	}
	kvLen := g.key.kvLen
	return g.set(a, g.cellBuf, b.cells, func(f32 []float32, f16 []uint16, window int) {
		if f16 != nil {
			fillBatchMask(f16, g.queryPos, kvLen, window, 0, f16NegInf)
		} else {
			fillBatchMask(f32, g.queryPos, kvLen, window, 0, float32(math.Inf(-1)))
		}
	})
}

// fillBatchMask writes the [kvLen, rows] mask of a step's query rows: the row of a query at
// position p sees the cells of its sequence's region at positions visible from p (visible);
// a padding row (position -1) sees every cell, so that its softmax stays finite (its output
// is not used).
func fillBatchMask[E float32 | uint16](mask []E, queryPos []int, kvLen, window int, zero, negInf E) {
	for r, p := range queryPos {
		row := mask[r*kvLen : (r+1)*kvLen]
		for c := range row {
			if p < 0 || visible(p, c, window) {
				row[c] = zero
			} else {
				row[c] = negInf
			}
		}
	}
}

// graphFor returns the cached graph of key, building it (and evicting the least recently used
// one when there are too many) if needed.
func (b *BatchDecoder) graphFor(key batchKey, groups []attnGroup) (*batchGraph, error) {
	b.clock++
	if g, ok := b.graphs[key]; ok {
		g.lastUse = b.clock
		return g, nil
	}
	if len(b.graphs) >= maxBatchGraphs {
		var oldest *batchGraph
		for _, g := range b.graphs {
			if oldest == nil || g.lastUse < oldest.lastUse {
				oldest = g
			}
		}
		oldest.close()
		delete(b.graphs, oldest.key)
	}
	g, err := b.build(key, groups)
	if err != nil {
		return nil, err
	}
	g.lastUse = b.clock
	b.graphs[key] = g
	return g, nil
}

// build makes, allocates and returns the graph of key, whose attention has groups.
func (b *BatchDecoder) build(key batchKey, groups []attnGroup) (g *batchGraph, err error) {
	a := &b.m.Arch
	size := (&Decoder{m: b.m}).graphSize() + 8 + a.NLayers*(4+16*len(groups))
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: size + 16, Graphs: 1, GraphSize: size})
	if err != nil {
		return nil, err
	}
	g = &batchGraph{key: key, ctx: ctx}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	n, kvLen := int64(key.n), int64(key.kvLen)
	g.tokens = ctx.NewTensor(ggml.I32, n).SetName("inp_tokens").SetInput()
	g.pos = ctx.NewTensor(ggml.I32, n).SetName("inp_pos").SetInput()
	g.cell = ctx.NewTensor(ggml.I32, n).SetName("inp_cells").SetInput()
	g.rows = ctx.NewTensor(ggml.I32, int64(key.outs)).SetName("inp_out_rows").SetInput()
	queries := int64(0)
	for _, gr := range groups {
		queries += gr.rows()
	}
	if !key.direct {
		g.gather = ctx.NewTensor(ggml.I32, queries).SetName("inp_gather").SetInput()
		g.scatter = ctx.NewTensor(ggml.I32, n).SetName("inp_scatter").SetInput()
	}
	g.posBuf, g.cellBuf, g.rowBuf = make([]int32, n), make([]int32, n), make([]int32, key.outs)
	g.gatherBuf, g.scatterBuf, g.queryPos = make([]int32, queries), make([]int32, n), make([]int, queries)
	g.declare(ctx, a, &b.kvCache, n, queries, kvLen)
	layout := attnLayout{n: n, kvLen: kvLen, groups: groups, gather: g.gather, scatter: g.scatter}
	f := transformer.ForwardPass{Ctx: ctx, A: a, W: &b.m.Weights, Pos: g.pos, Rows: g.rows, SortTopK: b.sortTopK,
		Linear:     func(w, x *ggml.Tensor) *ggml.Tensor { return b.m.MulMat(ctx, w, x) },
		RMSNormMul: func(x, w *ggml.Tensor) *ggml.Tensor { return b.m.rmsNormMul(ctx, x, w, a.NormEps) },
		Rope:       b.m.ropeHook(ctx, g.pos),
		Attend: func(il int, q, k, v *ggml.Tensor) *ggml.Tensor {
			return b.attend(ctx, a, il, q, k, v, g.maskOf(a, il), g.cell, g.vIdx, layout)
		}}
	f.LayerNormMulAdd = func(x, w, bias *ggml.Tensor) *ggml.Tensor { return b.m.layerNormMulAdd(ctx, x, w, bias, a.NormEps) }
	if len(b.capture) > 0 {
		g.hidden = make([]*ggml.Tensor, len(b.capture))
		f.Capture = func(il int, x *ggml.Tensor) {
			if j := slices.Index(b.capture, il); j >= 0 && x != nil {
				g.hidden[j] = x.SetOutput()
			}
		}
	}
	g.logits = f.Logits(g.tokens).SetOutput()
	if g.graph, err = ctx.NewGraph(size, false); err != nil {
		return g, err
	}
	if err = g.graph.Expand(g.logits); err != nil {
		return g, fmt.Errorf("building the batched %s graph: %w", a.Name, err)
	}
	if g.alloc, err = b.backend.NewAllocator(); err != nil {
		return g, err
	}
	if err = g.alloc.Alloc(g.graph); err != nil {
		return g, err
	}
	return g, nil
}
