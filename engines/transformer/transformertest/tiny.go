package transformertest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// TinyArch returns a small model of each supported architecture (and variant), with every
// derived field set as DetectArchitecture derives it, so that detection can be checked by
// equality. Head sizes are 32 so that q8_0 caches and q8_0/q4_0 weights fit.
func TinyArch(variant string) transformer.Architecture {
	base := func(name string, d, H, Hkv, hd int) transformer.Architecture {
		a := transformer.Architecture{Name: name, Vocab: 48, DModel: d, NLayers: 2, DFF: 96, Context: 64,
			NHeads: H, NKVHeads: Hkv, HeadDimK: hd, HeadDimV: hd, NormEps: 1e-5,
			RopeMode: ggml.RopeNeox, RopeDims: hd, RopeBase: 10000, RopeScale: 1, EmbedScale: 1,
			QueryScale: float32(1 / math.Sqrt(float64(hd))),
			Norm:       transformer.NormRMS, Positions: transformer.PosRoPE, FFN: transformer.FFNSwiGLU,
			Input: transformer.InputTokens, Head: transformer.HeadLM}
		if t, _ := transformer.Family(name); t.SlidingPattern > 0 {
			a.SlidingPattern = t.SlidingPattern
		}
		return a
	}
	finish := func(a transformer.Architecture) transformer.Architecture {
		a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
		if t, _ := transformer.Family(a.Name); t.LocalRopeBase > 0 {
			lb := t.LocalRopeBase
			a.RopeBaseLocal, a.RopeScaleLocal = lb, 1
		}
		return a
	}
	switch variant {
	case "llama": // GQA, untied, llama-3-style frequency factors, partial rotary, linear scaling
		a := base("llama", 128, 4, 2, 32)
		a.RopeMode, a.RopeFreqs, a.RopeDims, a.RopeScale, a.RopeBase = ggml.RopeNormal, true, 16, 0.5, 500000
		return finish(a)
	case "smollm2": // tied, GQA 3:1 as SmolLM2
		a := base("llama", 96, 3, 1, 32)
		a.RopeMode, a.TiedOutput, a.RopeBase = ggml.RopeNormal, true, 100000
		return finish(a)
	case "mistral": // llama with a sliding window on every layer
		a := base("llama", 128, 4, 2, 32)
		a.RopeMode, a.SlidingWindow = ggml.RopeNormal, 3
		return finish(a)
	case "qwen2":
		a := base("qwen2", 128, 4, 2, 32)
		a.QKVBias, a.TiedOutput, a.RopeBase = true, true, 1000000
		return finish(a)
	case "qwen3": // head size 32 ≠ d/H = 16
		a := base("qwen3", 64, 4, 2, 32)
		a.QKNorm = transformer.QKNormHeadRMS
		return finish(a)
	case "gemma2":
		a := base("gemma2", 64, 2, 1, 32)
		a.FFN, a.PostNorms, a.TiedOutput = transformer.FFNGeGLU, true, true
		a.EmbedScale = float32(math.Sqrt(64))
		a.AttnSoftcap, a.FinalSoftcap = 2, 3
		a.SlidingWindow = 3
		a.NLayers = 3
		a.QueryScale = float32(1 / math.Sqrt(24))
		return finish(a)
	case "gemma3":
		a := base("gemma3", 64, 2, 1, 32)
		a.FFN, a.PostNorms, a.TiedOutput, a.QKNorm = transformer.FFNGeGLU, true, true, transformer.QKNormHeadRMS
		a.EmbedScale = float32(math.Sqrt(64))
		a.SlidingWindow, a.NLayers = 3, 7
		a.RopeBase, a.RopeScale = 1000000, 0.25
		return finish(a)
	case "qwen3moe":
		a := base("qwen3moe", 64, 4, 2, 32)
		a.QKNorm, a.DFF = transformer.QKNormHeadRMS, 0
		a.NExperts, a.NExpertsUsed, a.ExpertFFN, a.NormTopK = 4, 2, 64, true
		return finish(a)
	case "qwen2moe":
		a := base("qwen2moe", 64, 4, 2, 16)
		a.QKVBias, a.DFF = true, 0
		a.NExperts, a.NExpertsUsed, a.ExpertFFN, a.SharedExpertFFN = 4, 2, 32, 64
		return finish(a)
	case "gpt2": // LayerNorm with biases, learned positions, fused QKV, biases, GELU MLP, tied
		a := base("gpt2", 64, 2, 2, 32)
		a.RopeMode, a.Norm, a.Positions, a.FFN = ggml.RopeNormal, transformer.NormLayer, transformer.PosLearned, transformer.FFNGELU
		a.FusedQKV, a.QKVBias, a.OutBias, a.FFNBias, a.TiedOutput = true, true, true, true, true
		return finish(a)
	}
	panic("unknown variant " + variant)
}

