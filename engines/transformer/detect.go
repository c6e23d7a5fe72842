package transformer

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

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
	tr, ok := Family(name)
	if !ok || !decodes(tr) {
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
		if !tr.Experts {
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
	a := archFromConfig(name, tr, c)
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
	case tr.Experts && x.Experts == 0:
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
