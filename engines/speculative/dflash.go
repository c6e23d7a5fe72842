package speculative

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// DFlashArch is general.architecture of a DFlash drafter's GGUF file.
const DFlashArch = "dflash"

// The GGUF keys of a DFlash drafter: its shape and its pairing with the target it drafts for.
const (
	keyDFlashBlock        = "dflash.block_size"
	keyDFlashWindow       = "dflash.window_size"
	keyDFlashMask         = "dflash.mask_token_id"
	keyDFlashTargetLayers = "dflash.target_layer_ids"
	keyDFlashLayers       = "dflash.block_count"
	keyDFlashWidth        = "dflash.embedding_length"
	keyDFlashHeads        = "dflash.attention.head_count"
	keyDFlashFFN          = "dflash.feed_forward_length"
	keyDFlashTargetArch   = "dflash.target.architecture"
	keyDFlashTargetLayerN = "dflash.target.block_count"
	keyDFlashTargetVocab  = "dflash.target.vocab_size"
	keyDFlashTargetName   = "dflash.target.name"
)

// DFlashConfig is a DFlash drafter's pairing with its target: the block it fills, the context
// it reads and its own depth. Its width, heads and feed-forward size are the target's.
type DFlashConfig struct {
	// Gamma is the block size: the anchor (the last committed token) and Gamma−1 positions
	// holding MaskToken, which one forward fills; a verification step checks Gamma−1 proposals.
	Gamma int
	// Window is the number of the target's most recent context positions the drafter reads
	// (0: all of them).
	Window int
	// MaskToken is the token whose embedding (the target's) fills the masked positions.
	MaskToken int
	// TargetLayers are the target layers whose outputs (hidden states) the drafter reads, each
	// below the target's last layer.
	TargetLayers []int
	// Layers is the number of the drafter's transformer blocks.
	Layers int
}

// Check validates the pairing against the target m.
func (c DFlashConfig) Check(m *decoding.GGUFModel) error {
	a := &m.Arch
	switch {
	case c.Gamma < 2:
		return fmt.Errorf("dflash block size %d: want at least 2 (the anchor and a proposal)", c.Gamma)
	case c.Gamma > a.Context:
		return fmt.Errorf("dflash block size %d: want at most %s's context, %d", c.Gamma, m.Path(), a.Context)
	case c.Window < 0:
		return fmt.Errorf("dflash window %d is negative", c.Window)
	case c.MaskToken < 0 || c.MaskToken >= a.Vocab:
		return fmt.Errorf("dflash mask token %d is outside %s's vocabulary 0..%d", c.MaskToken, m.Path(), a.Vocab-1)
	case len(c.TargetLayers) == 0:
		return fmt.Errorf("dflash: no target layers to read")
	case c.Layers < 1:
		return fmt.Errorf("dflash: %d drafter layers", c.Layers)
	case a.IsMoE() || a.FFN != transformer.FFNSwiGLU || a.Norm != transformer.NormRMS || a.Positions != transformer.PosRoPE || a.Head != transformer.HeadLM || a.Input != transformer.InputTokens:
		return fmt.Errorf("dflash drafts for LLaMA-shaped targets (RMSNorm, RoPE, SwiGLU, a language-model head), not %s", a.Name)
	}
	for i, il := range c.TargetLayers {
		if il < 0 || il >= a.NLayers-1 || slices.Contains(c.TargetLayers[:i], il) {
			return fmt.Errorf("dflash target layer %d: want distinct layers of %s's 0..%d (its last layer feeds the logits)", il, m.Path(), a.NLayers-2)
		}
	}
	return nil
}

// DefaultTargetLayers spreads n layer ids evenly over a target of layers blocks, its last one
// excluded.
func DefaultTargetLayers(layers, n int) []int {
	n = min(n, layers-1)
	var ids []int
	for i := range n {
		ids = append(ids, (i+1)*(layers-1)/(n+1))
	}
	return slices.Compact(ids)
}

