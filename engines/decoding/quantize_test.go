package decoding

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/oracle"
)

// TestParseFileType: llama-quantize's names in any case, its aliases and llama.cpp's numbers;
// every listed name parses to a file type whose name (or alias) it is.
func TestParseFileType(t *testing.T) {
	for s, want := range map[string]FileType{"Q4_K_M": FileTypeQ4_K_M, "q4_k_m": FileTypeQ4_K_M, "Q4_K": FileTypeQ4_K_M,
		"q5_k": FileTypeQ5_K_M, "Q3_K": FileTypeQ3_K_M, "f16": FileTypeF16, "bf16": FileTypeBF16, "q8_0": FileTypeQ8_0,
		"IQ4_XS": FileTypeIQ4_XS, "15": FileTypeQ4_K_M, "0": FileTypeF32, "tq1_0": FileTypeTQ1_0, "iq3_m": FileTypeIQ3_M,
		"MXFP4_MOE": FileTypeMXFP4_MOE} {
		got, ok := ParseFileType(s)
		require.True(t, ok, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "q9_9", "Q4_K_X", "IQ2_XXS", "iq1_s", "IQ3_XXS", "IQ2_M", "Q2_K_S", "4", "99", "-1", "mxfp4"} {
		_, ok := ParseFileType(s)
		assert.False(t, ok, s)
	}
	names := FileTypeNames()
	for _, n := range names {
		f, ok := ParseFileType(n)
		require.True(t, ok, n)
		if _, alias := fileTypeAliases[n]; !alias {
			assert.Equal(t, n, f.String())
		}
	}
	assert.Len(t, names, len(fileTypes)+len(fileTypeAliases))
}

// quantArch is a random model for the comparisons with llama.cpp's quantizer.
type quantArch struct {
	name string
	a    transformer.Architecture
	typ  ggml.Type // of the matrices in the input file
	// big models skip the IQ3 mixes, whose quantizer searches a grid and takes most of the
	// time: the small ones cover their rules.
	big bool
}

func quantArches() []quantArch {
	// SmolLM2's kind of widths, narrower: 192-value rows, which no k-quant super-block divides
	// (the fallbacks), ffn_down's 512 (k-quants), GQA 3, a head tied to the token embeddings.
	smol := transformer.SmolLM2Architecture()
	smol.DModel, smol.NHeads, smol.NKVHeads = 192, 3, 1
	smol.NLayers, smol.Vocab, smol.DFF, smol.Context = 4, 256, 512, 64
	// 16 layers of 256-value rows, 4 query heads per key head, a head of its own.
	wide := transformertest.TinyArch("llama")
	wide.RopeDims = wide.HeadDimK
	wide.DModel, wide.NHeads, wide.NKVHeads, wide.HeadDimK, wide.HeadDimV, wide.RopeDims = 256, 4, 1, 64, 64, 64
	wide.DFF, wide.NLayers, wide.Vocab = 256, 16, 256
	// A mixture of 8 experts (its own rules for attn_v, attn_k, attn_output; ffn_down's layer
	// from the name).
	moe := transformertest.TinyArch("qwen3moe")
	moe.DModel, moe.HeadDimK, moe.HeadDimV, moe.RopeDims, moe.NExperts, moe.ExpertFFN, moe.Vocab = 256, 64, 64, 64, 8, 256, 256
	moe.NLayers = 1
	// Fused attn_qkv.
	gpt2 := transformertest.TinyArch("gpt2")
	gpt2.DModel, gpt2.HeadDimK, gpt2.HeadDimV, gpt2.RopeDims, gpt2.NHeads, gpt2.NKVHeads, gpt2.DFF, gpt2.Vocab = 256, 64, 64, 64, 4, 4, 512, 256
	return []quantArch{{"smollm2/f16", smol, ggml.F16, false}, {"llama16/f32", wide, ggml.F32, true}, {"qwen3moe8/f16", moe, ggml.F16, true}, {"gpt2/f32", gpt2, ggml.F32, false}}
}

// TestExportMatchesLlamaQuantize: for every file type toy export writes, on random models of
// four shapes (SmolLM2's kind of widths with their fallbacks, 16 layers with a head of its own, a
// mixture of 8 experts, fused QKV; the IQ3 mixes on the smaller two), f16 and f32, and for the k-quant mixes on 80-layer models
// (llama.cpp's 70B and 65B), toy's file holds every tensor in the type
// llama.cpp's own quantizer (llama_model_quantize, what llama-quantize runs) chooses, with the
// same bytes, and the same general.file_type and general.quantization_version. A q8_0 model
// requantized to Q4_K_M matches too, and both refuse it without leave.
func TestExportMatchesLlamaQuantize(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes random models every way toy export knows, with toy and with llama.cpp")
	}
	var fts []FileType
	for f := range fileTypes {
		fts = append(fts, f)
	}
	slices.Sort(fts)
	for _, qa := range quantArches() {
		t.Run(qa.name, func(t *testing.T) {
			path := transformertest.WriteTiny(t, qa.a, qa.typ, 3)
			transformertest.WithKVs(t, path, transformertest.NoVocab)
			for _, ft := range fts {
				if qa.big && ft.BaseType() == ggml.IQ3_S {
					continue
				}
				compareWithLlamaQuantize(t, path, ft, false)
			}
		})
	}
	// 80 layers: llama.cpp takes a llama of 80 layers with grouped-query attention for a 70B
	// model (attn_v's q3_K and q4_K become q5_K, here falling back to q5_1 on 32-value rows) and
	// one without for a 65B (no change). Narrow, so that it is cheap; ffn_down's 256 keeps a
	// k-quant in the file.
	for _, kv := range []int{1, 2} {
		a := transformertest.TinyArch("llama")
		a.DModel, a.NHeads, a.NKVHeads, a.HeadDimK, a.HeadDimV, a.RopeDims = 32, 2, kv, 16, 16, 16
		a.DFF, a.NLayers, a.Vocab = 256, 80, 64
		t.Run(fmt.Sprintf("llama80/kv%d", kv), func(t *testing.T) {
			path := transformertest.WriteTiny(t, a, ggml.F32, 5)
			transformertest.WithKVs(t, path, transformertest.NoVocab)
			for _, ft := range []FileType{FileTypeQ3_K_S, FileTypeQ4_K_S, FileTypeQ4_K_M} {
				compareWithLlamaQuantize(t, path, ft, false)
			}
		})
	}
	t.Run("requantize", func(t *testing.T) {
		qa := quantArches()[0]
		path := transformertest.WriteTiny(t, qa.a, ggml.Q8_0, 4)
		transformertest.WithKVs(t, path, transformertest.NoVocab)
		compareWithLlamaQuantize(t, path, FileTypeQ4_K_M, true)
		out := filepath.Join(t.TempDir(), "refused.gguf")
		_, err := Export(path, out, ExportOptions{Type: FileTypeQ4_K_M})
		assert.ErrorContains(t, err, "is q8_0 already")
		assert.NoFileExists(t, out)
		assert.Error(t, oracle.Quantize(path, out, int(FileTypeQ4_K_M), oracle.QuantizeOptions{Threads: 2}), "llama.cpp refuses it too")
	})
}

