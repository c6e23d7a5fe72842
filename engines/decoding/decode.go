package decoding

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/sysmem"
)

// ContextPolicy says what a decoder does when its context is full.
type ContextPolicy int

const (
	// ContextError refuses input that does not fit (ErrContextFull); nothing is processed.
	ContextError ContextPolicy = iota
	// ContextShift drops the oldest half of the context and goes on: the most recent
	// MaxContext/2 tokens are processed again from position 0 (recomputed, not re-roped),
	// then the new input follows them.
	ContextShift
)

// ErrContextFull is returned (wrapped) when input does not fit the context under ContextError.
var ErrContextFull = errors.New("context full")

// DecoderOptions configure a Decoder.
type DecoderOptions struct {
	// MaxContext is the number of positions the KV cache holds (default: the model's trained
	// context, Architecture.Context; the cache takes 2·layers·MaxContext·kv-width elements).
	MaxContext int
	// KVType is the cache's element type (default f16). q8_0 needs FlashAttention.
	KVType KVCacheType
	// FlashAttention stores the values as ggml's fused attention (FlashAttnExt, f16 mask)
	// reads them, not transposed, so that a q8_0 cache fits. On a GPU it attends with it; on
	// the CPU toy's own kernels attend such a cache too (kvCache.attend), where they fit.
	FlashAttention bool
	// Threads is the number of CPU threads (0: those of the model's backend).
	Threads int
	// ContextFull is the policy when the context is full (default ContextError).
	ContextFull ContextPolicy
	// Batch is the number of prompt tokens one graph processes (default 256).
	Batch int
}

// kvBucket is the granularity of the attended cache length: a graph attends to the cache
// positions used so far rounded up to it, with the unused ones masked, so decoding reuses one
// graph for kvBucket steps.
const kvBucket = 256

// maxCachedGraphs bounds the multi-token graphs a decoder keeps (one-token decode graphs,
// one per cache-length bucket, are all kept).
const maxCachedGraphs = 4

// Decoder runs a GGUFModel over a growing token sequence with a key/value cache: Prompt feeds
// tokens in batches, Next one token per step, each returning the logits of the last token;
// Logits returns those of every position (for perplexity). Built graphs are cached per
// (tokens per step, cache-length bucket), so a decode step only sets its inputs and computes.
// A Decoder is not safe for concurrent use.
type Decoder struct {
	m       *GGUFModel
	opts    DecoderOptions
	maxCtx  int
	bucket  int
	kvCache // maxCtx cells

	graphs  map[graphKey]*stepGraph
	clock   int64
	history []int32   // the tokens whose keys and values are in the cache, by position
	out     []float32 // the logits Prompt and Next return

	// last is the logits of the last step, in the backend's memory (LastLogits); with
	// deviceLogits, Prompt and Next leave theirs there only (SetDeviceLogits).
	last         *ggml.Tensor
	deviceLogits bool
	// capture lists the layers whose outputs each step reads into captured (SetCapture).
	capture  []int
	captured [][]float32
	// hiddenOut makes steps compute the final hidden states instead of the logits (Hidden).
	hiddenOut bool
}

// graphKey identifies a cached graph: n tokens per step, attending to kvLen cache positions,
// returning the logits of every token (all) or only the last one.
type graphKey struct {
	n, kvLen int
	all      bool
	// hidden computes the final hidden states [d, n] (after the final norm) instead of the
	// logits (Decoder.Hidden).
	hidden bool
}

// stepGraph is one built and allocated graph with its inputs.
type stepGraph struct {
	key    graphKey
	ctx    *ggml.Context
	graph  *ggml.Graph
	alloc  *ggml.Allocator
	tokens *ggml.Tensor // i32 [n]
	pos    *ggml.Tensor // i32 [n]: positions, also the cache rows written
	cacheInputs
	logits  *ggml.Tensor
	lastUse int64
	posBuf  []int32
	hidden  []*ggml.Tensor // the captured layers' outputs [d, n] (Decoder.SetCapture)
}

// cacheInputs are the inputs of a decoding graph's attention over the KV cache, with the host
// buffers they are filled from: the masks (global, and sliding-window where some layer slides)
// and, for the unfused path, the cells of the transposed values' elements.
type cacheInputs struct {
	vIdx    *ggml.Tensor // i32 [n·C]: element rows of the transposed V cache (unfused)
	mask    *ggml.Tensor // [kvLen, query rows]: f32 (unfused) or f16 (flash)
	maskSWA *ggml.Tensor // the same for sliding-window layers, or nil
	vIdxBuf []int32
	maskF32 []float32
	maskF16 []uint16
	swaF32  []float32
	swaF16  []uint16
}

// declare makes the inputs of n tokens, attending as the given number of query rows, over
// kvLen cells in ctx: one mask for the global layers and one for the sliding-window ones, only
// those used, and the element rows of the transposed values where c writes them through
// ggml's SetRows (kvCache.elementRows).
func (in *cacheInputs) declare(ctx *ggml.Context, a *transformer.Architecture, c *kvCache, n, queries, kvLen int64) {
	flash := c.flash
	hasGlobal, hasSWA := false, false
	for il := 0; il < a.NLayers; il++ {
		hasSWA = hasSWA || a.IsSliding(il)
		hasGlobal = hasGlobal || !a.IsSliding(il)
	}
	maskType := ggml.F32
	if flash {
		maskType = ggml.F16
	}
	if hasGlobal {
		in.mask = ctx.NewTensor(maskType, kvLen, queries).SetName("inp_mask").SetInput()
	}
	if hasSWA {
		in.maskSWA = ctx.NewTensor(maskType, kvLen, queries).SetName("inp_mask_swa").SetInput()
	}
	if flash {
		if hasGlobal {
			in.maskF16 = make([]uint16, kvLen*queries)
		}
		if hasSWA {
			in.swaF16 = make([]uint16, kvLen*queries)
		}
		return
	}
	if hasGlobal {
		in.maskF32 = make([]float32, kvLen*queries)
	}
	if hasSWA {
		in.swaF32 = make([]float32, kvLen*queries)
	}
	if c.elementRows() {
		ch := int64(a.NKVHeads * a.HeadDimV)
		in.vIdx = ctx.NewTensor(ggml.I32, n*ch).SetName("inp_v_idx").SetInput()
		in.vIdxBuf = make([]int32, n*ch)
	}
}