// DFlash is a DFlash drafter (Chen, Liang and Liu, "DFlash: Block Diffusion for Flash
// Speculative Decoding", 2026) paired with its target: a small transformer that fills a block of
// masked positions in one forward pass, conditioned on the target's hidden states. It shares the
// target's token embeddings and output head (the file holds neither). Its blocks attend, from
// the block's positions, to keys and values made from the context features (the target layers'
// outputs, projected by fc and normalised) and from the block itself, without a causal mask
// inside the block.
type DFlash struct {
	Cfg    DFlashConfig
	target *decoding.GGUFModel
	ctx    *ggml.Context
	buf    *ggml.Buffer
	// arch is the drafter's architecture (drafterArchitecture), w its weights as the tensor
	// table lays them out: fc [F, d] (the concatenated target layers to the drafter's width),
	// hidden_norm (the RMSNorm of the projected context), the blocks and output_norm.
	arch   transformer.Architecture
	w      transformer.Weights
	params []*ggml.Tensor        // in file order
	resid  map[*ggml.Tensor]bool // the projections into the residual stream
}

// features is the width of one context row: the target's width times its read layers.
func (c DFlashConfig) features(a *transformer.Architecture) int {
	return len(c.TargetLayers) * a.DModel
}

// drafterArchitecture is the architecture of a drafter of cfg for target: the dflash family's
// (specs/engines/transformer.go: the target's hidden states in, RMSNorm, SwiGLU) with cfg's
// blocks of the target's width, heads (one key/value head per head, of the target's query head
// size) and feed-forward width. Its input row is the target's read layers side by side; the
// token embeddings, RoPE and head it uses are the target's (pass), and so are the embeddings'
// scale, RoPE's kind and the attention's scale.
func drafterArchitecture(target *transformer.Architecture, cfg DFlashConfig) transformer.Architecture {
	c := config.DefaultLlama()
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads = target.Vocab, target.DModel, target.DFF, target.NHeads, target.NHeads
	c.NLayers, c.Context, c.RMSEps, c.TiedOutput = cfg.Layers, target.Context, target.NormEps, true
	a := transformer.FamilyArchitecture(DFlashArch, c)
	a.HeadDimK, a.HeadDimV, a.Features = target.HeadDimK, target.HeadDimK, cfg.features(target)
	a.EmbedScale, a.QueryScale = target.EmbedScale, target.QueryScale
	// Every drafter layer rotates as the target's first does; the frequency factors are the
	// target's tensor (pass).
	r := target.Rope(0)
	a.RopeMode, a.RopeDims, a.RopeBase, a.RopeScale, a.RopeYaRN, a.RopeOrigCtx = r.Mode, r.Dims, r.FreqBase, r.FreqScale, r.ExtFactor != 0, r.OrigCtx
	a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
	return a
}

// newDFlash declares the drafter's tensors, its architecture's tensor table, on the target's
// backend (zeroed).
func newDFlash(target *decoding.GGUFModel, cfg DFlashConfig) (*DFlash, error) {
	if err := cfg.Check(target); err != nil {
		return nil, err
	}
	df := &DFlash{Cfg: cfg, target: target, arch: drafterArchitecture(&target.Arch, cfg), resid: map[*ggml.Tensor]bool{}}
	specs := df.arch.TensorTable(&df.w)
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: len(specs)})
	if err != nil {
		return nil, err
	}
	df.ctx = ctx
	for _, s := range specs {
		t := ctx.NewTensor(ggml.F32, s.Ne...).SetName(s.Name)
		if t == nil {
			break // the context holds the error
		}
		*s.Slot = t
		df.params = append(df.params, t)
		df.resid[t] = s.Role == transformer.RoleResidualOut
	}
	if err := ctx.Err(); err != nil {
		df.Close()
		return nil, err
	}
	if df.buf, err = target.Backend().Alloc(ctx); err != nil {
		df.Close()
		return nil, err
	}
	df.buf.Clear(0)
	return df, nil
}

