package transformer

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// FFNKind is the shape and activation of the feed-forward block.
type FFNKind int

const (
	// FFNSwiGLU is down(silu(gate·x) ⊙ up·x): llama, qwen2, qwen3 and their MoE experts.
	FFNSwiGLU FFNKind = iota
	// FFNGeGLU is down(gelu_tanh(gate·x) ⊙ up·x): gemma2, gemma3.
	FFNGeGLU
	// FFNGELU is down(gelu_tanh(up·x)), no gate: gpt2.
	FFNGELU
)

// NormKind is the normalisation of the residual stream.
type NormKind int

const (
	// NormRMS is RMSNorm with a learned scale: the llama family.
	NormRMS NormKind = iota
	// NormLayer is LayerNorm with a learned scale and bias: gpt2.
	NormLayer
)

// PosKind is how token positions enter the model.
type PosKind int

const (
	// PosRoPE rotates queries and keys by their positions.
	PosRoPE PosKind = iota
	// PosLearned adds a learned embedding of each absolute position (position_embd, one row
	// per position of the trained context) to the token embeddings: gpt2.
	PosLearned
)

// InputKind is what the model reads.
type InputKind int

const (
	// InputTokens gathers token embeddings (token_embd) for i32 token ids.
	InputTokens InputKind = iota
	// InputPatches projects flattened image patches (patch_embd, a matmul with a bias) and
	// prepends a learned class token (cls_token): vit.
	InputPatches
)

// HeadKind is what the output head computes.
type HeadKind int

