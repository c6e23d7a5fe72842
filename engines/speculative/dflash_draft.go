package speculative

import (
	"fmt"
	"math"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/ggml"
)

// NewDFlashSpeculative returns a speculative decoder of target whose proposals come from the
// DFlash drafter df: each step fills one block (the last committed token and Gamma−1 masked
// positions) in one forward of the drafter, which reads the target's hidden states of the
// context (the target decoder is set to capture them), and the target verifies the first
// proposals of them (0: all Gamma−1) as with a draft model. df must have been made for
// target's model. The decoder and the drafter are used, not owned.
func NewDFlashSpeculative(target *decoding.Decoder, df *DFlash, proposals int, s *sample.Sampler) (*Speculative, error) {
	if df.target != target.Model() {
		return nil, fmt.Errorf("dflash: the drafter was made for %s, not %s", df.target.Path(), target.Model().Path())
	}
	if proposals == 0 {
		proposals = df.Cfg.Gamma - 1
	}
	if proposals < 1 || proposals > df.Cfg.Gamma-1 {
		return nil, fmt.Errorf("dflash: %d proposals a step: the drafter's blocks of %d hold 1..%d", proposals, df.Cfg.Gamma, df.Cfg.Gamma-1)
	}
	if err := target.SetCapture(df.Cfg.TargetLayers); err != nil {
		return nil, err
	}
	return newSpeculative(target, &dflashDrafter{df: df}, proposals, s), nil
}

// dflashDrafter drafts with a DFlash block drafter. The context keys and values of every
// drafter layer depend only on a context row and its position, so the drafter caches them
// (dflashCache): each block computes those of the rows committed since the last block (the
// pending rows, the captured hidden states of the tokens the target read) and reads the
// window's from the cache, so the window costs a gather rather than a projection per block.
type dflashDrafter struct {
	df      *DFlash
	cache   *dflashCache
	pending []float32            // the context rows not yet in the cache, F values each
	next    int                  // the position of the first pending row
	ingest  map[int]*dflashGraph // by rows written
	blocks  map[int]*dflashGraph // by context rows read
	logits  []float32
}

// contextBucket rounds the context rows a drafter graph reads (without a window), so that a
// graph serves that many steps.
const contextBucket = 64

func (d *dflashDrafter) start(sp *Speculative, head []int32) error {
	cells := d.df.Cfg.Window
	if cells == 0 {
		cells = sp.target.MaxContext()
	}
	if d.cache == nil || d.cache.cells != cells {
		d.close()
		var err error
		if d.cache, err = newDFlashCache(d.df, cells); err != nil {
			return err
		}
	}
	// Only the last cells rows of the prompt can be read.
	rows := sp.target.Captured()
	rows = rows[:len(head)][max(0, len(head)-cells):]
	d.next = len(head) - len(rows)
	d.pending = d.pending[:0]
	d.keep(rows)
	return nil
}

// keep appends copies of rows to the pending rows.
func (d *dflashDrafter) keep(rows [][]float32) {
	for _, r := range rows {
		d.pending = append(d.pending, r...)
	}
}

func (d *dflashDrafter) room(sp *Speculative) int { return d.df.Cfg.Gamma - 1 }

// graph returns the graph of key in graphs, building it with build when missing.
func graph(graphs map[int]*dflashGraph, key int, build func(int) (*dflashGraph, error)) (*dflashGraph, error) {
	if g, ok := graphs[key]; ok {
		return g, nil
	}
	g, err := build(key)
	if err != nil {
		return nil, err
	}
	graphs[key] = g
	return g, nil
}

func (d *dflashDrafter) propose(sp *Speculative, g int) ([]int32, error) {
	return d.proposeAfter(&sp.SpecSampler, sp.hist, g)
}

