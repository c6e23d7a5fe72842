package transformer

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// The kinds of the family's choices are the Transformer spec's enums (specs/engines), so an
// Architecture says them in the spec's words.
type (
	// FFNKind is the shape and activation of the feed-forward block.
	FFNKind = config.TransformerFFN
	// NormKind is the normalisation of the residual stream.
	NormKind = config.TransformerNorm
	// PosKind is how token positions enter the model.
	PosKind = config.TransformerPositions
	// InputKind is what the model reads.
	InputKind = config.TransformerInput
	// HeadKind is what the output head computes.
	HeadKind = config.TransformerHead
)

const (
	// FFNSwiGLU is down(silu(gate·x) ⊙ up·x): llama, qwen2, qwen3 and their MoE experts.
	FFNSwiGLU = config.TransformerFFNSwiglu
	// FFNGeGLU is down(gelu_tanh(gate·x) ⊙ up·x): gemma2, gemma3.
	FFNGeGLU = config.TransformerFFNGeglu
	// FFNGELU is down(gelu_tanh(up·x)), no gate: gpt2.
	FFNGELU = config.TransformerFFNGelu

	// NormRMS is RMSNorm with a learned scale: the llama family.
	NormRMS = config.TransformerNormRms
	// NormLayer is LayerNorm with a learned scale and bias: gpt2.
	NormLayer = config.TransformerNormLayer

	// PosRoPE rotates queries and keys by their positions.
	PosRoPE = config.TransformerPositionsRope
	// PosLearned adds a learned embedding of each absolute position (position_embd, one row
	// per position of the trained context) to the token embeddings: gpt2.
	PosLearned = config.TransformerPositionsLearned

	// InputTokens gathers token embeddings (token_embd) for i32 token ids.
	InputTokens = config.TransformerInputTokens
	// InputPatches projects flattened image patches (patch_embd, a matmul with a bias) and
	// prepends a learned class token (cls_token): vit.
	InputPatches = config.TransformerInputPatches
	// InputFeatures projects a target model's hidden states (fc, then hidden_norm's RMSNorm)
	// beside the target's token embeddings: a DFlash drafter.
	InputFeatures = config.TransformerInputFeatures

	// HeadLM gives next-token logits [Vocab] at every position.
	HeadLM = config.TransformerHeadLm
	// HeadClassToken gives class logits [Vocab = classes] from the class token (position 0 of
	// each sequence) only, through output.weight and output.bias: vit.
	HeadClassToken = config.TransformerHeadClassToken
)

// QKNormKind says how queries and keys are normalised before RoPE.
type QKNormKind int

const (
	// QKNormNone leaves them as projected.
	QKNormNone QKNormKind = iota
	// QKNormHeadRMS applies an RMSNorm over each head's vector with a learned [head size]
	// weight (attn_q_norm / attn_k_norm): qwen3, qwen3moe, gemma3.
	QKNormHeadRMS
)