// compareWithLlamaQuantize quantizes the model at path to ft with toy and with llama.cpp and
// compares the files tensor by tensor.
func compareWithLlamaQuantize(t *testing.T, path string, ft FileType, requantize bool) {
	t.Helper()
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "toy.gguf"), filepath.Join(dir, "llama.gguf")
	rep, err := Export(path, mine, ExportOptions{Type: ft, AllowRequantize: requantize, Threads: 2})
	require.NoError(t, err, "%v", ft)
	require.NoError(t, oracle.Quantize(path, theirs, int(ft), oracle.QuantizeOptions{AllowRequantize: requantize, Threads: 2}), "%v", ft)
	a, err := ggml.OpenGGUF(mine)
	require.NoError(t, err)
	defer a.Close()
	b, err := ggml.OpenGGUF(theirs)
	require.NoError(t, err)
	defer b.Close()
	for _, key := range []string{"general.file_type", "general.quantization_version"} {
		va, err := a.Uint32(key)
		require.NoError(t, err, key)
		vb, err := b.Uint32(key)
		require.NoError(t, err, key)
		assert.Equal(t, vb, va, "%v: %s", ft, key)
	}
	require.Len(t, a.Tensors(), len(b.Tensors()))
	fell := 0
	for _, tb := range b.Tensors() {
		ta, ok := a.Tensor(tb.Name)
		require.True(t, ok, tb.Name)
		if !assert.Equal(t, ggml.TypeName(tb.Type), ggml.TypeName(ta.Type), "%v: %s's type", ft, tb.Name) {
			continue
		}
		assert.Equal(t, tb.Ne, ta.Ne, tb.Name)
		da, err := a.ReadTensorData(tb.Name)
		require.NoError(t, err)
		db, err := b.ReadTensorData(tb.Name)
		require.NoError(t, err)
		assert.True(t, slices.Equal(da, db), "%v: %s (%s) holds other bytes than llama.cpp's", ft, tb.Name, ggml.TypeName(tb.Type))
	}
	for _, n := range rep.FellBack {
		fell += n
	}
	t.Logf("%-7v %d tensors, %d converted (%d fell back): %v", ft, rep.Tensors, rep.Converted, fell, typeCounts(rep.Types))
}