// proposeAfter drafts g tokens after the committed tokens hist, drawn by rule: it writes the
// pending rows into the cache and fills one block anchored at hist's last token.
func (d *dflashDrafter) proposeAfter(rule *SpecSampler, hist []int32, g int) ([]int32, error) {
	df := d.df
	if d.ingest == nil {
		d.ingest, d.blocks = map[int]*dflashGraph{}, map[int]*dflashGraph{}
	}
	// Write the pending rows' keys and values, at most a block's worth per graph.
	F := df.Cfg.features(&df.target.Arch)
	for len(d.pending) > 0 {
		n := min(len(d.pending)/F, df.Cfg.Gamma)
		gr, err := graph(d.ingest, n, func(n int) (*dflashGraph, error) { return d.cache.buildIngest(n) })
		if err != nil {
			return nil, err
		}
		if err := d.cache.setIngest(gr, d.pending[:n*F], d.next); err != nil {
			return nil, err
		}
		if err := df.target.Backend().Compute(gr.graph); err != nil {
			return nil, err
		}
		d.pending = d.pending[n*F:]
		d.next += n
	}
	d.pending = d.pending[:0]

	n0 := len(hist)
	pos := n0 - 1 // the anchor's; the context is the positions before it
	W := df.Cfg.Window
	if W == 0 {
		W = max(1, (min(pos, d.cache.cells)+contextBucket-1)/contextBucket*contextBucket)
	}
	gr, err := graph(d.blocks, W, d.cache.buildBlock)
	if err != nil {
		return nil, err
	}
	if err := d.cache.setBlock(gr, hist[pos], pos); err != nil {
		return nil, err
	}
	if err := df.target.Backend().Compute(gr.graph); err != nil {
		return nil, err
	}
	V := df.target.Arch.Vocab
	if d.logits == nil {
		d.logits = make([]float32, V*df.Cfg.Gamma)
	}
	if err := gr.logits.ReadF32Into(d.logits); err != nil {
		return nil, err
	}
	drafts := make([]int32, 0, g)
	for i := range g {
		h := append(hist[:n0:n0], drafts...) // the history the proposal follows (a copy)
		x, ok := rule.Pick(i, d.logits[(i+1)*V:(i+2)*V], h)
		if !ok {
			break
		}
		drafts = append(drafts, x)
	}
	return drafts, nil
}

// commit keeps the rows of the verified tokens the target accepted: the last committed token
// and the k accepted proposals.
func (d *dflashDrafter) commit(sp *Speculative, g, k int, y int32) error {
	rows := sp.target.Captured()
	if len(rows) != g+1 {
		return fmt.Errorf("dflash: the verification captured %d rows, want %d", len(rows), g+1)
	}
	d.keep(rows[:k+1])
	return nil
}

// close frees the drafter's graphs and cache.
func (d *dflashDrafter) close() {
	for _, graphs := range []map[int]*dflashGraph{d.ingest, d.blocks} {
		for k, g := range graphs {
			g.close()
			delete(graphs, k)
		}
	}
	if d.cache != nil {
		d.cache.close()
		d.cache = nil
	}
}

// dflashCache holds, per drafter layer, the roped keys and the values of the context rows of
// cells positions, position p at cell p mod cells: the last cells positions a block reads.
type dflashCache struct {
	df      *DFlash
	cells   int
	ctx     *ggml.Context
	buf     *ggml.Buffer
	k, v    []*ggml.Tensor // [HeadDimK·NHeads, cells] per layer, f32
	rowBuf  []int32
	maskBuf []float32
}

func newDFlashCache(df *DFlash, cells int) (*dflashCache, error) {
	a := &df.target.Arch
	w := int64(a.NHeads * a.HeadDimK)
	if err := decoding.FitsMemory(df.target.Backend(), 2*4*float64(df.Cfg.Layers)*float64(cells)*float64(w), "use a smaller window", func() string {
		return fmt.Sprintf("a dflash cache of %d positions (%d layers)", cells, df.Cfg.Layers)
	}); err != nil {
		return nil, err
	}
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 2 * df.Cfg.Layers})
	if err != nil {
		return nil, err
	}
	c := &dflashCache{df: df, cells: cells, ctx: ctx}
	for il := range df.Cfg.Layers {
		c.k = append(c.k, ctx.NewTensor(ggml.F32, w, int64(cells)).SetName(fmt.Sprintf("dflash_cache_k_l%d", il)))
		c.v = append(c.v, ctx.NewTensor(ggml.F32, w, int64(cells)).SetName(fmt.Sprintf("dflash_cache_v_l%d", il)))
	}
	if err := ctx.Err(); err != nil {
		c.close()
		return nil, err
	}
	if c.buf, err = df.target.Backend().Alloc(ctx); err != nil {
		c.close()
		return nil, err
	}
	// Masked cells are still multiplied (by zero weights): they must hold numbers.
	c.buf.Clear(0)
	return c, nil
}