// NewDFlash returns a freshly initialised drafter for target: norms at 1, each matrix drawn
// from N(0, 1/fan-in) (the output projections scaled down by the depth), from seed.
func NewDFlash(target *decoding.GGUFModel, cfg DFlashConfig, seed uint64) (*DFlash, error) {
	df, err := newDFlash(target, cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x64666c617368))
	for _, t := range df.params {
		ne := t.Ne()
		v := make([]float32, t.Len())
		if len(t.Shape()) == 1 {
			for i := range v {
				v[i] = 1
			}
		} else {
			std := 1 / math.Sqrt(float64(ne[0]))
			if df.resid[t] {
				std /= math.Sqrt(float64(2 * cfg.Layers))
			}
			for i := range v {
				v[i] = float32(rng.NormFloat64() * std)
			}
		}
		if err := t.SetF32(v); err != nil {
			df.Close()
			return nil, err
		}
	}
	return df, nil
}

// OpenDFlash loads the drafter at path for target, checking the pairing its keys record
// against the target: architecture, depth, vocabulary and width.
func OpenDFlash(path string, target *decoding.GGUFModel) (*DFlash, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if arch, err := f.String("general.architecture"); err != nil || arch != DFlashArch {
		return nil, fmt.Errorf("dflash %s: general.architecture is %q, want %q", path, arch, DFlashArch)
	}
	u := func(key string) (int, error) {
		v, err := f.Uint32(key)
		if err != nil {
			return 0, fmt.Errorf("dflash %s: %w", path, err)
		}
		return int(v), nil
	}
	var cfg DFlashConfig
	var width, heads, ffn, tLayers, tVocab int
	for _, k := range []struct {
		key string
		dst *int
	}{{keyDFlashBlock, &cfg.Gamma}, {keyDFlashWindow, &cfg.Window}, {keyDFlashMask, &cfg.MaskToken}, {keyDFlashLayers, &cfg.Layers},
		{keyDFlashWidth, &width}, {keyDFlashHeads, &heads}, {keyDFlashFFN, &ffn}, {keyDFlashTargetLayerN, &tLayers}, {keyDFlashTargetVocab, &tVocab}} {
		if *k.dst, err = u(k.key); err != nil {
			return nil, err
		}
	}
	ids, err := f.Value(keyDFlashTargetLayers)
	if err != nil {
		return nil, fmt.Errorf("dflash %s: %w", path, err)
	}
	switch v := ids.(type) {
	case []int32:
		for _, id := range v {
			cfg.TargetLayers = append(cfg.TargetLayers, int(id))
		}
	case []uint32:
		for _, id := range v {
			cfg.TargetLayers = append(cfg.TargetLayers, int(id))
		}
	default:
		return nil, fmt.Errorf("dflash %s: %s is a %T, want an integer array", path, keyDFlashTargetLayers, ids)
	}
	a := &target.Arch
	tArch, _ := f.String(keyDFlashTargetArch)
	if tArch != a.Name || tLayers != a.NLayers || tVocab != a.Vocab || width != a.DModel || heads != a.NHeads || ffn != a.DFF {
		return nil, fmt.Errorf("dflash %s drafts for a %s target of %d layers, vocabulary %d, width %d, %d heads, feed-forward %d; %s is a %s of %d, %d, %d, %d, %d",
			path, tArch, tLayers, tVocab, width, heads, ffn, target.Path(), a.Name, a.NLayers, a.Vocab, a.DModel, a.NHeads, a.DFF)
	}
	// Every drafter block is nine tensors, besides fc, hidden_norm and output_norm: a block
	// count the file cannot hold is refused before the blocks are allocated.
	if need := 3 + 9*int64(cfg.Layers); need > int64(len(f.Tensors())) {
		return nil, fmt.Errorf("dflash %s: %s %d asks for %d tensors, but the file holds %d", path, keyDFlashLayers, cfg.Layers, need, len(f.Tensors()))
	}
	df, err := newDFlash(target, cfg)
	if err != nil {
		return nil, fmt.Errorf("dflash %s: %w", path, err)
	}
	if err := transformer.ReadTensors(f, df.params, ""); err != nil {
		df.Close()
		return nil, err
	}
	return df, nil
}