// maskOf is the mask layer il attends under.
func (in *cacheInputs) maskOf(a *transformer.Architecture, il int) *ggml.Tensor {
	if a.IsSliding(il) {
		return in.maskSWA
	}
	return in.mask
}

// set uploads the inputs of a step whose tokens are written at the given cache cells (of
// cells in all): the value element rows (unfused), and the masks, which fill writes into the
// buffer of the path in use (f32 or f16) for a window (0: the global mask).
func (in *cacheInputs) set(a *transformer.Architecture, cellOf []int32, cells int, fill func(f32 []float32, f16 []uint16, window int)) error {
	if in.vIdx != nil {
		c := a.NKVHeads * a.HeadDimV
		for t, cell := range cellOf {
			row := in.vIdxBuf[t*c : (t+1)*c]
			for ch := range row {
				row[ch] = int32(ch*cells) + cell
			}
		}
		if err := in.vIdx.SetI32(in.vIdxBuf); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		t      *ggml.Tensor
		f32    []float32
		f16    []uint16
		window int
	}{{in.mask, in.maskF32, in.maskF16, 0}, {in.maskSWA, in.swaF32, in.swaF16, a.SlidingWindow}} {
		if m.t == nil {
			continue
		}
		fill(m.f32, m.f16, m.window)
		var err error
		if m.f16 != nil {
			err = m.t.SetF16(m.f16)
		} else {
			err = m.t.SetF32(m.f32)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// NewDecoder prepares a decoder of m: it allocates the KV cache (zeroed) and checks opts.
func NewDecoder(m *GGUFModel, opts DecoderOptions) (*Decoder, error) {
	a := &m.Arch
	if opts.MaxContext == 0 {
		opts.MaxContext = a.Context
	}
	if opts.Batch == 0 {
		opts.Batch = 256
	}
	switch {
	case opts.MaxContext < 1:
		return nil, fmt.Errorf("decoder context %d: want at least 1", opts.MaxContext)
	case opts.Batch < 1:
		return nil, fmt.Errorf("decoder batch %d: want at least 1", opts.Batch)
	case opts.Threads < 0:
		return nil, fmt.Errorf("decoder: %d threads", opts.Threads)
	case opts.KVType < KVF16 || opts.KVType > KVF32:
		return nil, fmt.Errorf("decoder: unknown KV cache type %d", opts.KVType)
	case opts.ContextFull != ContextError && opts.ContextFull != ContextShift:
		return nil, fmt.Errorf("decoder: unknown context policy %d", opts.ContextFull)
	}
	if a.Positions == transformer.PosLearned && opts.MaxContext > a.Context {
		return nil, fmt.Errorf("decoder: a context of %d: %s's learned positions stop at its trained context, %d", opts.MaxContext, a.Name, a.Context)
	}
	kvt := opts.KVType.ggmlType()
	if ggml.IsQuantized(kvt) {
		if !opts.FlashAttention {
			return nil, fmt.Errorf("decoder: a %s KV cache needs flash attention (without it, values are stored transposed, which block types cannot be)", kvt.String())
		}
		if bs := ggml.BlockSize(kvt); a.HeadDimK%bs != 0 || a.HeadDimV%bs != 0 {
			return nil, fmt.Errorf("decoder: a %s KV cache needs head sizes that are multiples of %d, not %d and %d", ggml.TypeName(kvt), bs, a.HeadDimK, a.HeadDimV)
		}
	}
	if c := int64(a.NKVHeads * a.HeadDimV); !opts.FlashAttention && int64(opts.MaxContext)*c > math.MaxInt32 {
		return nil, fmt.Errorf("decoder: a context of %d with %d-wide values is too large for the unfused attention's cache indices (use flash attention)", opts.MaxContext, c)
	}
	d := &Decoder{m: m, opts: opts, maxCtx: opts.MaxContext, bucket: kvBucket, graphs: map[graphKey]*stepGraph{}}
	if err := d.open(m, opts.KVType, opts.FlashAttention, opts.Threads, opts.MaxContext); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// kvCache is a decoder's key/value cache — cells positions per layer — on the backend the
// decoder computes with (the model's, or its own for another thread count), and what that
// backend lacks.
type kvCache struct {
	backend  *ggml.Backend
	ownBE    bool
	cacheCtx *ggml.Context
	cacheBuf *ggml.Buffer
	kCache   []*ggml.Tensor // [HeadDimK, cells, NKVHeads] per layer: each head's cells together
	vCache   []*ggml.Tensor // flash: [HeadDimV, cells, NKVHeads], as the keys; unfused: [cells, HeadDimV·NKVHeads]
	cells    int            // positions per layer
	flash    bool           // values stored for flash attention (not transposed)
	typ      ggml.Type      // the cache's element type
	// kernels is what the kernel table resolved of the model's lookups (GGUFModel.UseKernels)
	// when the cache was made: a group of one query per sequence attends through toy's own CPU
	// kernel (ggml.AttendOne) where it resolved for the cache's type, the unfused attention of
	// the others takes toy's packed GEMM and softmax where they resolved and fit, and new values
	// reach the transposed value cache through toy's own kernel (ggml.StoreTransposed) where it
	// resolved.
	kernels KernelSet
	// sortTopK picks the routed experts with a descending argsort instead of ggml's TOP_K,
	// where the backend lacks it (ggml's CUDA backend in this version).
	sortTopK bool
}

// open chooses the backend and allocates the cache, zeroed.
func (c *kvCache) open(m *GGUFModel, kv KVCacheType, flash bool, threads, cells int) error {
	a := &m.Arch
	c.backend, c.cells, c.flash, c.kernels, c.typ = m.backend, cells, flash, m.kernels, kv.ggmlType()
	if a.IsMoE() {
		hasTopK, err := m.supports(func(ctx *ggml.Context) *ggml.Tensor {
			return ctx.TopK(ctx.NewTensor(ggml.F32, int64(a.NExperts), 1), a.NExpertsUsed)
		})
		if err != nil {
			return err
		}
		c.sortTopK = !hasTopK
	}
	if threads > 0 && threads != m.backend.Threads() {
		be, err := ggml.NewBackend(threads)
		if err != nil {
			return err
		}
		c.backend, c.ownBE = be, true
	}
	typ := kv.ggmlType()
	if err := checkCacheFits(a, typ, cells, c.backend); err != nil {
		return err
	}
	var err error
	if c.cacheCtx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 2 * a.NLayers}); err != nil {
		return err
	}
	ctx, n := c.cacheCtx, int64(cells)
	vw := int64(a.NKVHeads * a.HeadDimV)
	for il := 0; il < a.NLayers; il++ {
		c.kCache = append(c.kCache, ctx.NewTensor(typ, int64(a.HeadDimK), n, int64(a.NKVHeads)).SetName(fmt.Sprintf("cache_k_l%d", il)))
		if flash {
			c.vCache = append(c.vCache, ctx.NewTensor(typ, int64(a.HeadDimV), n, int64(a.NKVHeads)).SetName(fmt.Sprintf("cache_v_l%d", il)))
		} else {
			c.vCache = append(c.vCache, ctx.NewTensor(typ, n, vw).SetName(fmt.Sprintf("cache_v_l%d", il)))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.cacheBuf, err = c.backend.Alloc(ctx); err != nil {
		return err
	}
	// Each sequence of a BatchDecoder owns a region of every row of the transposed values, so
	// attention reads them in strides of the row's length: in huge pages those cost a TLB
	// entry per 2 MiB.
	c.cacheBuf.AdviseHugePages()
	// Masked cache rows are still multiplied (by zero weights): they must hold numbers.
	c.cacheBuf.Clear(0)
	return nil
}

// checkCacheFits refuses, before anything is allocated, a KV cache of cells positions of type
// typ that would take more than the machine's memory: the default context is the model's
// context_length, a header value, which a hostile or mistaken file can set to billions of
// positions.
func checkCacheFits(a *transformer.Architecture, typ ggml.Type, cells int, b *ggml.Backend) error {
	perCell := float64(a.NKVHeads*(a.HeadDimK+a.HeadDimV)) * float64(ggml.TypeSize(typ)) / float64(ggml.BlockSize(typ))
	return FitsMemory(b, float64(a.NLayers)*float64(cells)*perCell, "use a smaller context", func() string {
		return fmt.Sprintf("a KV cache of %d positions (%d layers of %d keys and values each, %s)",
			cells, a.NLayers, a.NKVHeads*(a.HeadDimK+a.HeadDimV), ggml.TypeName(typ))
	})
}

// FitsMemory is an error when bytes, to be allocated on backend b, exceed the machine's memory
// on a CPU backend (a GPU backend's allocator fails by itself, with an error); what says what
// they are for, advice what to do instead.
func FitsMemory(b *ggml.Backend, bytes float64, advice string, what func() string) error {
	total := sysmem.Total()
	if total <= 0 || !b.IsCPU() || bytes <= float64(total) {
		return nil
	}
	return fmt.Errorf("%s takes %.1f GiB, more than this machine's %.1f GiB of memory: %s",
		what(), bytes/(1<<30), float64(total)/(1<<30), advice)
}

// elementRows reports whether new values reach the transposed value cache through ggml's
// SetRows, one element a row at the indices cacheInputs.vIdx holds, rather than through toy's
// own kernel (ggml.StoreTransposed, on the CPU where toy's kernels run), which takes each
// token's cell.
func (c *kvCache) elementRows() bool { return !c.flash && !c.kernels.Has(needStore(c.typ)) }

// close frees the cache and the decoder's own backend.
func (c *kvCache) close() {
	c.cacheBuf.Close()
	if c.cacheCtx != nil {
		c.cacheCtx.Close()
	}
	if c.ownBE {
		c.backend.Close()
		c.ownBE = false
	}
}

// Close frees the cache, the graphs and the decoder's backend (not the model).
func (d *Decoder) Close() error {
	for k, g := range d.graphs {
		g.close()
		delete(d.graphs, k)
	}
	d.kvCache.close()
	return nil
}

func (g *stepGraph) close() {
	g.alloc.Close()
	g.ctx.Close()
}

// Pos is the number of positions used: the tokens in the cache.
func (d *Decoder) Pos() int { return len(d.history) }

// MaxContext is the number of positions the cache holds.
func (d *Decoder) MaxContext() int { return d.maxCtx }

// Model is the model the decoder runs.
func (d *Decoder) Model() *GGUFModel { return d.m }

// Options are the options the decoder was made with.
func (d *Decoder) Options() DecoderOptions { return d.opts }

// History is the tokens in the cache, oldest first.
func (d *Decoder) History() []int32 { return append([]int32(nil), d.history...) }

// Reset empties the cache (the graphs stay built).
func (d *Decoder) Reset() { d.history = d.history[:0] }

// Truncate forgets every position from n on: the cache keeps the first n tokens of History,
// and the next token goes to position n. The forgotten rows stay in the cache until
// overwritten, hidden by the masks, which show a query only the positions before it. It is the
// rollback of speculative decoding.
func (d *Decoder) Truncate(n int) error {
	if n < 0 || n > len(d.history) {
		return fmt.Errorf("decoder: truncate to %d positions: %d are in use", n, len(d.history))
	}
	d.history = d.history[:n]
	return nil
}

// CommonPrefix is the length of the longest common prefix of two token sequences: of a cache's
// History and the next prompt, the positions whose keys and values that prompt may keep
// (Truncate to it, then compute the rest).
func CommonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Append appends tokens to the context, as Prompt does, and returns the logits after every one
// of them: row i (Vocab values, a fresh slice) predicts the token after tokens[i]. It is the
// verification step of speculative decoding.
func (d *Decoder) Append(tokens []int32) ([][]float32, error) {
	flat, err := d.process(tokens, true)
	if err != nil {
		return nil, err
	}
	v := d.m.Arch.Vocab
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = flat[i*v : (i+1)*v : (i+1)*v]
	}
	return rows, nil
}

// Prompt appends tokens to the context, in batches of DecoderOptions.Batch, and returns the
// logits of the last one (Vocab values). The slice belongs to the decoder and is overwritten by
// its next Prompt or Next: copy it to keep it.
func (d *Decoder) Prompt(tokens []int32) ([]float32, error) { return d.process(tokens, false) }

// Next appends one token and returns the logits that follow it, in the decoder's slice as
// Prompt does.
func (d *Decoder) Next(token int32) ([]float32, error) { return d.process([]int32{token}, false) }

// Logits empties the cache, runs tokens from position 0 and returns the logits after every
// token: row i (Vocab values) predicts token i+1.
func (d *Decoder) Logits(tokens []int32) ([][]float32, error) {
	d.Reset()
	if d.opts.ContextFull == ContextError && len(tokens) > d.maxCtx {
		return nil, fmt.Errorf("decoder: %d tokens do not fit a context of %d: %w", len(tokens), d.maxCtx, ErrContextFull)
	}
	return d.Append(tokens)
}

func (d *Decoder) process(tokens []int32, all bool) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("decoder: no tokens to process")
	}
	v := d.m.Arch.Vocab
	for i, t := range tokens {
		if t < 0 || int(t) >= v {
			return nil, fmt.Errorf("decoder: token %d (at %d) is outside the vocabulary 0..%d of %s", t, i, v-1, d.m.path)
		}
	}
	if d.opts.ContextFull == ContextError && len(d.history)+len(tokens) > d.maxCtx {
		return nil, fmt.Errorf("decoder: %d positions used and %d more tokens do not fit a context of %d: %w", len(d.history), len(tokens), d.maxCtx, ErrContextFull)
	}
	var out []float32
	d.captured = d.captured[:0]
	for len(tokens) > 0 {
		if len(d.history) == d.maxCtx {
			if err := d.shift(); err != nil {
				return nil, err
			}
		}
		n := min(len(tokens), d.opts.Batch, d.maxCtx-len(d.history))
		lg, err := d.eval(tokens[:n], all)
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, lg...)
		} else {
			out = lg
		}
		tokens = tokens[n:]
	}
	return out, nil
}