func typeCounts(m map[ggml.Type]int) string {
	var ts []ggml.Type
	for t := range m {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	s := ""
	for _, t := range ts {
		s += fmt.Sprintf(" %s×%d", ggml.TypeName(t), m[t])
	}
	return s
}

// TestExportRunsInLlamaCpp: llama.cpp loads and runs what toy export writes. On a random
// SmolLM2-shaped model (its 576-value rows, so the k-quant mixes take their fallbacks), for
// Q4_K_M, Q5_K_M, Q6_K and Q8_0, toy and llama.cpp decode toy's file to the same greedy tokens
// and close logits at every position.
func TestExportRunsInLlamaCpp(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	a := transformer.SmolLM2Architecture()
	a.NLayers, a.Vocab, a.Context = 4, 512, 64
	path := transformertest.WriteTiny(t, a, ggml.F16, 21)
	transformertest.WithKVs(t, path, transformertest.NoVocab)
	for _, ft := range []FileType{FileTypeQ4_K_M, FileTypeQ5_K_M, FileTypeQ6_K, FileTypeQ8_0} {
		out := filepath.Join(t.TempDir(), ft.String()+".gguf")
		_, err := Export(path, out, ExportOptions{Type: ft, Threads: 2})
		require.NoError(t, err)
		o, err := oracle.Open(out, oracle.Options{Context: 32, Threads: 2})
		require.NoError(t, err)
		m := openTiny(t, out, ModelOptions{})
		d := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 0)
		seq := transformertest.RandomTokens(rand.New(rand.NewPCG(uint64(ft), 7)), 6, a.Vocab)
		var worst float64
		for step := 0; step < 10; step++ {
			got, err := d.Logits(seq)
			require.NoError(t, err)
			want, err := o.Logits(seq)
			require.NoError(t, err)
			e := transformertest.RelErr32(got, want)
			worst = max(worst, e)
			assert.Less(t, e, 2e-2, "%v: step %d", ft, step) // measured at most 6.9e-3: llama.cpp rounds activations to 8 bits, toy multiplies few columns in f32
			next, theirs := transformertest.Argmax32(got[len(got)-1]), transformertest.Argmax32(want[len(want)-1])
			require.Equal(t, theirs, next, "%v: step %d: toy and llama.cpp pick different tokens", ft, step)
			seq = append(seq, next)
		}
		o.Close()
		t.Logf("%-6v toy vs llama.cpp on toy's file: 10 greedy tokens agree, max relative logit error %.2e", ft, worst)
	}
}

