package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// SmolLM2Architecture is the shape of SmolLM2-135M (arch llama, tied output, GQA 9/3, the
// training engine's "smollm2-135m" preset).
func SmolLM2Architecture() Architecture {
	c, err := config.LlamaPreset("smollm2-135m")
	if err != nil {
		panic(err) // a generated preset
	}
	return ArchitectureFromConfig(c)
}

// WriteRandomGGUF writes a checkpoint of architecture a, with llama.cpp's keys and tensor
// names, whose weights are seeded random numbers: matrices N(0, 1/fan-in) (MoE routers 4×
// that), norms near 1, biases small. Matrices whose rows split into blocks of weightType are stored as that type
// (f32, f16, bf16, q8_0, q4_0, k-quants, ...; the router of a mixture of experts stays f32, as
// llama.cpp's quantizer leaves it); norms and biases are f32. For benchmarks and tests.
func WriteRandomGGUF(path string, a Architecture, weightType ggml.Type, seed uint64) error {
	_, err := writeRandomGGUF(path, a, weightType, seed, 1, false)
	return err
}

// writeRandomGGUF writes the file; with keep it also returns every tensor's values before
// conversion to the file's type. scale multiplies the standard deviation of every random
// matrix (and the spread of norms and biases).
func writeRandomGGUF(path string, a Architecture, weightType ggml.Type, seed uint64, scale float64, keep bool) (map[string][]float32, error) {
	if err := a.validate(path); err != nil {
		return nil, err
	}
	if _, ok := traits[a.Name]; !ok {
		return nil, fmt.Errorf("gguf %s: unknown architecture %q", path, a.Name)
	}
	if !ggml.ValidType(weightType) {
		return nil, fmt.Errorf("gguf %s: invalid weight type %v", path, weightType)
	}
	var w gguffile.Writer
	p := a.Name + "."
	kvs := []gguffile.KV{
		{Key: "general.architecture", Value: a.Name},
		{Key: "general.name", Value: "toy random " + a.Name},
		{Key: p + "context_length", Value: uint32(a.Context)},
		{Key: p + "embedding_length", Value: uint32(a.DModel)},
		{Key: p + "block_count", Value: uint32(a.NLayers)},
		{Key: p + "attention.head_count", Value: uint32(a.NHeads)},
		{Key: p + "attention.head_count_kv", Value: uint32(a.NKVHeads)},
		{Key: p + "attention.key_length", Value: uint32(a.HeadDimK)},
		{Key: p + "attention.value_length", Value: uint32(a.HeadDimV)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: a.RMSEps},
		{Key: p + "rope.freq_base", Value: a.RopeBase},
		{Key: p + "rope.dimension_count", Value: uint32(a.RopeDims)},
		{Key: p + "vocab_size", Value: uint32(a.Vocab)},
	}
	if a.DFF > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "feed_forward_length", Value: uint32(a.DFF)})
	}
	if a.RopeScale != 1 && a.RopeScale > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "rope.scaling.type", Value: "linear"},
			gguffile.KV{Key: p + "rope.scaling.factor", Value: 1 / a.RopeScale})
	}
	if a.SlidingWindow > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "attention.sliding_window", Value: uint32(a.SlidingWindow)})
	}
	if a.AttnSoftcap > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "attn_logit_softcapping", Value: a.AttnSoftcap})
	}
	if a.FinalSoftcap > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "final_logit_softcapping", Value: a.FinalSoftcap})
	}
	if def := float32(1 / math.Sqrt(float64(a.HeadDimK))); a.QueryScale > 0 && math.Abs(float64(a.QueryScale-def)) > 1e-7 {
		kvs = append(kvs, gguffile.KV{Key: p + "attention.query_pre_attn_scalar", Value: float32(1 / (float64(a.QueryScale) * float64(a.QueryScale)))})
	}
	if a.NExperts > 0 {
		kvs = append(kvs, gguffile.KV{Key: p + "expert_count", Value: uint32(a.NExperts)},
			gguffile.KV{Key: p + "expert_used_count", Value: uint32(a.NExpertsUsed)},
			gguffile.KV{Key: p + "expert_feed_forward_length", Value: uint32(a.ExpertFFN)})
		if a.SharedExpertFFN > 0 {
			kvs = append(kvs, gguffile.KV{Key: p + "expert_shared_feed_forward_length", Value: uint32(a.SharedExpertFFN)})
		}
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", path, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x72616e64))
	var kept map[string][]float32
	if keep {
		kept = map[string][]float32{}
	}
	for _, s := range a.tensorSpecs() {
		n := int64(1)
		for _, d := range s.ne {
			n *= d
		}
		vals := make([]float32, n)
		name := s.name
		switch {
		case name == "rope_freqs.weight":
			for i := range vals {
				vals[i] = float32(1 + 3*rng.Float64())
			}
		case strings.HasSuffix(name, "norm.weight"):
			for i := range vals {
				vals[i] = float32(1 + 0.2*scale*rng.NormFloat64())
			}
		case strings.HasSuffix(name, ".bias"):
			for i := range vals {
				vals[i] = float32(0.2 * scale * rng.NormFloat64())
			}
		default:
			std := scale / math.Sqrt(float64(s.ne[0]))
			switch {
			case name == "token_embd.weight":
				std = scale / float64(a.EmbedScale)
			case strings.HasSuffix(name, "ffn_gate_inp.weight"):
				std *= 4 // decisive routing: top-k rarely hangs on a near tie
			}
			for i := range vals {
				vals[i] = float32(std * rng.NormFloat64())
			}
		}
		typ := ggml.F32
		if s.matrix && len(s.ne) >= 2 && s.ne[0]%int64(ggml.BlockSize(weightType)) == 0 && !strings.HasSuffix(name, "ffn_gate_inp.weight") {
			typ = weightType
		}
		var data []byte
		if typ == ggml.F32 {
			data = make([]byte, 4*len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		} else {
			var err error
			if data, err = ggml.Quantize(typ, vals, int(s.ne[0])); err != nil {
				return nil, fmt.Errorf("gguf %s: tensor %q: %w", path, name, err)
			}
		}
		if err := w.AddTensor(name, uint32(typ), s.ne, data); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", path, err)
		}
		if keep {
			kept[name] = vals
		}
	}
	if err := w.WriteFile(path); err != nil {
		return nil, err
	}
	return kept, nil
}