// shift keeps the most recent half of the context: it empties the cache and processes those
// tokens again from position 0.
func (d *Decoder) shift() error {
	keep := append([]int32(nil), d.history[len(d.history)-d.maxCtx/2:]...)
	d.Reset()
	for len(keep) > 0 {
		n := min(len(keep), d.opts.Batch)
		if _, err := d.eval(keep[:n], false); err != nil {
			return err
		}
		keep = keep[n:]
	}
	return nil
}

// eval runs one graph over tokens at the next positions.
func (d *Decoder) eval(tokens []int32, all bool) ([]float32, error) {
	n, p0 := len(tokens), len(d.history)
	kvLen := min((p0+n+d.bucket-1)/d.bucket*d.bucket, d.maxCtx)
	g, err := d.graphFor(graphKey{n: n, kvLen: kvLen, all: all, hidden: d.hiddenOut})
	if err != nil {
		return nil, err
	}
	if err := g.setInputs(d, tokens, p0); err != nil {
		return nil, err
	}
	if err := d.backend.Compute(g.graph); err != nil {
		return nil, err
	}
	d.history = append(d.history, tokens...)
	if err := d.readCaptured(g); err != nil {
		return nil, err
	}
	d.last = g.logits
	if !all && d.deviceLogits {
		return nil, nil
	}
	var out []float32
	if all {
		if out, err = g.logits.F32(); err != nil {
			return nil, err
		}
	} else {
		if d.out == nil {
			d.out = make([]float32, d.m.Arch.Vocab)
		}
		if err := g.logits.ReadF32Into(d.out); err != nil {
			return nil, err
		}
		out = d.out
	}
	if i := NonFinite(out); i >= 0 {
		return nil, fmt.Errorf("%s: the logits of token %d hold %g: the model's weights or metadata have non-finite values", d.m.path, p0+i/d.m.Arch.Vocab, out[i])
	}
	return out, nil
}