// WriteTiny writes the variant with random weights of type typ and returns its path.
func WriteTiny(t testing.TB, a transformer.Architecture, typ ggml.Type, seed uint64) string {
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.gguf", a.Name, ggml.TypeName(typ)))
	_, err := transformer.WriteRandomGGUFValues(path, a, typ, seed, 1, false)
	require.NoError(t, err)
	return path
}

// RelErr32 is RelErr against logits another program gave in float32 (the oracle's).
func RelErr32(got, want [][]float32) float64 {
	w := make([][]float64, len(want))
	for i, row := range want {
		w[i] = make([]float64, len(row))
		for j, v := range row {
			w[i][j] = float64(v)
		}
	}
	return RelErr(got, w)
}

// RelErr is the largest absolute difference over every row, relative to the largest
// reference magnitude.
func RelErr(got [][]float32, want [][]float64) float64 {
	diff, scale := 0.0, 0.0
	for i := range want {
		for j, w := range want[i] {
			diff = math.Max(diff, math.Abs(float64(got[i][j])-w))
			scale = math.Max(scale, math.Abs(w))
		}
	}
	return diff / scale
}

func Argmax32(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func Argmax64(x []float64) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func RandomTokens(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

var AllVariants = []string{"llama", "smollm2", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "qwen3moe", "qwen2moe", "gpt2"}

// EditGGUF writes a copy of src to dst (which may be src) with its metadata and tensors passed
// through editKV and editTensor (nil: unchanged; keep false drops the entry); extra keys are
// appended. editTensor gets a copy of the tensor's data.
func EditGGUF(t testing.TB, src, dst string, editKV func(kv gguffile.KV) (gguffile.KV, bool),
	editTensor func(ti gguffile.TensorInfo, data []byte) (gguffile.TensorInfo, []byte, bool), extra ...gguffile.KV) string {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	f, err := gguffile.ReadFile(src)
	require.NoError(t, err)
	var w gguffile.Writer
	for _, kv := range f.KVs {
		if editKV != nil {
			var keep bool
			if kv, keep = editKV(kv); !keep {
				continue
			}
		}
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, kv := range extra {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, ti := range f.Tensors {
		data := raw[f.DataOffset+int64(ti.Offset) : f.DataOffset+int64(ti.Offset)+ti.Size]
		if editTensor != nil {
			var keep bool
			if ti, data, keep = editTensor(ti, append([]byte(nil), data...)); !keep {
				continue
			}
		}
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Shape(), data))
	}
	require.NoError(t, w.WriteFile(dst))
	return dst
}

// Rewrite copies the GGUF at src to a new file, letting edit change its metadata and tensors
// (EditGGUF, with editTensor giving a tensor's name, shape, data and type).
func Rewrite(t *testing.T, src string, editKV func(kv gguffile.KV) (gguffile.KV, bool), editTensor func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool)) string {
	var edit func(ti gguffile.TensorInfo, data []byte) (gguffile.TensorInfo, []byte, bool)
	if editTensor != nil {
		edit = func(ti gguffile.TensorInfo, data []byte) (gguffile.TensorInfo, []byte, bool) {
			name, ne, data, typ, keep := editTensor(ti, data)
			require.LessOrEqual(t, len(ne), gguffile.MaxDims, "tensor %s", name)
			out := gguffile.TensorInfo{Name: name, NDims: len(ne), Type: typ}
			copy(out.Ne[:], ne)
			return out, data, keep
		}
	}
	return EditGGUF(t, src, filepath.Join(t.TempDir(), "edited.gguf"), editKV, edit)
}

// NoVocab is the tokenizer metadata llama.cpp needs to load a model whose tests pass token ids:
// a vocabulary of {arch}.vocab_size dummy tokens.
var NoVocab = []transformer.KV{{Key: "tokenizer.ggml.model", Value: "none"}}

// WithKVs rewrites the GGUF at path with extra metadata appended, tensors unchanged.
func WithKVs(t testing.TB, path string, extra []transformer.KV) {
	kvs := make([]gguffile.KV, len(extra))
	for i, kv := range extra {
		kvs[i] = gguffile.KV{Key: kv.Key, Value: kv.Value}
	}
	EditGGUF(t, path, path, nil, nil, kvs...)
}

func TinyViT() config.Vit {
	c := config.DefaultVit()
	c.ImageSize, c.PatchSize, c.Channels, c.DModel, c.NHeads, c.DFF, c.NLayers, c.Classes = 4, 2, 2, 8, 2, 12, 2, 3
	c.InitScale, c.Seed = 0.5, 5
	return c
}

// CPUBackend is a CPU backend of 2 threads, closed when the test ends.
func CPUBackend(t testing.TB) *ggml.Backend {
	be, err := ggml.NewCPUBackend(2)
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	return be
}