// Save writes the drafter and its pairing keys to path (written to a temporary name, then
// renamed).
func (df *DFlash) Save(path string) error {
	w, err := ggml.NewGGUFWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	a := &df.target.Arch
	ids := make([]int32, len(df.Cfg.TargetLayers))
	for i, il := range df.Cfg.TargetLayers {
		ids[i] = int32(il)
	}
	name, _ := df.target.Meta["general.name"].(string)
	kvs := []transformer.KV{
		{Key: "general.architecture", Value: DFlashArch},
		{Key: "general.name", Value: "dflash drafter for " + name},
		{Key: "general.file_type", Value: uint32(0)},
		{Key: keyDFlashBlock, Value: uint32(df.Cfg.Gamma)},
		{Key: keyDFlashWindow, Value: uint32(df.Cfg.Window)},
		{Key: keyDFlashMask, Value: uint32(df.Cfg.MaskToken)},
		{Key: keyDFlashTargetLayers, Value: ids},
		{Key: keyDFlashLayers, Value: uint32(df.Cfg.Layers)},
		{Key: keyDFlashWidth, Value: uint32(a.DModel)},
		{Key: keyDFlashHeads, Value: uint32(a.NHeads)},
		{Key: keyDFlashFFN, Value: uint32(a.DFF)},
		{Key: keyDFlashTargetArch, Value: a.Name},
		{Key: keyDFlashTargetLayerN, Value: uint32(a.NLayers)},
		{Key: keyDFlashTargetVocab, Value: uint32(a.Vocab)},
		{Key: keyDFlashTargetName, Value: name},
	}
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("dflash %s: %w", path, err)
		}
	}
	for _, t := range df.params {
		if err := w.AddTensor(t); err != nil {
			return fmt.Errorf("dflash %s: %w", path, err)
		}
	}
	return w.WriteFile(path)
}

// Params is the number of the drafter's own parameters (the target's embeddings and head
// excluded).
func (df *DFlash) Params() int64 {
	var n int64
	for _, t := range df.params {
		n += t.Len()
	}
	return n
}

// Close frees the drafter's weights (not the target).
func (df *DFlash) Close() error {
	df.buf.Close()
	if df.ctx != nil {
		df.ctx.Close()
		df.ctx = nil
	}
	return nil
}

// dflashInputs are the inputs of a drafter graph over B blocks, each reading W context rows
// (the drafter cache's graphs declare those they use: dflashCache).
type dflashInputs struct {
	B, W, G int
	feat    *ggml.Tensor // f32 [F, W·B]: the context rows of each block
	tokens  *ggml.Tensor // i32 [G·B]: each block's anchor, then mask tokens
	posQ    *ggml.Tensor // i32 [G·B]: the block positions
	posK    *ggml.Tensor // i32 [W·B]: the context rows' positions
	mask    *ggml.Tensor // f32 [W+G, G, 1, B]: 0 where a context row holds a token, -∞ elsewhere
	zeros   *ggml.Tensor // f32 [HeadDimK·NHeads, W+G, B]: zeros, which the keys and values are accumulated into
	cells   *ggml.Tensor // i32: the drafter cache's cells written or read (dflashCache)
}