// NonFinite is the index of the first NaN or infinity of vals, or -1. It runs on every step's
// logits, so it tests v-v, which is 0 exactly for finite v: one subtraction and one comparison
// per value, half the time of math.IsNaN and math.IsInf.
func NonFinite(vals []float32) int {
	for i, v := range vals {
		if v-v != 0 {
			return i
		}
	}
	return -1
}

func (g *stepGraph) setInputs(d *Decoder, tokens []int32, p0 int) error {
	a := &d.m.Arch
	n, kvLen := len(tokens), g.key.kvLen
	if err := g.tokens.SetI32(tokens); err != nil {
		return err
	}
	for i := range g.posBuf {
		g.posBuf[i] = int32(p0 + i)
	}
	if err := g.pos.SetI32(g.posBuf); err != nil {
		return err
	}
	return g.set(a, g.posBuf, d.maxCtx, func(f32 []float32, f16 []uint16, window int) {
		if f16 != nil {
			fillMask(f16, p0, n, kvLen, window, 0, f16NegInf)
		} else {
			fillMask(f32, p0, n, kvLen, window, 0, float32(math.Inf(-1)))
		}
	})
}

// visible reports whether the query at position q sees the key at position k: causal, and
// within the window (the last window positions, itself included) when window > 0.
func visible(q, k, window int) bool {
	return k <= q && (window <= 0 || q-k < window)
}