func (c *dflashCache) close() {
	c.buf.Close()
	if c.ctx != nil {
		c.ctx.Close()
		c.ctx = nil
	}
}

// buildIngest builds the graph that writes the keys and values of n context rows (in.feat
// [F, n], at positions in.posK) into their cells (in.cells).
func (c *dflashCache) buildIngest(n int) (*dflashGraph, error) {
	return c.df.newGraph(func(ctx *ggml.Context, g *dflashGraph) []*ggml.Tensor {
		df := c.df
		a := &df.target.Arch
		in := &g.in
		in.W = n
		in.feat = ctx.NewTensor(ggml.F32, int64(df.Cfg.features(a)), int64(n)).SetName("dflash_feat").SetInput()
		in.posK = ctx.NewTensor(ggml.I32, int64(n)).SetName("dflash_pos_k").SetInput()
		in.cells = ctx.NewTensor(ggml.I32, int64(n)).SetName("dflash_cells").SetInput()
		f := df.pass(ctx, in.posK, df.linear(ctx))
		cf := f.Features(in.feat)
		wd := int64(a.NHeads * a.HeadDimK)
		var writes []*ggml.Tensor
		for il := range df.w.Layers {
			k, v := f.KeysValues(il, cf, in.posK)
			writes = append(writes, ctx.SetRows(c.k[il], ctx.Reshape(k, wd, int64(n)), in.cells), ctx.SetRows(c.v[il], v, in.cells))
		}
		return writes
	})
}

// setIngest uploads the inputs of an ingest graph: rows (F values each) at positions p0...
func (c *dflashCache) setIngest(g *dflashGraph, rows []float32, p0 int) error {
	n := g.in.W
	c.rowBuf = c.rowBuf[:0]
	for i := range n {
		c.rowBuf = append(c.rowBuf, int32(p0+i))
	}
	if err := g.in.posK.SetI32(c.rowBuf); err != nil {
		return err
	}
	for i := range c.rowBuf {
		c.rowBuf[i] %= int32(c.cells)
	}
	if err := g.in.cells.SetI32(c.rowBuf); err != nil {
		return err
	}
	return g.in.feat.SetF32(rows)
}

// buildBlock builds the graph of one block reading W context rows from the cache: their keys
// and values gathered from the cells in.cells, then the block's own.
func (c *dflashCache) buildBlock(W int) (*dflashGraph, error) {
	return c.df.newGraph(func(ctx *ggml.Context, g *dflashGraph) []*ggml.Tensor {
		df := c.df
		a := &df.target.Arch
		G := int64(df.Cfg.Gamma)
		in := &g.in
		in.B, in.W, in.G = 1, W, int(G)
		in.tokens = ctx.NewTensor(ggml.I32, G).SetName("dflash_tokens").SetInput()
		in.posQ = ctx.NewTensor(ggml.I32, G).SetName("dflash_pos_q").SetInput()
		in.cells = ctx.NewTensor(ggml.I32, int64(W)).SetName("dflash_cells").SetInput()
		in.mask = ctx.NewTensor(ggml.F32, int64(W)+G, G, 1, 1).SetName("dflash_mask").SetInput()
		wd := int64(a.NHeads * a.HeadDimK)
		f := df.pass(ctx, in.posQ, df.linear(ctx))
		f.Attend = func(il int, q, k, v *ggml.Tensor) *ggml.Tensor {
			k = ctx.Concat(ctx.GetRows(c.k[il], in.cells), ctx.Reshape(k, wd, G), 1)
			v = ctx.Concat(ctx.GetRows(c.v[il], in.cells), v, 1)
			return f.AttendBlocks(q, k, v, in.mask, G, int64(W)+G, 1)
		}
		g.logits = f.Logits(in.tokens).SetOutput()
		return []*ggml.Tensor{g.logits}
	})
}