// Architecture is the inference-time shape and behaviour of a GGUF checkpoint, detected from
// its metadata (general.architecture and the "<arch>.*" keys as llama.cpp names them) and
// from which tensors it has. Every flag here is what the decoder builds its graph from.
type Architecture struct {
	// Name is general.architecture: llama, qwen2, qwen3, gemma2, gemma3, qwen2moe, qwen3moe.
	Name string

	Vocab   int // rows of token_embd.weight
	DModel  int // <arch>.embedding_length
	NLayers int // <arch>.block_count
	DFF     int // <arch>.feed_forward_length (dense FFN; 0 in a pure-MoE model)
	Context int // <arch>.context_length: the trained context, the decoder's default

	NHeads   int // <arch>.attention.head_count
	NKVHeads int // <arch>.attention.head_count_kv (default NHeads)
	// HeadDimK and HeadDimV are the per-head sizes of queries/keys and values:
	// <arch>.attention.key_length / value_length, default DModel/NHeads. qwen3 and gemma
	// have heads whose size is not DModel/NHeads.
	HeadDimK, HeadDimV int

	// Norm is the normalisation: RMSNorm (<arch>.attention.layer_norm_rms_epsilon) or
	// LayerNorm with biases (<arch>.attention.layer_norm_epsilon); NormEps is its epsilon.
	Norm    NormKind
	NormEps float32
	// Positions says how positions enter: RoPE (the fields below) or learned embeddings.
	Positions PosKind

	// RoPE: Mode is RopeNormal (adjacent pairs; llama, whose converter permutes Q and K for it)
	// or RopeNeox (halves; qwen*, gemma*). RopeDims (<arch>.rope.dimension_count, default
	// HeadDimK) leading elements of each head rotate. RopeBase is <arch>.rope.freq_base;
	// RopeScale multiplies positions (1/<arch>.rope.scaling.factor with linear or YaRN
	// scaling).
	RopeMode  ggml.RopeMode
	RopeDims  int
	RopeBase  float32
	RopeScale float32
	// RopeYaRN: <arch>.rope.scaling.type is yarn, whose ramp between interpolated and
	// extrapolated frequencies spans the dimensions that rotate fewer than 32 and more than 1
	// times over RopeOrigCtx (<arch>.rope.scaling.original_context_length; 0: Context).
	RopeYaRN    bool
	RopeOrigCtx int
	// RopeBaseLocal and RopeScaleLocal apply to sliding-window layers when they differ from
	// global ones (gemma3: base 10000, no scaling); otherwise they equal RopeBase/RopeScale.
	RopeBaseLocal, RopeScaleLocal float32
	// RopeFreqs is true when the file has rope_freqs.weight (llama 3 frequency factors).
	RopeFreqs bool

	// TiedOutput: the file has no output.weight; the logits use token_embd.weight.
	TiedOutput bool
	// QKVBias: attn_q/k/v (or attn_qkv) have biases (qwen2, qwen2moe, gpt2; detected from
	// attn_q.bias). OutBias: attn_output has one; FFNBias: ffn_up and ffn_down have them (gpt2).
	QKVBias, OutBias, FFNBias bool
	// FusedQKV: one attn_qkv projection makes queries, keys and values (gpt2).
	FusedQKV bool
	// QKNorm: per-head RMS norms of queries and keys before RoPE (detected from attn_q_norm).
	QKNorm QKNormKind
	// PostNorms: RMSNorms of the attention output (post_attention_norm) and the FFN output
	// (post_ffw_norm) before they join the residual stream (gemma2, gemma3).
	PostNorms bool
	// EmbedScale multiplies the token embeddings (√DModel for gemma; 1 otherwise).
	EmbedScale float32
	// FFN is the activation of the feed-forward blocks.
	FFN FFNKind

	// QueryScale multiplies q·k before the softmax: 1/√HeadDimK (gemma2/3 27B: 1/√(d/H), as
	// llama.cpp), or 1/√<arch>.attention.query_pre_attn_scalar when the file has that key.
	QueryScale float32
	// AttnSoftcap (<arch>.attn_logit_softcapping; gemma2) caps attention logits to
	// cap·tanh(s/cap) after scaling; FinalSoftcap (<arch>.final_logit_softcapping) does the
	// same to the output logits. 0: none.
	AttnSoftcap, FinalSoftcap float32

	// SlidingWindow (<arch>.attention.sliding_window) is the number of most recent positions a
	// query of a sliding-window layer sees (itself included); 0: every layer is global.
	// SlidingPattern says which layers slide: layer i does when SlidingPattern is 0 (every
	// layer: mistral-style) or i%SlidingPattern < SlidingPattern-1 (gemma2: 2, alternate
	// layers starting with layer 0; gemma3: 6, five of every six).
	SlidingWindow  int
	SlidingPattern int

	// Mixture of experts: NExperts (<arch>.expert_count) experts of width ExpertFFN
	// (<arch>.expert_feed_forward_length), NExpertsUsed (<arch>.expert_used_count) per
	// token, chosen by the top-k of the softmax of the router logits (ffn_gate_inp);
	// NormTopK renormalises the k chosen weights to sum to 1 (qwen3moe, mixtral-style llama;
	// not qwen2moe). SharedExpertFFN is the width of an always-on shared expert scaled by
	// sigmoid(ffn_gate_inp_shexp·x) (qwen2moe), 0 if none.
	NExperts, NExpertsUsed, ExpertFFN int
	NormTopK                          bool
	SharedExpertFFN                   int

	// Input is what the model reads (tokens, or image patches with a class token) and Head
	// what it outputs (next-token logits, or class logits from the class token). An image
	// model's Vocab is its number of classes and Context its sequence: Patches + 1.
	Input InputKind
	Head  HeadKind
	// ImageSize, PatchSize and Channels are an image model's input (InputPatches): square
	// images of ImageSize² pixels, cut into (ImageSize/PatchSize)² patches.
	ImageSize, PatchSize, Channels int
	// Features is the width of a drafter's input row (InputFeatures): the target's width times
	// the layers it reads.
	Features int
}