// fillMask writes the [kvLen, n] mask of n queries at positions p0.. : zero where visible,
// negInf elsewhere (cache rows not yet written included). It fills the f32 mask of the unfused
// path and the f16 one of flash attention alike.
func fillMask[E float32 | uint16](mask []E, p0, n, kvLen, window int, zero, negInf E) {
	for t := 0; t < n; t++ {
		row := mask[t*kvLen : (t+1)*kvLen]
		for k := range row {
			if visible(p0+t, k, window) {
				row[k] = zero
			} else {
				row[k] = negInf
			}
		}
	}
}

// f16NegInf is -∞ in IEEE half precision.
const f16NegInf = 0xFC00

// graphFor returns the cached graph of key, building it (and evicting the least recently
// used multi-token graph when there are too many) if needed.
func (d *Decoder) graphFor(key graphKey) (*stepGraph, error) {
	d.clock++
	if g, ok := d.graphs[key]; ok {
		g.lastUse = d.clock
		return g, nil
	}
	if key.n > 1 || key.all {
		var oldest *stepGraph
		count := 0
		for _, g := range d.graphs {
			if g.key.n > 1 || g.key.all {
				count++
				if oldest == nil || g.lastUse < oldest.lastUse {
					oldest = g
				}
			}
		}
		if count >= maxCachedGraphs {
			oldest.close()
			delete(d.graphs, oldest.key)
		}
	}
	g, err := d.build(key)
	if err != nil {
		return nil, err
	}
	g.lastUse = d.clock
	d.graphs[key] = g
	return g, nil
}

// graphSize bounds the nodes of one step's graph.
func (d *Decoder) graphSize() int {
	a := &d.m.Arch
	perLayer := 64
	if a.IsMoE() {
		perLayer += 32 + 2*a.NExpertsUsed
	}
	return 64 + perLayer*a.NLayers
}

// build makes, allocates and returns the graph of key.
func (d *Decoder) build(key graphKey) (g *stepGraph, err error) {
	a := &d.m.Arch
	size := d.graphSize()
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: size + 16, Graphs: 1, GraphSize: size})
	if err != nil {
		return nil, err
	}
	g = &stepGraph{key: key, ctx: ctx}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	n, kvLen := int64(key.n), int64(key.kvLen)
	g.tokens = ctx.NewTensor(ggml.I32, n).SetName("inp_tokens").SetInput()
	g.pos = ctx.NewTensor(ggml.I32, n).SetName("inp_pos").SetInput()
	g.posBuf = make([]int32, n)
	g.declare(ctx, a, &d.kvCache, n, n, kvLen)
	f := transformer.ForwardPass{Ctx: ctx, A: a, W: &d.m.Weights, Pos: g.pos, LastOnly: !key.all, SortTopK: d.sortTopK,
		Linear:     func(w, x *ggml.Tensor) *ggml.Tensor { return d.mm(ctx, w, x) },
		RMSNormMul: func(x, w *ggml.Tensor) *ggml.Tensor { return d.m.rmsNormMul(ctx, x, w, a.NormEps) },
		Rope:       d.m.ropeHook(ctx, g.pos),
		Attend: func(il int, q, k, v *ggml.Tensor) *ggml.Tensor {
			return d.attend(ctx, a, il, q, k, v, g.maskOf(a, il), g.pos, g.vIdx, attnLayout{n: n, kvLen: kvLen, groups: []attnGroup{{T: n, S: 1}}})
		}, Capture: d.captureHook(g)}
	f.LayerNormMulAdd = func(x, w, b *ggml.Tensor) *ggml.Tensor { return d.m.layerNormMulAdd(ctx, x, w, b, a.NormEps) }
	if key.hidden {
		g.logits = f.Hidden(g.tokens).SetOutput() // the final hidden states, no head
	} else {
		g.logits = f.Logits(g.tokens).SetOutput()
	}
	if g.graph, err = ctx.NewGraph(size, false); err != nil {
		return g, err
	}
	if err = g.graph.Expand(g.logits); err != nil {
		return g, fmt.Errorf("building the %s graph: %w", a.Name, err)
	}
	if g.alloc, err = d.backend.NewAllocator(); err != nil {
		return g, err
	}
	if err = g.alloc.Alloc(g.graph); err != nil {
		return g, err
	}
	return g, nil
}

// attnLayout is how a step's n queries meet the cache: in groups, each one batched attention
// over the query rows that follow the previous group's (in the gathered order, and in the
// mask's rows). The Decoder's step is one group, its n tokens; the BatchDecoder's has one per
// sequence length, each sequence over its own region of the cache.
type attnLayout struct {
	n, kvLen int64
	groups   []attnGroup
	// gather (i32 [Σ T·S]) is the step token each query row takes (a padding row takes any);
	// scatter (i32 [n]) the query row of each token. Both nil: the n tokens are the query
	// rows, in order.
	gather, scatter *ggml.Tensor
}

// attnGroup is S sequences of T query rows each (sequence-major), sequence s attending to the
// kvLen cells from cell first+s·stride.
type attnGroup struct{ T, S, first, stride int64 }

// rows is the number of query rows of g.
func (g attnGroup) rows() int64 { return g.T * g.S }