// declare makes the inputs in ctx.
func (in *dflashInputs) declare(ctx *ggml.Context, df *DFlash) {
	a := &df.target.Arch
	b, w, g := int64(in.B), int64(in.W), int64(in.G)
	in.feat = ctx.NewTensor(ggml.F32, int64(df.Cfg.features(a)), w*b).SetName("dflash_feat").SetInput()
	in.tokens = ctx.NewTensor(ggml.I32, g*b).SetName("dflash_tokens").SetInput()
	in.posQ = ctx.NewTensor(ggml.I32, g*b).SetName("dflash_pos_q").SetInput()
	in.posK = ctx.NewTensor(ggml.I32, w*b).SetName("dflash_pos_k").SetInput()
	in.mask = ctx.NewTensor(ggml.F32, w+g, g, 1, b).SetName("dflash_mask").SetInput()
	in.zeros = ctx.NewTensor(ggml.F32, int64(a.NHeads*a.HeadDimK), w+g, b).SetName("dflash_zeros").SetInput()
}

// dflashBlock is one block to fill: its anchor at position Pos, and the context rows of the
// positions before it (the last of them is position Pos−1; fewer than W at the start).
type dflashBlock struct {
	Anchor int32
	Pos    int
	Ctx    [][]float32
}

// set uploads the inputs of blocks (len B).
func (in *dflashInputs) set(df *DFlash, blocks []dflashBlock) error {
	F := df.Cfg.features(&df.target.Arch)
	W, G := in.W, in.G
	feat := make([]float32, F*W*in.B)
	tokens := make([]int32, G*in.B)
	posQ := make([]int32, G*in.B)
	posK := make([]int32, W*in.B)
	mask := make([]float32, (W+G)*G*in.B)
	inf := float32(math.Inf(-1))
	for b, blk := range blocks {
		rows := blk.Ctx[max(0, len(blk.Ctx)-W):]
		skip := W - len(rows) // the first slots hold no token
		for i, r := range rows {
			if len(r) != F {
				return fmt.Errorf("dflash: a context row of %d values, want %d", len(r), F)
			}
			copy(feat[(b*W+skip+i)*F:], r)
		}
		for k := range G {
			tokens[b*G+k] = int32(df.Cfg.MaskToken)
			posQ[b*G+k] = int32(blk.Pos + k)
		}
		tokens[b*G] = blk.Anchor
		for j := range W {
			posK[b*W+j] = int32(max(blk.Pos-W+j, 0)) // context slot j
		}
		for j := range skip {
			for q := range G {
				mask[((b*G)+q)*(W+G)+j] = inf
			}
		}
	}
	for _, s := range []error{in.feat.SetF32(feat), in.tokens.SetI32(tokens), in.posQ.SetI32(posQ), in.posK.SetI32(posK),
		in.mask.SetF32(mask), in.zeros.SetF32(make([]float32, in.zeros.Len()))} {
		if s != nil {
			return s
		}
	}
	return nil
}

// forward builds the logits [Vocab, G·B] of the blocks' positions, each weight product made
// with linear (the target's head, when f16 or bf16, cast to f32 for a backward): the core's
// forward pass (pass), whose blocks attend to each block's context rows (their keys and values
// made from the projected features) and then its own positions.
func (df *DFlash) forward(ctx *ggml.Context, in *dflashInputs, linear func(w, x *ggml.Tensor) *ggml.Tensor) *ggml.Tensor {
	f := df.pass(ctx, in.posQ, linear)
	B, W, G := int64(in.B), int64(in.W), int64(in.G)
	c := f.Features(in.feat) // [d, W·B]
	f.Attend = func(il int, q, k, v *ggml.Tensor) *ggml.Tensor {
		kc, vc := f.KeysValues(il, c, in.posK)
		return f.AttendBlocks(q, spliced(ctx, in.zeros, kc, k, W, G, B), spliced(ctx, in.zeros, vc, v, W, G, B), in.mask, G, W+G, B)
	}
	return f.Logits(in.tokens)
}