// Patches is the number of patches per image of an image model.
func (a *Architecture) Patches() int {
	if a.PatchSize <= 0 {
		return 0
	}
	n := a.ImageSize / a.PatchSize
	return n * n
}

// PatchDim is the width of one flattened patch: PatchSize²·Channels.
func (a *Architecture) PatchDim() int { return a.PatchSize * a.PatchSize * a.Channels }

// IsSliding reports whether layer il uses the sliding window.
func (a *Architecture) IsSliding(il int) bool {
	if a.SlidingWindow <= 0 {
		return false
	}
	if a.SlidingPattern <= 1 {
		return true
	}
	return il%a.SlidingPattern < a.SlidingPattern-1
}

// IsMoE reports whether the feed-forward blocks are mixtures of experts.
func (a *Architecture) IsMoE() bool { return a.NExperts > 0 }

// Rope is the RoPE of layer il: the one RoPE builder of training and decoding.
func (a *Architecture) Rope(il int) ggml.Rope {
	r := ggml.Rope{Dims: a.RopeDims, Mode: a.RopeMode, FreqBase: a.RopeBase, FreqScale: a.RopeScale,
		AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: a.RopeOrigCtx}
	if a.RopeYaRN {
		r.ExtFactor = 1
	}
	if r.OrigCtx == 0 {
		r.OrigCtx = a.Context
	}
	if a.IsSliding(il) && (a.RopeBaseLocal != a.RopeBase || a.RopeScaleLocal != a.RopeScale) {
		// Local layers with their own RoPE (gemma3) do not scale.
		r.FreqBase, r.FreqScale, r.ExtFactor = a.RopeBaseLocal, a.RopeScaleLocal, 0
	}
	return r
}

// Family is the description of the family whose checkpoints' general.architecture is name:
// its preset of the Transformer spec (specs/engines), and whether there is one.
func Family(name string) (config.Transformer, bool) {
	f, err := config.TransformerPreset(name)
	return f, err == nil
}

// decodes reports whether the decoder runs models of family f: language models, which read
// tokens and predict the next.
func decodes(f config.Transformer) bool { return f.Input == InputTokens && f.Head == HeadLM }