// attend stores the step's keys and values in layer il's cache, at the cache cells rows holds
// (i32 [n]; vIdx, for the transposed values of the unfused path, at each element's cell), and
// attends the n queries q [HeadDimK, H, n] over the cache as l lays them out, under mask
// [kvLen, Σ T·S]. It returns [HeadDimV·H, n]. Both decoders build their attention with it. A
// group of one query per sequence (generation steps) attends through toy's own CPU kernel
// (ggml.AttendOne) where the table resolved it for the cache type, without a soft-cap, or the
// gemma family's, which soft-caps (ggml.AttendOneSoftcap: needAttention), over either layout of
// the values (f16, or q8_0 in flash attention's); every other group through ggml's attention,
// flash or unfused, whose products and softmax are toy's kernels (MulMatPacked, SoftMaxCPU)
// where the table resolved them and they fit (a prompt of one sequence: the Decoder's, a
// server's slot alone in its group; under flash attention, packedFlash).
func (c *kvCache) attend(ctx *ggml.Context, a *transformer.Architecture, il int, q, k, v, mask, rows, vIdx *ggml.Tensor, l attnLayout) *ggml.Tensor {
	hdk, hdv, H, Hkv := int64(a.HeadDimK), int64(a.HeadDimV), int64(a.NHeads), int64(a.NKVHeads)
	n, kvLen := l.n, l.kvLen
	kc, vc := c.kCache[il], c.vCache[il]
	typ := kc.Type()
	es := ggml.TypeSize(typ)
	cellK, _ := ggml.RowSize(typ, hdk) // a cell's keys of one head; a head's cells are contiguous
	cellV, _ := ggml.RowSize(typ, hdv) // the same for flash attention's values
	// Write the new keys and values at their cells, and read the cache through the writes so
	// that the graph orders them.
	kAll := ctx.SetRows(kc, ctx.Permute(ctx.Reshape(k, hdk, Hkv, n), [4]int{0, 2, 1, 3}), rows)
	var vAll *ggml.Tensor
	if c.flash {
		vAll = ctx.SetRows(vc, ctx.Permute(ctx.Reshape(v, hdv, Hkv, n), [4]int{0, 2, 1, 3}), rows)
	} else if ch := hdv * Hkv; !c.elementRows() {
		// Unfused: V is cached transposed ([cells, channels]) so that v·p reads rows; toy's
		// own kernel writes each token's values down its cell's column.
		vAll = ctx.StoreTransposed(vc, ctx.Reshape(v, ch, n), rows)
	} else {
		// Elsewhere each new value element is a one-element row written at
		// channel·cells + cell.
		vAll = ctx.SetRows(ctx.Reshape(vc, 1, int64(c.cells)*ch), ctx.Reshape(v, 1, ch*n), vIdx)
	}
	q = ctx.Reshape(q, hdk*H, n)
	if l.gather != nil {
		q = ctx.GetRows(q, l.gather)
	}
	softcap := a.AttnSoftcap
	qRow, _ := ggml.RowSize(ggml.F32, hdk*H)
	mRow, _ := ggml.RowSize(mask.Type(), kvLen)
	var out *ggml.Tensor // [hdv·H, Σ T·S]
	row := 0
	for _, g := range l.groups {
		T, S := g.T, g.S
		Q, M := q, mask // the group's query rows and their mask rows
		if len(l.groups) > 1 {
			Q = ctx.View(q, []int64{hdk * H, g.rows()}, []int{qRow}, row*qRow)
			M = ctx.View(mask, []int64{kvLen, g.rows()}, []int{mRow}, row*mRow)
		}
		// The group's cells of a cache that keeps each head's cells together, cell bytes a cell.
		cellsOf := func(all *ggml.Tensor, hd int64, cell int) *ggml.Tensor {
			return ctx.View(all, []int64{hd, kvLen, Hkv, S}, []int{cell, c.cells * cell, int(g.stride) * cell}, int(g.first)*cell)
		}
		K := cellsOf(kAll, hdk, cellK)
		var V *ggml.Tensor
		if c.flash {
			V = cellsOf(vAll, hdv, cellV)
		} else {
			V = ctx.View(vAll, []int64{kvLen, hdv, Hkv, S}, []int{c.cells * es, int(hdv) * c.cells * es, int(g.stride) * es}, int(g.first)*es)
		}
		var o *ggml.Tensor // [hdv, H, T, S]
		// The gemma family's own attention, which soft-caps, or the common one, which does not.
		capped := c.kernels.Has(needAttendSoftcap(typ)...)
		if T == 1 && (capped || c.kernels.Has(needAttend(typ)...) && softcap == 0) {
			Vt := V // [kvLen, hdv, Hkv, S]; flash's cache a cell's channels side by side
			if c.flash {
				Vt = ctx.Permute(V, [4]int{1, 0, 2, 3})
			}
			if Q3 := ctx.Reshape(Q, hdk, H, S); Q3 != nil && K != nil && Vt != nil && M != nil {
				if capped && ggml.AttendOneSoftcapFits(Q3, K, Vt, M, a.QueryScale, softcap) == nil {
					o = ctx.AttendOneSoftcap(Q3, K, Vt, M, a.QueryScale, softcap)
				} else if !capped && ggml.AttendOneFits(Q3, K, Vt, M, a.QueryScale) == nil {
					o = ctx.AttendOne(Q3, K, Vt, M, a.QueryScale)
				}
			}
		}
		if o == nil {
			Q = ctx.Permute(ctx.Reshape(Q, hdk, H, T, S), [4]int{0, 2, 1, 3}) // [hdk, T, H, S]
			M = ctx.Reshape(M, kvLen, T, 1, S)
			Vt := V // [kvLen, hdv, Hkv, S]: the values as the product v·p reads them
			flash := c.flash
			if flash && T > 1 { // a prompt may take toy's products (packedFlash)
				Vt = ctx.Permute(V, [4]int{1, 0, 2, 3})
				flash = !c.packedFlash(Q, K, Vt)
			}
			if flash {
				o = ctx.FlashAttnExt(Q, K, V, M, a.QueryScale, 0, softcap)
			} else {
				kq := c.product(ctx, K, Q) // [kvLen, T, H, S]
				scale := a.QueryScale
				if softcap > 0 {
					kq = ctx.Scale(ctx.Tanh(ctx.Scale(kq, scale/softcap)), softcap)
					scale = 1
				}
				kq = transformer.CPUSoftMax(ctx, c.kernels.Has(NeedSoftMax), kq, M, scale)
				o = ctx.Cont(ctx.Permute(c.product(ctx, Vt, kq), [4]int{0, 2, 1, 3})) // from [hdv, T, H, S]
			}
		}
		o = ctx.Reshape(o, hdv*H, g.rows())
		if out == nil {
			out = o
		} else {
			out = ctx.Concat(out, o, 1)
		}
		row += int(g.rows())
	}
	if l.scatter != nil {
		out = ctx.GetRows(out, l.scatter)
	}
	return out
}