// setBlock uploads the inputs of a block graph: the anchor at position pos, the masked
// positions after it, and the W cells before it, those before position 0 or out of the
// cache's reach masked.
func (c *dflashCache) setBlock(g *dflashGraph, anchor int32, pos int) error {
	df := c.df
	W, G := g.in.W, g.in.G
	c.rowBuf = c.rowBuf[:0]
	c.rowBuf = append(c.rowBuf, anchor)
	for range G - 1 {
		c.rowBuf = append(c.rowBuf, int32(df.Cfg.MaskToken))
	}
	if err := g.in.tokens.SetI32(c.rowBuf); err != nil {
		return err
	}
	for k := range G {
		c.rowBuf[k] = int32(pos + k)
	}
	if err := g.in.posQ.SetI32(c.rowBuf); err != nil {
		return err
	}
	lo := max(0, pos-c.cells) // the oldest position the cache holds
	c.rowBuf = c.rowBuf[:0]
	if cap(c.maskBuf) < (W+G)*G {
		c.maskBuf = make([]float32, (W+G)*G)
	}
	mask := c.maskBuf[:(W+G)*G]
	clear(mask)
	inf := float32(math.Inf(-1))
	for j := range W {
		p := pos - W + j // context slot j
		if p < lo {
			c.rowBuf = append(c.rowBuf, 0)
			for q := range G {
				mask[q*(W+G)+j] = inf
			}
			continue
		}
		c.rowBuf = append(c.rowBuf, int32(p%c.cells))
	}
	if err := g.in.cells.SetI32(c.rowBuf); err != nil {
		return err
	}
	return g.in.mask.SetF32(mask)
}

// Close frees what the speculative decoder built for its drafter (a DFlash drafter's graphs);
// the decoders and the drafter's weights are the caller's.
func (sp *Speculative) Close() error {
	if d, ok := sp.drafter.(*dflashDrafter); ok {
		d.close()
	}
	return nil
}

// DFlashSlot drafts with a DFlash drafter for one sequence whose target decodes elsewhere: a
// server's slot of a BatchDecoder that captures the drafter's target layers
// (BatchDecoder.SetCapture). The caller hands it the captured rows of the tokens the target
// read and committed, in order (Keep; after a verification, the last token's and the accepted
// proposals'), and asks for proposals after the committed tokens (Propose). A slot keeps its
// cache across sequences: Restart says where the next one's rows start.
type DFlashSlot struct {
	d dflashDrafter
}

// NewSlot returns a drafting state of df for sequences of at most maxCtx positions.
func (df *DFlash) NewSlot(maxCtx int) (*DFlashSlot, error) {
	cells := df.Cfg.Window
	if cells == 0 {
		cells = maxCtx
	}
	c, err := newDFlashCache(df, cells)
	if err != nil {
		return nil, err
	}
	return &DFlashSlot{d: dflashDrafter{df: df, cache: c}}, nil
}

// Restart makes the next kept row position pos's: the cache's rows of the positions before it
// are kept as the context (a new sequence that shares a prefix of pos tokens with the slot's
// last one), the pending ones dropped.
func (s *DFlashSlot) Restart(pos int) {
	s.d.next, s.d.pending = pos, s.d.pending[:0]
}

// Keep appends the rows of the next committed tokens.
func (s *DFlashSlot) Keep(rows [][]float32) { s.d.keep(rows) }

// Propose drafts up to g tokens (at most the block's Gamma−1) after the committed tokens hist,
// drawn by rule, whose rows but the last token's were kept.
func (s *DFlashSlot) Propose(rule *SpecSampler, hist []int32, g int) ([]int32, error) {
	F := s.d.df.Cfg.features(&s.d.df.target.Arch)
	if have := s.d.next + len(s.d.pending)/F; have != len(hist)-1 {
		return nil, fmt.Errorf("dflash: rows of %d positions kept for %d committed tokens", have, len(hist))
	}
	return s.d.proposeAfter(rule, hist, min(g, s.d.df.Cfg.Gamma-1))
}

// Close frees the slot's cache and graphs.
func (s *DFlashSlot) Close() { s.d.close() }