// TestExportRefuses: what toy export cannot do well is an error before anything is written.
func TestExportRefuses(t *testing.T) {
	dir := t.TempDir()
	// Rows of 96: no k-quant super-block divides any matrix, so a k-quant mix would hold
	// nothing but fallbacks.
	narrow := transformertest.WriteTiny(t, transformertest.TinyArch("smollm2"), ggml.F32, 1)
	out := filepath.Join(dir, "out.gguf")
	_, err := Export(narrow, out, ExportOptions{Type: FileTypeQ4_K_M})
	assert.ErrorContains(t, err, "no converted tensor has rows that split into q4_K's 256-value super-blocks")
	_, err = Export(narrow, out, ExportOptions{Type: FileTypeQ4_K_M, Pure: true})
	assert.ErrorContains(t, err, "not a multiple of q4_K's block of 256 (a pure export has no fallback)")
	// Rows of 80: no 32-value block divides them, and llama-quantize has no fallback there.
	odd := transformertest.TinyArch("llama")
	odd.DModel, odd.NHeads, odd.NKVHeads, odd.HeadDimK, odd.HeadDimV, odd.RopeDims, odd.DFF = 80, 5, 5, 16, 16, 16, 96
	oddPath := transformertest.WriteTiny(t, odd, ggml.F32, 1)
	_, err = Export(oddPath, out, ExportOptions{Type: FileTypeQ8_0})
	assert.ErrorContains(t, err, "has rows of 80 values, which q8_0's blocks of 32 do not divide")
	_, err = Export(narrow, out, ExportOptions{Type: FileType(4)})
	assert.ErrorContains(t, err, "does not write file type 4")
	assert.NoFileExists(t, out)
	// A directory where the file should go.
	require.NoError(t, os.Mkdir(out, 0o755))
	_, err = Export(narrow, out, ExportOptions{Type: FileTypeQ8_0})
	assert.ErrorContains(t, err, "is a directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing but the directory")
}

// FuzzChooseTypes: whatever the tensor names, shapes and file type, chooseTypes either refuses
// or gives each tensor a type whose blocks divide its rows, leaves the tensors it does not
// convert as they are, and never panics.
func FuzzChooseTypes(f *testing.F) {
	f.Add("blk.3.attn_v.weight", int64(576), int64(192), uint8(15), uint8(8), false)
	f.Add("output.weight", int64(200), int64(64), uint8(2), uint8(1), false)
	f.Add("blk.1.ffn_down_exps.weight", int64(256), int64(512), uint8(17), uint8(8), true)
	f.Add("token_embd.weight", int64(96), int64(48), uint8(18), uint8(0), true)
	f.Fuzz(func(t *testing.T, name string, ne0, ne1 int64, ft, experts uint8, pure bool) {
		if ne0 < 1 || ne1 < 1 || ne0 > 1<<20 || ne1 > 1<<20 {
			return
		}
		ts := []gguffile.TensorInfo{
			{Name: name, Type: uint32(ggml.F32), NDims: 2, Ne: [4]int64{ne0, ne1, 1, 1}},
			{Name: "blk.0.attn_norm.weight", Type: uint32(ggml.F32), NDims: 1, Ne: [4]int64{ne0, 1, 1, 1}},
			{Name: "blk.0.ffn_down.weight", Type: uint32(ggml.F16), NDims: 2, Ne: [4]int64{256, ne0, 1, 1}},
		}
		h := quantHParams{arch: "llama", layers: 4, heads: 4, kvHeads: 2, experts: int(experts % 9)}
		choices, err := chooseTypes(ts, h, FileType(ft%40), pure)
		if _, ok := fileTypes[FileType(ft%40)]; !ok || err != nil {
			return
		}
		require.Len(t, choices, len(ts))
		assert.Equal(t, ggml.F32, choices[1].typ, "a norm is not converted")
		for i, c := range choices {
			assert.Zero(t, ts[i].Ne[0]%int64(ggml.BlockSize(c.typ)), "%s: %s does not divide rows of %d", ts[i].Name, ggml.TypeName(c.typ), ts[i].Ne[0])
		}
	})
}