// packedFlash reports whether a prompt's attention in the flash layout (keys k, queries q,
// values vt seen transposed) goes through toy's packed products and softmax rather than
// ggml's flash attention: on the CPU, where toy's kernels may run and both products fit them.
// After 1,920 cells, ggml's CPU flash attention took 3× as long over an f16 cache and 4.3× over
// a q8_0 one (docs/PERFORMANCE.md), so -fa keeps its cache layout and types and a prompt
// attends as the unfused path does. A generation step's one query row goes to AttendOne, which
// reads an f16 or q8_0 cache's values a cell at a time (the packed product of one column was
// 20 % slower than ggml's kernel there).
func (c *kvCache) packedFlash(q, k, vt *ggml.Tensor) bool {
	if q == nil || k == nil || vt == nil || !c.kernels.Has(NeedPacked(k.Type())) || ggml.MulMatPackedFits(k, q) != nil {
		return false
	}
	kn, qn := k.Ne(), q.Ne()
	// v·p's b, the probabilities: [kvLen, T, H, S] f32, contiguous rows.
	return ggml.MulMatPackedFitsShape(vt, []int64{kn[1], qn[1], qn[2], qn[3]}) == nil
}

// product is MulMat(a, b) for the unfused attention's products over the cache (the scores and
// the values' weighted sums): by toy's packed GEMM where the table resolved it and the
// operands fit it (one sequence: 3-D), by ggml's otherwise. ggml's sums each output along the
// head's 64 values and then adds its vector's lanes, about as long as the FMAs, and rounds the
// queries and the probabilities to f16; toy's kernel needs no such sums and keeps them f32.
func (c *kvCache) product(ctx *ggml.Context, a, b *ggml.Tensor) *ggml.Tensor {
	if a != nil && b != nil && c.kernels.Has(NeedPacked(a.Type())) && ggml.MulMatPackedFits(a, b) == nil {
		return ctx.MulMatPacked(a, b)
	}
	return ctx.MulMat(a, b)
}

// rmsNormMul is the RMS norm of x times its scale w, the decoders' norm (transformer.ForwardPass.RMSNormMul):
// one operation of toy's (ggml.RMSNormMulCPU) where toy's CPU kernels run and it fits, ggml's
// RMSNorm then Mul elsewhere. ggml's RMS_NORM sums a row's squares one after the other; toy's
// sums them eight at a time, with the same float results (TestRMSNormMulCPU), and saves the
// MUL's node and the barrier before it.
func (m *GGUFModel) rmsNormMul(ctx *ggml.Context, x, w *ggml.Tensor, eps float32) *ggml.Tensor {
	if m.kernels.Has(needRMSNormMul) && x != nil && w != nil && ggml.RMSNormMulCPUFits(x, w, eps) == nil {
		return ctx.RMSNormMulCPU(x, w, eps)
	}
	return ctx.Mul(ctx.RMSNorm(x, eps), w)
}

// ropeHook is the decoders' RoPE of a graph whose tokens are at the i32 positions pos
// (transformer.ForwardPass.Rope): toy's (ggml.RopeApplyCPU) where toy's CPU kernels run and the rotation
// fits, by a table of the positions' cosines and sines made once for the graph's layers that
// rotate alike (ggml.RopeTableCPU); ggml's RopeExt elsewhere, which makes the table again in
// every node, on every thread. The same bits either way (TestRopeCPU).
func (m *GGUFModel) ropeHook(ctx *ggml.Context, pos *ggml.Tensor) func(x *ggml.Tensor, r ggml.Rope) *ggml.Tensor {
	ff := m.Weights.RopeFreqs
	tables := map[ggml.Rope]*ggml.Tensor{} // nil where toy's table does not fit r
	return func(x *ggml.Tensor, r ggml.Rope) *ggml.Tensor {
		t, ok := tables[r]
		if !ok {
			if m.kernels.Has(needRope...) && pos != nil && ggml.RopeTableCPUFits(pos, ff, r) == nil {
				t = ctx.RopeTableCPU(pos, ff, r)
			}
			tables[r] = t
		}
		if t != nil && x != nil && ggml.RopeApplyCPUFits(x, t, r.Mode) == nil {
			return ctx.RopeApplyCPU(x, t, r.Mode)
		}
		return ctx.RopeExt(x, pos, ff, r)
	}
}

// mm is the product W·x plus the low-rank updates of any LoRA adapters of W.
func (d *Decoder) mm(ctx *ggml.Context, w, x *ggml.Tensor) *ggml.Tensor { return d.m.MulMat(ctx, w, x) }