const (
	// HeadLM gives next-token logits [Vocab] at every position.
	HeadLM HeadKind = iota
	// HeadClassToken gives class logits [Vocab = classes] from the class token (position 0 of
	// each sequence) only, through output.weight and output.bias: vit.
	HeadClassToken
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

// archTraits are what an architecture name implies beyond its metadata.
type archTraits struct {
	mode           ggml.RopeMode
	ffn            FFNKind
	norm           NormKind
	positions      PosKind
	fusedQKV       bool
	allBiases      bool // attn_qkv, attn_output, ffn_up and ffn_down all have biases
	embedScale     bool // √d
	postNorms      bool // required post_attention_norm / post_ffw_norm
	qkNorm         bool // required attn_q_norm / attn_k_norm
	bias           bool // required attn_{q,k,v}.bias
	slidingPattern int  // -1: no sliding window; 0: every layer when the key is present
	localRopeBase  float32
	moe            bool // required experts
	sharedExpert   bool
	normTopK       bool
}

// SupportedArchitectures lists the general.architecture values the decoder runs.
func SupportedArchitectures() []string {
	var names []string
	for n := range traits {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var traits = map[string]archTraits{
	"llama":    {mode: ggml.RopeNormal, slidingPattern: 0, normTopK: true},
	"qwen2":    {mode: ggml.RopeNeox, bias: true, slidingPattern: -1},
	"qwen3":    {mode: ggml.RopeNeox, qkNorm: true, slidingPattern: -1},
	"qwen2moe": {mode: ggml.RopeNeox, bias: true, moe: true, sharedExpert: true, slidingPattern: -1},
	"qwen3moe": {mode: ggml.RopeNeox, qkNorm: true, moe: true, normTopK: true, slidingPattern: -1},
	"gemma2": {mode: ggml.RopeNeox, ffn: FFNGeGLU, embedScale: true, postNorms: true,
		slidingPattern: 2},
	"gemma3": {mode: ggml.RopeNeox, ffn: FFNGeGLU, embedScale: true, postNorms: true, qkNorm: true,
		slidingPattern: 6, localRopeBase: 10000},
	"gpt2": {ffn: FFNGELU, norm: NormLayer, positions: PosLearned, fusedQKV: true, bias: true,
		allBiases: true, slidingPattern: -1},
}

// DetectArchitecture reads the architecture of an open GGUF file from its metadata and
// tensors. An unknown architecture or inconsistent metadata is an error naming the file.
func DetectArchitecture(f *ggml.GGUF) (Architecture, error) {
	values, err := Metadata(f)
	if err != nil {
		return Architecture{}, err
	}
	return DetectArchitectureMeta(f, values)
}

// DetectArchitectureMeta is DetectArchitecture with the file's metadata already read.
func DetectArchitectureMeta(f *ggml.GGUF, values map[string]any) (Architecture, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return Architecture{}, fmt.Errorf("gguf %s: no general.architecture: %w", f.Path(), err)
	}
	tr, ok := traits[name]
	if !ok {
		return Architecture{}, fmt.Errorf("gguf %s: unknown architecture %q (supported: %s)", f.Path(), name, strings.Join(SupportedArchitectures(), ", "))
	}
	// The keys the training configuration shares with the family are read through its spec
	// (generated/config); those of the other architectures' parts follow by hand.
	c := config.DefaultLlama()
	_, hasKV := values[name+".attention.head_count_kv"]
	_, hasFF := values[name+".feed_forward_length"]
	_, hasVocab := values[name+".vocab_size"]
	if err := c.FromGGUF(name, values); err != nil {
		return Architecture{}, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	if !hasKV {
		c.NKVHeads = c.NHeads
	}
	if !hasFF {
		if !tr.moe {
			return Architecture{}, fmt.Errorf("gguf %s: metadata key %q is missing", f.Path(), name+".feed_forward_length")
		}
		c.DFF = 0
	}
	switch c.RopeScaling {
	case "", config.LlamaRopeScalingNone:
		c.RopeScaling = config.LlamaRopeScalingNone
	case config.LlamaRopeScalingLinear, config.LlamaRopeScalingYarn:
		if x := c.RopeScaleFactor; !(x > 0) || math.IsInf(float64(x), 0) {
			return Architecture{}, fmt.Errorf("gguf %s: rope.scaling.factor %g: want a positive finite factor", f.Path(), x)
		}
	default:
		return Architecture{}, fmt.Errorf("gguf %s: rope scaling %q is not supported (none, linear or yarn)", f.Path(), c.RopeScaling)
	}
	a := archFromConfig(name, c)
	for _, v := range []int{a.DModel, a.NLayers, a.NHeads, a.NKVHeads, a.Context, a.DFF, c.RopeOrigContext} {
		if v > math.MaxInt32 {
			return a, fmt.Errorf("gguf %s: a shape of %d is out of range", f.Path(), v)
		}
	}
	if a.DModel <= 0 || a.NLayers <= 0 || a.NHeads <= 0 || a.NKVHeads <= 0 || a.Context <= 0 || a.DFF < 0 || c.RopeOrigContext < 0 {
		return a, fmt.Errorf("gguf %s: embedding_length %d, block_count %d, head_count %d, head_count_kv %d and context_length %d must be positive", f.Path(), a.DModel, a.NLayers, a.NHeads, a.NKVHeads, a.Context)
	}
	if a.NHeads%a.NKVHeads != 0 {
		return a, fmt.Errorf("gguf %s: head_count %d is not a multiple of head_count_kv %d", f.Path(), a.NHeads, a.NKVHeads)
	}
	x := config.DefaultFamily()
	if err := x.FromGGUF(name, values); err != nil {
		return a, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	if err := x.Validate(); err != nil {
		return a, fmt.Errorf("gguf %s: %w", f.Path(), err)
	}
	missing := func(key string) error {
		return fmt.Errorf("gguf %s: metadata key %q is missing", f.Path(), name+"."+key)
	}
	switch {
	case x.KeyLength == 0 && a.HeadDimK == 0:
		return a, missing("attention.key_length") // embedding_length / head_count does not divide
	case tr.moe && x.Experts == 0:
		return a, missing("expert_count")
	case x.Experts > 0 && x.ExpertsUsed == 0:
		return a, missing("expert_used_count")
	case x.Experts > 0 && x.ExpertFFN == 0 && a.DFF == 0:
		return a, missing("expert_feed_forward_length")
	case a.Norm == NormLayer && x.LayerNormEps == 0:
		if _, ok := values[name+".attention.layer_norm_epsilon"]; !ok {
			return a, missing("attention.layer_norm_epsilon")
		}
	}
	if a.Norm == NormLayer {
		a.NormEps = x.LayerNormEps
	}
	a.HeadDimK = cmp.Or(x.KeyLength, a.HeadDimK)
	a.HeadDimV = cmp.Or(x.ValueLength, a.HeadDimK)
	a.RopeDims = cmp.Or(x.RopeDims, a.HeadDimK)
	a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
	if tr.localRopeBase > 0 {
		a.RopeBaseLocal, a.RopeScaleLocal = tr.localRopeBase, 1
	}
	if tr.embedScale {
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
	if tr.slidingPattern >= 0 {
		a.SlidingWindow, a.SlidingPattern = x.SlidingWindow, tr.slidingPattern
	}
	if a.NExperts = x.Experts; a.NExperts > 0 {
		a.NExpertsUsed, a.ExpertFFN, a.NormTopK = x.ExpertsUsed, cmp.Or(x.ExpertFFN, a.DFF), tr.normTopK
		if tr.sharedExpert {
			a.SharedExpertFFN = x.SharedExpertFFN
		}
	}

	// Tensors decide the optional parts.
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return a, fmt.Errorf("gguf %s: tensor %q is missing", f.Path(), "token_embd.weight")
	}
	if rows := int(emb.Ne[1]); hasVocab && a.Vocab != rows {
		return a, fmt.Errorf("gguf %s: vocab_size %d, but token_embd.weight has %d rows", f.Path(), a.Vocab, rows)
	} else {
		a.Vocab = rows
	}
	_, hasOut := f.Tensor("output.weight")
	a.TiedOutput = !hasOut
	_, a.QKVBias = f.Tensor("blk.0.attn_q.bias")
	if _, ok := f.Tensor("blk.0.attn_q_norm.weight"); ok || tr.qkNorm {
		a.QKNorm = QKNormHeadRMS
	}
	if _, ok := f.Tensor("blk.0.post_attention_norm.weight"); ok {
		a.PostNorms = true
	}
	_, a.RopeFreqs = f.Tensor("rope_freqs.weight")
	if tr.bias {
		a.QKVBias = true // then required
	}
	if !tr.moe && a.NExperts > 0 {
		// llama with experts (mixtral-style): softmax, top-k, renormalised.
		if _, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); !ok {
			a.NExperts, a.NExpertsUsed, a.ExpertFFN = 0, 0, 0
		}
	}
	return a, a.validate(f.Path())
}

// Metadata is the architecture as the "<arch>.*" GGUF keys DetectArchitecture reads back
// (the tensors carry the rest: vocabulary, tied output, biases, QK norms), written through
// the same specs.
func (a *Architecture) Metadata() []KV {
	c := ConfigFromArch(a)
	x := config.Family{KeyLength: a.HeadDimK, ValueLength: a.HeadDimV, RopeDims: a.RopeDims,
		SlidingWindow: a.SlidingWindow, AttnSoftcap: a.AttnSoftcap, FinalSoftcap: a.FinalSoftcap,
		Experts: a.NExperts, ExpertsUsed: a.NExpertsUsed, ExpertFFN: a.ExpertFFN, SharedExpertFFN: a.SharedExpertFFN}
	if def := float32(1 / math.Sqrt(float64(a.HeadDimK))); a.QueryScale > 0 && math.Abs(float64(a.QueryScale-def)) > 1e-7 {
		x.QueryPreAttnScalar = float32(1 / (float64(a.QueryScale) * float64(a.QueryScale)))
	}
	if a.Norm == NormLayer {
		x.LayerNormEps = a.NormEps
	}
	var kvs []KV
	for _, kv := range append(c.ToGGUF(a.Name), x.ToGGUF(a.Name)...) {
		key := strings.TrimPrefix(kv.Key, a.Name+".")
		switch {
		case strings.HasPrefix(kv.Key, "toy."): // the training options of a checkpoint
		case a.Norm != NormRMS && key == "attention.layer_norm_rms_epsilon":
		case a.Positions != PosRoPE && strings.HasPrefix(key, "rope."):
		default:
			kvs = append(kvs, kv)
		}
	}
	return kvs
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

// FitFile checks the tensors the architecture implies against the open file f before anything
// is sized by the header's counts. First the count: the file must hold at least as many
// tensors as block_count asks for, so that the tensor table (whose length the count sets) is
// bounded by the file — a block_count of 2³¹−1 once made the loader ask for 532 GB; a count
// the file cannot hold is an error naming a tensor it lacks, found in the first blocks. Then
// each tensor must be present with its shape, so every width, head count, vocabulary and
// expert count that sizes a weight is the file's own, and the weights take no more memory than
// the file holds (f32Only: as f32, a training checkpoint's; otherwise in a type ggml computes
// with, norms and biases f32). what names the kind of file in errors ("gguf", "checkpoint").
func (a *Architecture) FitFile(f *ggml.GGUF, what string, f32Only bool) error {
	missing := func(name string) error {
		return fmt.Errorf("%s %s: %s: tensor %q is missing", what, f.Path(), a.Name, name)
	}
	one, none := *a, *a
	one.NLayers, none.NLayers = 1, 0
	outside := none.TensorSpecs()
	var block []tensorSpec // block 0's, named blk.0.*
	for _, s := range one.TensorSpecs() {
		if strings.HasPrefix(s.Name, "blk.0.") {
			block = append(block, s)
		}
	}
	perBlock, have := int64(len(block)), int64(len(f.Tensors()))
	if need := int64(len(outside)) + perBlock*int64(a.NLayers); need > have {
		// The file's distinct names cannot fill more than have/perBlock blocks: unless a tensor
		// outside the blocks is missing, one of the first blocks lacks one.
		names := func(yield func(string) bool) {
			for _, s := range outside {
				if !yield(s.Name) {
					return
				}
			}
			for il := int64(0); il <= have/perBlock && il < int64(a.NLayers); il++ {
				for _, s := range block {
					if !yield(fmt.Sprintf("blk.%d.%s", il, strings.TrimPrefix(s.Name, "blk.0."))) {
						return
					}
				}
			}
		}
		for name := range names {
			if _, ok := f.Tensor(name); !ok {
				return fmt.Errorf("%w (block_count %d asks for %d tensors, %d a block; the file holds %d)", missing(name), a.NLayers, need, perBlock, have)
			}
		}
		return fmt.Errorf("%s %s: %s: block_count %d asks for %d tensors (%d a block), but the file holds %d",
			what, f.Path(), a.Name, a.NLayers, need, perBlock, have)
	}
	for _, s := range a.TensorSpecs() {
		info, ok := f.Tensor(s.Name)
		if !ok {
			return missing(s.Name)
		}
		want := [4]int64{1, 1, 1, 1}
		copy(want[:], s.Ne)
		if info.Ne != want {
			return fmt.Errorf("%s %s: %s: tensor %q has shape %v, want %v", what, f.Path(), a.Name, s.Name, info.Ne[:info.NDims], s.Ne)
		}
		switch {
		case f32Only && info.Type != ggml.F32:
			return fmt.Errorf("%s %s: tensor %q is %s, want f32", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		case s.Role.multiplied() && !Computable(info.Type):
			return fmt.Errorf("%s %s: tensor %q has type %s, which ggml cannot multiply", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		case !s.Role.multiplied() && info.Type != ggml.F32:
			return fmt.Errorf("%s %s: tensor %q has type %s, want f32 (norms, biases and RoPE factors)", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		}
	}
	return nil
}

// TensorRole is what a tensor is for: it decides the types a file may store it in, how the
// training engine initialises it and whether weight decay applies.
type TensorRole int

const (
	// roleEmbedding is token_embd: gathered per token, and the output projection when tied.
	roleEmbedding TensorRole = iota
	// roleMatrix is a projection, multiplied with MulMat (or MulMatID for experts).
	roleMatrix
	// RoleResidualOut is a projection whose output joins the residual stream (attn_output,
	// ffn_down): initialised smaller, as GPT-2 does.
	RoleResidualOut
	// RoleNorm is a norm's scale.
	RoleNorm
	// RoleBias is a projection's bias.
	RoleBias
	// RoleRopeFreqs is rope_freqs: llama 3's RoPE frequency factors.
	RoleRopeFreqs
)

// multiplied reports whether tensors of the role are multiplied or gathered, and so may be
// stored in any type ggml computes with; the others are f32.
func (r TensorRole) multiplied() bool {
	return r == roleEmbedding || r == roleMatrix || r == RoleResidualOut
}

// IsMatrix reports whether the role is a projection: weight decay applies to it, and the
// trainer computes its gradient as a GEMM.
func (r TensorRole) IsMatrix() bool { return r == roleMatrix || r == RoleResidualOut }

// tensorSpec is one tensor the architecture needs: its name, its shape (ne, innermost first),
// its role and the slot of a weights struct it binds to.
type tensorSpec struct {
	Name string
	Ne   []int64
	Role TensorRole
	Slot **ggml.Tensor
}

// TensorSpecs lists every tensor of the architecture, in llama.cpp's order and names.
func (a *Architecture) TensorSpecs() []tensorSpec { return a.TensorTable(&Weights{}) }

// TensorTable is the architecture's one tensor table: every tensor, in llama.cpp's order and
// names, each bound to its slot in w (whose layers it sizes). The training model, the GGUF
// loader, the checkpoint writer and the random-model writer all read it.
func (a *Architecture) TensorTable(w *Weights) []tensorSpec {
	d, v := int64(a.DModel), int64(a.Vocab)
	qd, kd, vd := int64(a.NHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimV)
	od := int64(a.NHeads * a.HeadDimV)
	var specs []tensorSpec
	add := func(slot **ggml.Tensor, name string, role TensorRole, ne ...int64) {
		specs = append(specs, tensorSpec{Name: name, Ne: ne, Role: role, Slot: slot})
	}
	if a.Input == InputPatches {
		add(&w.patchEmbd, "patch_embd.weight", roleMatrix, int64(a.PatchDim()), d)
		add(&w.patchEmbdB, "patch_embd.bias", RoleBias, d)
		add(&w.clsToken, "cls_token.weight", roleEmbedding, d)
	} else {
		add(&w.TokEmbd, "token_embd.weight", roleEmbedding, d, v)
	}
	if a.Positions == PosLearned {
		add(&w.PosEmbd, "position_embd.weight", roleEmbedding, d, int64(a.Context))
	}
	// norm adds a norm's scale, and its bias with LayerNorm.
	norm := func(scale, bias **ggml.Tensor, name string, ne int64) {
		add(scale, name+".weight", RoleNorm, ne)
		if a.Norm == NormLayer {
			add(bias, name+".bias", RoleBias, ne)
		}
	}
	if a.RopeFreqs {
		add(&w.RopeFreqs, "rope_freqs.weight", RoleRopeFreqs, int64(a.RopeDims/2))
	}
	w.Layers = make([]blockWeights, a.NLayers)
	for i := range w.Layers {
		l, p := &w.Layers[i], fmt.Sprintf("blk.%d.", i)
		norm(&l.attnNorm, &l.attnNormB, p+"attn_norm", d)
		switch {
		case a.FusedQKV:
			add(&l.Wqkv, p+"attn_qkv.weight", roleMatrix, d, qd+kd+vd)
			if a.QKVBias {
				add(&l.bqkv, p+"attn_qkv.bias", RoleBias, qd+kd+vd)
			}
		default:
			add(&l.Wq, p+"attn_q.weight", roleMatrix, d, qd)
			add(&l.Wk, p+"attn_k.weight", roleMatrix, d, kd)
			add(&l.Wv, p+"attn_v.weight", roleMatrix, d, vd)
			if a.QKVBias {
				add(&l.bq, p+"attn_q.bias", RoleBias, qd)
				add(&l.bk, p+"attn_k.bias", RoleBias, kd)
				add(&l.bv, p+"attn_v.bias", RoleBias, vd)
			}
		}
		if a.QKNorm == QKNormHeadRMS {
			add(&l.qNorm, p+"attn_q_norm.weight", RoleNorm, int64(a.HeadDimK))
			add(&l.kNorm, p+"attn_k_norm.weight", RoleNorm, int64(a.HeadDimK))
		}
		add(&l.Wo, p+"attn_output.weight", RoleResidualOut, od, d)
		if a.OutBias {
			add(&l.bo, p+"attn_output.bias", RoleBias, d)
		}
		if a.PostNorms {
			add(&l.postAttnNorm, p+"post_attention_norm.weight", RoleNorm, d)
		}
		norm(&l.ffnNorm, &l.ffnNormB, p+"ffn_norm", d)
		switch {
		case a.FFN == FFNGELU:
			ff := int64(a.DFF)
			add(&l.Up, p+"ffn_up.weight", roleMatrix, d, ff)
			if a.FFNBias {
				add(&l.upB, p+"ffn_up.bias", RoleBias, ff)
			}
			add(&l.Down, p+"ffn_down.weight", RoleResidualOut, ff, d)
			if a.FFNBias {
				add(&l.downB, p+"ffn_down.bias", RoleBias, d)
			}
		case a.IsMoE():
			e, ff := int64(a.NExperts), int64(a.ExpertFFN)
			add(&l.router, p+"ffn_gate_inp.weight", roleMatrix, d, e)
			add(&l.gateExps, p+"ffn_gate_exps.weight", roleMatrix, d, ff, e)
			add(&l.upExps, p+"ffn_up_exps.weight", roleMatrix, d, ff, e)
			add(&l.downExps, p+"ffn_down_exps.weight", RoleResidualOut, ff, d, e)
			if a.SharedExpertFFN > 0 {
				sf := int64(a.SharedExpertFFN)
				add(&l.shGateInp, p+"ffn_gate_inp_shexp.weight", roleMatrix, d)
				add(&l.shGate, p+"ffn_gate_shexp.weight", roleMatrix, d, sf)
				add(&l.shUp, p+"ffn_up_shexp.weight", roleMatrix, d, sf)
				add(&l.shDown, p+"ffn_down_shexp.weight", RoleResidualOut, sf, d)
			}
		default:
			ff := int64(a.DFF)
			add(&l.Gate, p+"ffn_gate.weight", roleMatrix, d, ff)
			add(&l.Up, p+"ffn_up.weight", roleMatrix, d, ff)
			add(&l.Down, p+"ffn_down.weight", RoleResidualOut, ff, d)
		}
		if a.PostNorms {
			add(&l.postFFNNorm, p+"post_ffw_norm.weight", RoleNorm, d)
		}
	}
	norm(&w.outNorm, &w.outNormB, "output_norm", d)
	if !a.TiedOutput {
		add(&w.Output, "output.weight", roleMatrix, d, v)
	}
	if a.Head == HeadClassToken {
		add(&w.outputB, "output.bias", RoleBias, v)
	}
	return specs
}

// ArchitectureFromConfig is the architecture of a model of the training engine's
// configuration c: arch "llama", RoPE mode NORMAL, with c's RoPE scaling (linear or YaRN).
func ArchitectureFromConfig(c Config) Architecture { return archFromConfig(Arch, c) }

// archFromConfig is the architecture that c describes for the family member name: the one
// conversion from the spec's parameters, which the trainer and DetectArchitecture share. Head
// sizes are DModel/NHeads (0 when that does not divide), as the spec's keys imply.
func archFromConfig(name string, c Config) Architecture {
	tr, ok := traits[name]
	if !ok && name == ViTArch {
		tr = vitTraits
	}
	hd := 0
	if c.NHeads > 0 && c.DModel%c.NHeads == 0 {
		hd = c.DModel / c.NHeads
	}
	a := Architecture{Name: name, Vocab: c.Vocab, DModel: c.DModel, NLayers: c.NLayers, DFF: c.DFF,
		Context: c.Context, NHeads: c.NHeads, NKVHeads: c.NKVHeads, HeadDimK: hd, HeadDimV: hd,
		NormEps: c.RMSEps, RopeMode: tr.mode, RopeDims: hd, RopeBase: c.RopeBase, RopeScale: 1,
		TiedOutput: c.TiedOutput, QKVBias: c.QKVBias || tr.bias, EmbedScale: 1, FFN: tr.ffn, PostNorms: tr.postNorms,
		Norm: tr.norm, Positions: tr.positions, FusedQKV: tr.fusedQKV, OutBias: tr.allBiases, FFNBias: tr.allBiases}
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

// SlidingTraits are the sliding-window pattern an architecture name implies (-1: no sliding
// window; otherwise Architecture.SlidingPattern) and the RoPE base of its local layers (0: the
// global one), as DetectArchitecture applies them.
func SlidingTraits(name string) (pattern int, localRopeBase float32) {
	t := traits[name]
	return t.slidingPattern, t.localRopeBase
}