// spliced places each block's context rows' keys or values rows [w, W·B] before its own
// positions' own [w, G·B]: [w, (W+G)·B], block by block, accumulated into zeros [w, W+G, B] (a
// concatenation with a backward).
func spliced(ctx *ggml.Context, zeros, rows, own *ggml.Tensor, W, G, B int64) *ggml.Tensor {
	nb, w := zeros.Nb(), zeros.Ne()[0]
	x := ctx.Acc(zeros, ctx.Reshape(rows, w, W, B), nb[1], nb[2], nb[3], 0)
	x = ctx.Acc(x, ctx.Reshape(own, w, G, B), nb[1], nb[2], nb[3], int(W)*nb[1])
	return ctx.Reshape(x, w, (W+G)*B)
}

// pass is the core's forward pass over the drafter's weights and those of the target it shares
// (token embeddings, output head, RoPE factors), at the i32 positions pos, each weight product
// made with linear; the caller sets its attention.
func (df *DFlash) pass(ctx *ggml.Context, pos *ggml.Tensor, linear func(w, x *ggml.Tensor) *ggml.Tensor) *transformer.ForwardPass {
	w, t := df.w, &df.target.Weights
	w.TokEmbd, w.EmbLookup, w.Output, w.RopeFreqs = t.TokEmbd, t.EmbLookup, t.Output, t.RopeFreqs
	return &transformer.ForwardPass{Ctx: ctx, A: &df.arch, W: &w, Pos: pos, Linear: linear}
}

// dflashGraph is a built and allocated drafter graph for one shape.
type dflashGraph struct {
	in     dflashInputs
	ctx    *ggml.Context
	graph  *ggml.Graph
	alloc  *ggml.Allocator
	logits *ggml.Tensor
}

func (g *dflashGraph) close() {
	g.alloc.Close()
	if g.ctx != nil {
		g.ctx.Close()
	}
}

func (df *DFlash) graphSize() int { return 256 + 64*df.Cfg.Layers }

// newGraph builds and allocates the graph that declare declares in ctx, computing the tensors
// it returns.
func (df *DFlash) newGraph(declare func(ctx *ggml.Context, g *dflashGraph) []*ggml.Tensor) (*dflashGraph, error) {
	size := df.graphSize()
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size})
	if err != nil {
		return nil, err
	}
	g := &dflashGraph{ctx: ctx}
	outs := declare(ctx, g)
	g.graph, err = ctx.NewGraph(size, false)
	for _, out := range outs {
		if err == nil {
			err = g.graph.Expand(out)
		}
	}
	if err == nil {
		g.alloc, err = df.target.Backend().NewAllocator()
	}
	if err == nil {
		err = g.alloc.Alloc(g.graph)
	}
	if err != nil {
		g.close()
		return nil, fmt.Errorf("building the dflash graph: %w", err)
	}
	return g, nil
}

// buildInference builds the uncached forward graph of B blocks, each reading W context rows:
// the graph training differentiates (with the target's products, model.mm, in place of its
// differentiable ones), the drafter cache's reference and EvalDFlash's forward.
func (df *DFlash) buildInference(B, W int) (*dflashGraph, error) {
	return df.newGraph(func(ctx *ggml.Context, g *dflashGraph) []*ggml.Tensor {
		g.in = dflashInputs{B: B, W: W, G: df.Cfg.Gamma}
		g.in.declare(ctx, df)
		g.logits = df.forward(ctx, &g.in, df.linear(ctx)).SetOutput()
		return []*ggml.Tensor{g.logits}
	})
}

// linear is the weight product of the drafter's inference graphs in ctx: the target's
// (GGUFModel.mm), which takes toy's own CPU kernels where they apply, so that a block of a
// few positions costs its weights' reading rather than ggml's f32 product of a few columns.
func (df *DFlash) linear(ctx *ggml.Context) func(w, x *ggml.Tensor) *ggml.Tensor {
	return func(w, x *ggml.Tensor) *ggml.Tensor { return df.target.MulMat(ctx, w, x) }
}