// ownColumns reports whether W·x goes through toy's own kernel (ggml.MulMatCols) rather than
// ggml's: up to ggml.MulMatColsMax columns (a generation step of one or several sequences, a
// verification of proposals, a short prompt or a server step a prompt joins) of an f16, bf16,
// f32, q8_0 or q5_0 weight on the CPU backend of a build where the kernel is vectorized. ggml
// multiplies more than one such column at 2–3× one column's cost, toy's kernel at little more
// than one (docs/PERFORMANCE.md, "toy's own CPU kernels"); it keeps the columns in f32, where
// ggml rounds them to the weight's type (to q8_0 for q8_0 and q5_0 weights, whose integer
// kernels llama.cpp runs).
func (m *GGUFModel) ownColumns(w, x *ggml.Tensor) bool {
	return w != nil && x != nil && m.kernels.Has(needColumns(w.Type())) && x.IsContiguous() && ggml.MulMatColsFits(w, x) == nil
}

// ownPacked reports whether W·x goes through toy's packed GEMM (ggml.MulMatPacked) rather than
// ggml's: more columns than MulMatCols takes (a prompt) of an f16, bf16 or f32 weight on the CPU
// backend of a build where the kernel is vectorized. It keeps the columns in f32, as MulMatCols
// does, where ggml rounds them to the weight's type; block-quantized weights take toy's integer
// products instead (ownQ32, and the k-quant kernel of GGUFModel.MulMat) or ggml's.
func (m *GGUFModel) ownPacked(w, x *ggml.Tensor) bool {
	return w != nil && x != nil && packedWeight(w.Type()) && m.kernels.Has(NeedPacked(w.Type())) && x.IsContiguous() &&
		ggml.MulMatPackedFits(w, x) == nil
}

// ownQ32 reports whether W·x goes through toy's 8-bit integer product (ggml.MulMatQ32) rather
// than ggml's: a q8_0, q4_0, q5_0 or q5_1 weight where MulMatCols does not take the product, on
// the CPU backend of a build with AVX-512 VNNI. It rounds the columns to 8 bits as ggml does
// for these weights (with an f32 scale for each 32 values, where ggml's is f16).
func (m *GGUFModel) ownQ32(w, x *ggml.Tensor) bool {
	return w != nil && x != nil && q32Weight(w.Type()) && m.kernels.Has(needQ32(w.Type())...) && x.IsContiguous() &&
		ggml.MulMatQ32Fits(w, x) == nil
}

// q32Prompt says whether W·x multiplies more than ggml.MulMatColsMax columns (a prompt) by q4_0,
// q5_0 or q5_1 weights that toy's 8-bit integer GEMM (ggml.MulMatQ32) takes: it runs them faster than
// the k-quant kernel's tiles over the repacked copy, which take the fewer columns of a step
// (one core, 2048×2048 q4_0 in the L3 cache, 2026-12-06: by 128 columns 311–329 GMAC/s against
// 265–276; by 16 columns 170–184 against 266–285).
func (m *GGUFModel) q32Prompt(w, x *ggml.Tensor) bool {
	return x.Ne()[1] > ggml.MulMatColsMax && m.promptsReadOriginal(w) && m.ownQ32(w, x)
}

// ownKQuant reports whether W·x goes through toy's k-quant kernel: W has a repacked copy and
// the lookup for its type resolved.
func (m *GGUFModel) ownKQuant(w, x *ggml.Tensor) bool {
	rw := m.kquant[w]
	return rw != nil && x != nil && m.kernels.Has(needKQuant(w.Type())) && x.IsContiguous() && ggml.MulMatKQuantFits(rw, x) == nil &&
		!m.q32Prompt(w, x)
}

// MulMat is the product W·x plus the low-rank updates of any LoRA adapters of W: the linear hook of
// every decoding forward pass (Decoder, BatchDecoder).
func (m *GGUFModel) MulMat(ctx *ggml.Context, w, x *ggml.Tensor) *ggml.Tensor {
	var y *ggml.Tensor
	switch {
	case m.ownKQuant(w, x):
		y = ctx.MulMatKQuant(m.kquant[w], x)
	case m.ownColumns(w, x):
		y = ctx.MulMatCols(w, x)
	case m.ownQ32(w, x):
		y = ctx.MulMatQ32(w, x)
	case m.ownPacked(w, x):
		y = ctx.MulMatPacked(w, x)
	default:
		y = ctx.MulMat(w, x)
	}
	for _, t := range m.lora[w] {
		y = ctx.Add(y, ctx.Scale(ctx.MulMat(t.B, ctx.MulMat(t.A, x)), t.Scale))
	}
	return y
}

// captureHook is the forward pass's capture hook for graph g: it marks the captured layers'
// outputs as graph outputs and keeps them in g.hidden.
func (d *Decoder) captureHook(g *stepGraph) func(il int, x *ggml.Tensor) {
	if len(d.capture) == 0 {
		return nil
	}
	g.hidden = make([]*ggml.Tensor, len(d.capture))
	return func(il int, x *ggml.Tensor) {
		if j := slices.Index(d.capture, il); j >= 0 && x != nil {
			g.hidden[j] = x.SetOutput()
		}
	}
}

// readCaptured appends the rows of g's captured layers after a step.
func (d *Decoder) readCaptured(g *stepGraph) error {
	rows, err := readHidden(g.hidden, g.key.n, d.m.Arch.DModel)
	if err != nil {
		return err
	}
	d.captured = append(d.captured, rows...)
	return nil
}

// readHidden reads the captured layers' outputs hidden ([dm, n] each) as one row per token:
// the layers' values side by side (nil when nothing is captured).
func readHidden(hidden []*ggml.Tensor, n, dm int) ([][]float32, error) {
	if len(hidden) == 0 {
		return nil, nil
	}
	rows := make([][]float32, n)
	flat := make([]float32, n*len(hidden)*dm)
	for t := range rows {
		rows[t] = flat[t*len(hidden)*dm : (t+1)*len(hidden)*dm]
	}
	for j, h := range hidden {
		v, err := h.F32()
		if err != nil {
			return nil, err
		}
		for t := range rows {
			copy(rows[t][j*dm:(j+1)*dm], v[t*dm:(t+1)*dm])
		}
	}
	return rows, nil
}