// SupportedArchitectures lists the general.architecture values the decoder runs: the families
// the Transformer spec declares whose models read tokens and predict the next.
func SupportedArchitectures() []string {
	var names []string
	for _, n := range config.TransformerPresetNames() {
		if f, _ := Family(n); decodes(f) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// readArchitecture reads the architecture of a file of family tr, named name, from its
// metadata and tensors, and returns the configuration of the Llama spec that its keys gave
// (the training options under toy.<arch>.* among them), its tied output and QKV biases as the
// tensors say. An image model's (InputPatches) image and classes are Family's keys. A non-nil
// bounds checks the configuration as the keys gave it, before anything else is.
func readArchitecture(f *ggml.GGUF, values map[string]any, name string, tr config.Transformer, bounds func(Config) error) (Architecture, Config, error) {
	// The keys the training configuration shares with the family are read through its spec
	// (generated/config); those of the other architectures' parts follow by hand.
	c := config.DefaultLlama()
	_, hasKV := values[name+".attention.head_count_kv"]
	_, hasFF := values[name+".feed_forward_length"]
	_, hasVocab := values[name+".vocab_size"]
	if err := c.FromGGUF(name, values); err != nil {
		return Architecture{}, c, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	if !hasKV {
		c.NKVHeads = c.NHeads
	}
	if !hasFF {
		if !tr.Experts {
			return Architecture{}, c, fmt.Errorf("gguf %s: metadata key %q is missing", f.Path(), name+".feed_forward_length")
		}
		c.DFF = 0
	}
	if bounds != nil {
		if err := bounds(c); err != nil {
			return Architecture{}, c, err
		}
	}
	switch c.RopeScaling {
	case "", config.LlamaRopeScalingNone:
		c.RopeScaling = config.LlamaRopeScalingNone
	case config.LlamaRopeScalingLinear, config.LlamaRopeScalingYarn:
		if x := c.RopeScaleFactor; !(x > 0) || math.IsInf(float64(x), 0) {
			return Architecture{}, c, fmt.Errorf("gguf %s: rope.scaling.factor %g: want a positive finite factor", f.Path(), x)
		}
	default:
		return Architecture{}, c, fmt.Errorf("gguf %s: rope scaling %q is not supported (none, linear or yarn)", f.Path(), c.RopeScaling)
	}
	a := archFromConfig(name, tr, c)
	for _, v := range []int{a.DModel, a.NLayers, a.NHeads, a.NKVHeads, a.Context, a.DFF, c.RopeOrigContext} {
		if v > math.MaxInt32 {
			return a, c, fmt.Errorf("gguf %s: a shape of %d is out of range", f.Path(), v)
		}
	}
	if a.DModel <= 0 || a.NLayers <= 0 || a.NHeads <= 0 || a.NKVHeads <= 0 || a.Context <= 0 || a.DFF < 0 || c.RopeOrigContext < 0 {
		return a, c, fmt.Errorf("gguf %s: embedding_length %d, block_count %d, head_count %d, head_count_kv %d and context_length %d must be positive", f.Path(), a.DModel, a.NLayers, a.NHeads, a.NKVHeads, a.Context)
	}
	if a.NHeads%a.NKVHeads != 0 {
		return a, c, fmt.Errorf("gguf %s: head_count %d is not a multiple of head_count_kv %d", f.Path(), a.NHeads, a.NKVHeads)
	}
	x := config.DefaultFamily()
	if err := x.FromGGUF(name, values); err != nil {
		return a, c, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	if err := x.Validate(); err != nil {
		return a, c, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	missing := func(key string) error {
		return fmt.Errorf("gguf %s: metadata key %q is missing", f.Path(), name+"."+key)
	}
	switch {
	case x.KeyLength == 0 && a.HeadDimK == 0:
		return a, c, missing("attention.key_length") // embedding_length / head_count does not divide
	case tr.Experts && x.Experts == 0:
		return a, c, missing("expert_count")
	case x.Experts > 0 && x.ExpertsUsed == 0:
		return a, c, missing("expert_used_count")
	case x.Experts > 0 && x.ExpertFFN == 0 && a.DFF == 0:
		return a, c, missing("expert_feed_forward_length")
	case a.Norm == NormLayer && x.LayerNormEps == 0:
		if _, ok := values[name+".attention.layer_norm_epsilon"]; !ok {
			return a, c, missing("attention.layer_norm_epsilon")
		}
	}
	if a.Norm == NormLayer {
		a.NormEps = x.LayerNormEps
	}
	a.HeadDimK = cmp.Or(x.KeyLength, a.HeadDimK)
	a.HeadDimV = cmp.Or(x.ValueLength, a.HeadDimK)
	a.RopeDims = cmp.Or(x.RopeDims, a.HeadDimK)
	a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
	if tr.LocalRopeBase > 0 {
		a.RopeBaseLocal, a.RopeScaleLocal = tr.LocalRopeBase, 1
	}
	if tr.EmbedScale {
		a.EmbedScale = float32(math.Sqrt(float64(a.DModel)))
	}
	a.QueryScale = float32(1 / math.Sqrt(float64(a.HeadDimK)))
	if (name == "gemma2" && a.NLayers == 46) || (name == "gemma3" && a.NLayers == 62) {
		// The 27B models scale queries by 1/√(d/H), as llama.cpp does for them.
		a.QueryScale = float32(1 / math.Sqrt(float64(a.DModel/a.NHeads)))
	}
	if s := x.QueryPreAttnScalar; s > 0 {
		a.QueryScale = float32(1 / math.Sqrt(float64(s)))
	}
	a.AttnSoftcap, a.FinalSoftcap = x.AttnSoftcap, x.FinalSoftcap
	if tr.SlidingPattern >= 0 {
		a.SlidingWindow, a.SlidingPattern = x.SlidingWindow, tr.SlidingPattern
	}
	if a.NExperts = x.Experts; a.NExperts > 0 {
		a.NExpertsUsed, a.ExpertFFN, a.NormTopK = x.ExpertsUsed, cmp.Or(x.ExpertFFN, a.DFF), tr.NormTopK
		if tr.SharedExpert {
			a.SharedExpertFFN = x.SharedExpertFFN
		}
	}

	// Tensors decide the optional parts.
	if a.Input == InputPatches {
		// An image model's classes are its vocabulary, its class token and patches its context.
		var missing []error
		for _, k := range []struct {
			key string
			v   int
		}{{"image_size", x.ImageSize}, {"patch_size", x.PatchSize}, {"channels", x.Channels}, {"class_count", x.ClassCount}} {
			if k.v == 0 {
				missing = append(missing, fmt.Errorf("metadata key %q is missing", name+"."+k.key))
			}
		}
		if len(missing) > 0 {
			return a, c, fmt.Errorf("gguf %s: %w", f.Path(), errors.Join(missing...))
		}
		a.ImageSize, a.PatchSize, a.Channels, a.Vocab = x.ImageSize, x.PatchSize, x.Channels, x.ClassCount
		if a.PatchSize <= 0 || a.ImageSize < a.PatchSize || a.Channels <= 0 || a.ImageSize > math.MaxInt16 || a.PatchSize > math.MaxInt16 || a.Channels > math.MaxInt16 {
			return a, c, fmt.Errorf("gguf %s: images of %d pixels, patches of %d and %d channels: want positive sizes, the image at least a patch", f.Path(), a.ImageSize, a.PatchSize, a.Channels)
		}
		a.Context = a.Patches() + 1
	} else {
		emb, ok := f.Tensor("token_embd.weight")
		if !ok {
			return a, c, fmt.Errorf("gguf %s: tensor %q is missing", f.Path(), "token_embd.weight")
		}
		if rows := int(emb.Ne[1]); hasVocab && a.Vocab != rows {
			return a, c, fmt.Errorf("gguf %s: vocab_size %d, but token_embd.weight has %d rows", f.Path(), a.Vocab, rows)
		} else {
			a.Vocab = rows
		}
	}
	_, hasOut := f.Tensor("output.weight")
	a.TiedOutput = !hasOut
	_, a.QKVBias = f.Tensor("blk.0.attn_q.bias")
	if _, ok := f.Tensor("blk.0.attn_q_norm.weight"); ok || tr.QKNorm {
		a.QKNorm = QKNormHeadRMS
	}
	if _, ok := f.Tensor("blk.0.post_attention_norm.weight"); ok {
		a.PostNorms = true
	}
	_, a.RopeFreqs = f.Tensor("rope_freqs.weight")
	if tr.QKVBias {
		a.QKVBias = true // then required
	}
	if !tr.Experts && a.NExperts > 0 {
		// llama with experts (mixtral-style): softmax, top-k, renormalised.
		if _, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); !ok {
			a.NExperts, a.NExpertsUsed, a.ExpertFFN = 0, 0, 0
		}
	}
	c.TiedOutput, c.QKVBias = a.TiedOutput, a.QKVBias
	return a, c, a.validate(f.Path())
}

// impliedByImage are the keys an image model's file leaves out: its classes (Family's
// class_count) are the vocabulary, its context is the class token and the patches, and its
// heads are d_model/n_heads wide with a key/value head per head.
var impliedByImage = map[string]bool{"vocab_size": true, "context_length": true,
	"attention.head_count_kv": true, "attention.key_length": true, "attention.value_length": true}

// ropeModes are ggml's RoPE modes of the spec's.
var ropeModes = map[config.TransformerRopeMode]ggml.RopeMode{
	config.TransformerRopeModeNormal: ggml.RopeNormal,
	config.TransformerRopeModeNeox:   ggml.RopeNeox,
}

// Config is the engine's configuration, generated from specs/engines.
type Config = config.Llama

// archFromConfig is the architecture that c describes for the member name of family f: the
// one conversion from the specs' parameters, which the trainer and DetectArchitecture share.
// Head sizes are DModel/NHeads (0 when that does not divide), as the spec's keys imply.
func archFromConfig(name string, f config.Transformer, c Config) Architecture {
	hd := 0
	if c.NHeads > 0 && c.DModel%c.NHeads == 0 {
		hd = c.DModel / c.NHeads
	}
	a := Architecture{Name: name, Vocab: c.Vocab, DModel: c.DModel, NLayers: c.NLayers, DFF: c.DFF,
		Context: c.Context, NHeads: c.NHeads, NKVHeads: c.NKVHeads, HeadDimK: hd, HeadDimV: hd,
		NormEps: c.RMSEps, RopeMode: ropeModes[f.RopeMode], RopeDims: hd, RopeBase: c.RopeBase, RopeScale: 1,
		TiedOutput: c.TiedOutput, QKVBias: c.QKVBias || f.QKVBias, EmbedScale: 1, FFN: f.FFN, PostNorms: f.PostNorms,
		Norm: f.Norm, Positions: f.Positions, FusedQKV: f.FusedQKV, OutBias: f.AllBiases, FFNBias: f.AllBiases,
		Input: f.Input, Head: f.Head}
	if hd > 0 {
		a.QueryScale = float32(1 / math.Sqrt(float64(hd)))
	}
	if c.RopeScaling != config.LlamaRopeScalingNone && c.RopeScaleFactor > 0 {
		a.RopeScale = 1 / c.RopeScaleFactor
		if c.RopeScaling == config.LlamaRopeScalingYarn {
			a.RopeYaRN, a.RopeOrigCtx = true, c.RopeOrigContext
		}
	}
	a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
	return a
}

// validate checks the shape parameters against each other and the decoder's limits.
func (a *Architecture) validate(path string) error {
	switch {
	case a.HeadDimK <= 0 || a.HeadDimV <= 0:
		return fmt.Errorf("gguf %s: head sizes %d (keys) and %d (values) must be positive", path, a.HeadDimK, a.HeadDimV)
	case a.Positions == PosRoPE && (a.RopeDims <= 0 || a.RopeDims%2 != 0 || a.RopeDims > a.HeadDimK):
		return fmt.Errorf("gguf %s: rope.dimension_count %d must be even and at most the head size %d", path, a.RopeDims, a.HeadDimK)
	case a.Vocab <= 0:
		return fmt.Errorf("gguf %s: empty vocabulary", path)
	case a.NExperts > 0 && (a.NExpertsUsed <= 0 || a.NExpertsUsed > a.NExperts || a.ExpertFFN <= 0):
		return fmt.Errorf("gguf %s: %d experts, %d used per token, width %d: want 1 ≤ used ≤ experts and a positive width", path, a.NExperts, a.NExpertsUsed, a.ExpertFFN)
	case a.NExperts == 0 && a.DFF <= 0:
		return fmt.Errorf("gguf %s: feed_forward_length %d must be positive", path, a.DFF)
	case a.Positions == PosRoPE && (!(a.RopeBase > 0) || !(a.RopeBaseLocal > 0) || math.IsInf(float64(a.RopeBase), 0) || math.IsInf(float64(a.RopeBaseLocal), 0)):
		return fmt.Errorf("gguf %s: rope.freq_base %g must be positive and finite", path, a.RopeBase)
	case a.AttnSoftcap < 0 || a.FinalSoftcap < 0:
		return fmt.Errorf("gguf %s: negative soft-cap", path)
	case !(a.NormEps >= 0) || math.IsInf(float64(a.NormEps), 0):
		// ggml asserts eps ≥ 0 (and aborts the process) in its norms.
		key := "layer_norm_rms_epsilon"
		if a.Norm == NormLayer {
			key = "layer_norm_epsilon"
		}
		return fmt.Errorf("gguf %s: %s %g: want a finite value ≥ 0", path, key, a.NormEps)
	}
	return nil
}
