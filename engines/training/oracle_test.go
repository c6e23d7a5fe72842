package training

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/oracle"
)

// The differential oracle: llama.cpp (internal/oracle) loads the same files toy does and must
// give the same logits. Unlike the float64 reference (transformertest.RefInfer), which reimplements
// toy's reading of an architecture, llama.cpp is an independent reading of the same GGUF keys
// and tensor names, so these tests catch a key toy writes or reads differently from llama.cpp.

// oracleTol is the largest relative error between toy's and llama.cpp's logits with f32
// weights and caches: both compute in float32 with ggml, in different orders.
const oracleTol = 1e-3

// oracleQ8Tol is oracleTol for q8_0 weights: llama.cpp rounds the activations to q8_0 before
// multiplying them (ggml's integer dot products), toy's kernel for a few columns multiplies
// them in f32 (ggml.MulMatCols). Measured 6.3e-3 on TestOracleTrainedAdapter's model.
const oracleQ8Tol = 1.5e-2

func openOracle(t testing.TB, path string) *oracle.Model {
	o, err := oracle.Open(path, oracle.Options{Context: 32, Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { o.Close() })
	return o
}

// toyLogits is what toy's decoder gives for seq on the model at path (f32 cache, all positions).
func toyLogits(t *testing.T, path string, opts decoding.ModelOptions) [][]float32 {
	m := decodingtest.OpenTiny(t, path, opts)
	d := decodingtest.NewDecoder(t, m, decoding.DecoderOptions{KVType: decoding.KVF32})
	got, err := d.Logits(oracleSeq(m.Arch.Vocab))
	require.NoError(t, err)
	return got
}

func oracleSeq(vocab int) []int32 {
	return transformertest.RandomTokens(rand.New(rand.NewPCG(11, 11)), 11, vocab)
}

// oracleArch is transformertest.TinyArch(variant) within what llama.cpp reads: the variants that differ are
// adjusted here and their differences pinned by TestOracleKnownDifferences.
func oracleArch(variant string) transformer.Architecture {
	a := transformertest.TinyArch(variant)
	switch variant {
	case "llama":
		a.RopeDims = a.HeadDimK
	case "gemma2":
		a.QueryScale = float32(1 / math.Sqrt(float64(a.HeadDimK)))
	}
	return a
}

// TestOracleLogits compares toy's logits with llama.cpp's, at every position of a prompt, for a
// random f32 model of every architecture (and variant) toy decodes.
func TestOracleLogits(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	for _, variant := range transformertest.AllVariants {
		if variant == "mistral" {
			continue // llama.cpp's llama has no sliding window: TestOracleKnownDifferences
		}
		t.Run(variant, func(t *testing.T) {
			a := oracleArch(variant)
			path := transformertest.WriteTiny(t, a, ggml.F32, 5)
			transformertest.WithKVs(t, path, transformertest.NoVocab)
			got := toyLogits(t, path, decoding.ModelOptions{})
			want, err := openOracle(t, path).Logits(oracleSeq(a.Vocab))
			require.NoError(t, err)
			e := transformertest.RelErr32(got, want)
			t.Logf("%-8s toy vs llama.cpp: max relative error %.2e", variant, e)
			assert.Less(t, e, oracleTol, "toy and llama.cpp disagree on %s", variant)
		})
	}
}

// TestOracleKnownDifferences pins where toy reads a GGUF differently from llama.cpp (see
// docs/ORACLE.md), so that a change on either side shows here.
func TestOracleKnownDifferences(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	t.Run("llama partial rotary", func(t *testing.T) {
		// toy runs a llama whose rope.dimension_count is below the head size; llama.cpp
		// refuses it ("invalid n_rot") for the llama architecture.
		a := transformertest.TinyArch("llama")
		require.Less(t, a.RopeDims, a.HeadDimK)
		path := transformertest.WriteTiny(t, a, ggml.F32, 5)
		transformertest.WithKVs(t, path, transformertest.NoVocab)
		toyLogits(t, path, decoding.ModelOptions{})
		_, err := oracle.Open(path, oracle.Options{Context: 32, Threads: 1})
		assert.ErrorContains(t, err, "cannot load")
	})
	for _, c := range []struct{ variant, why string }{
		{"mistral", "toy honours llama.attention.sliding_window; llama.cpp's llama architecture ignores it"},
		{"gemma2", "toy honours gemma2.attention.query_pre_attn_scalar; llama.cpp scales queries by 1/√head_dim (1/√(d/H) for 27B) whatever the file says"},
	} {
		t.Run(c.variant, func(t *testing.T) {
			a := transformertest.TinyArch(c.variant)
			path := transformertest.WriteTiny(t, a, ggml.F32, 5)
			transformertest.WithKVs(t, path, transformertest.NoVocab)
			got := toyLogits(t, path, decoding.ModelOptions{})
			want, err := openOracle(t, path).Logits(oracleSeq(a.Vocab))
			require.NoError(t, err)
			e := transformertest.RelErr32(got, want)
			t.Logf("%s: relative error %.2e: %s", c.variant, e, c.why)
			assert.Greater(t, e, 1e-2, "toy now agrees with llama.cpp on %s: move it to TestOracleLogits and docs/ORACLE.md", c.variant)
		})
	}
}

// TestOracleCheckpoint: a checkpoint written by toy's trainer (New, Init, Save) is a model
// llama.cpp loads and runs to toy's logits, with each kind of RoPE scaling toy trains with.
// It replaces checking the file's keys by hand: llama.cpp itself reads them.
func TestOracleCheckpoint(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	for _, rope := range []config.LlamaRopeScaling{"none", "linear", "yarn"} {
		for _, tied := range []bool{false, true} {
			name := string(rope) + map[bool]string{false: "", true: "-tied"}[tied]
			t.Run(name, func(t *testing.T) {
				c := config.DefaultLlama()
				c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context = 48, 64, 96, 4, 2, 2, 16
				c.TiedOutput, c.QKVBias, c.InitScale, c.Seed = tied, !tied, 1, 3
				if rope != "none" {
					c.RopeScaling, c.RopeScaleFactor, c.RopeOrigContext = rope, 4, 4
				}
				require.NoError(t, transformer.Validate(c))
				be := newBackend(t)
				m, err := New(c, be)
				require.NoError(t, err)
				defer m.Close()
				require.NoError(t, m.Init())
				randomize(t, m, rand.New(rand.NewPCG(5, 5)))
				path := filepath.Join(t.TempDir(), "model.gguf")
				require.NoError(t, m.Save(path, transformertest.NoVocab))

				got := toyLogits(t, path, decoding.ModelOptions{})
				want, err := openOracle(t, path).Logits(oracleSeq(c.Vocab))
				require.NoError(t, err)
				e := transformertest.RelErr32(got, want)
				t.Logf("checkpoint %-11s toy vs llama.cpp: max relative error %.2e", name, e)
				assert.Less(t, e, oracleTol)
			})
		}
	}
}

// TestOracleLoRA: LoRA adapters toy applies at load (two files, one weight adapted by both,
// alpha set and not) give llama.cpp's logits with the same adapters.
func TestOracleLoRA(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	a := oracleArch("llama")
	path := transformertest.WriteTiny(t, a, ggml.F32, 1)
	transformertest.WithKVs(t, path, transformertest.NoVocab)
	rng := rand.New(rand.NewPCG(7, 7))
	d, ff, kv := a.DModel, a.DFF, a.NKVHeads*a.HeadDimK
	p1 := transformertest.WriteLoRA(t, "llama", 8, []transformertest.LoRAPart{
		transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d, d, 4),
		transformertest.RandomLoRAPart(rng, "blk.1.attn_v.weight", d, kv, 4),
		transformertest.RandomLoRAPart(rng, "blk.0.ffn_down.weight", ff, d, 4),
		transformertest.RandomLoRAPart(rng, "blk.1.ffn_up.weight", d, ff, 4),
	})
	p2 := transformertest.WriteLoRA(t, "llama", 0, []transformertest.LoRAPart{transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d, d, 2)})

	got := toyLogits(t, path, decoding.ModelOptions{LoRA: []decoding.LoRA{{Path: p1, Scale: 0.5}, {Path: p2}}})
	o := openOracle(t, path)
	plain, err := o.Logits(oracleSeq(a.Vocab))
	require.NoError(t, err)
	require.NoError(t, o.SetLoRA(p1, 0.5))
	require.NoError(t, o.SetLoRA(p2, 1))
	want, err := o.Logits(oracleSeq(a.Vocab))
	require.NoError(t, err)
	e := transformertest.RelErr32(got, want)
	t.Logf("LoRA toy vs llama.cpp: max relative error %.2e (the adapters move the logits by %.2e)", e, transformertest.RelErr32(plain, want))
	assert.Less(t, e, oracleTol)
	assert.Greater(t, transformertest.RelErr32(plain, want), 1e-2, "the adapters change llama.cpp's logits")
}

// TestOracleTrainedAdapter: an adapter trained by toy (Adapter, a few steps on a q8_0
// base), saved in llama.cpp's LoRA format, gives in llama.cpp the logits toy's decoder gives
// with it; and the merged export (MergeLoRA) gives them in llama.cpp without the adapter.
func TestOracleTrainedAdapter(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	be := newBackend(t)
	a := oracleArch("qwen2")
	path := transformertest.WriteTiny(t, a, ggml.Q8_0, 2)
	transformertest.WithKVs(t, path, transformertest.NoVocab)
	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 4, Alpha: 16, Targets: []string{"all"}, Seed: 1})
	require.NoError(t, err)
	defer ad.Close()
	require.NoError(t, ad.Init())
	tr, err := NewTrainer(ad, 8, 2)
	require.NoError(t, err)
	defer tr.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	step := [7]float32{2e-2, 0.9, 0.999, 1e-8, 0, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	for i := 0; i < 5; i++ {
		_, err := tr.Step([][]int32{transformertest.RandomTokens(rng, 9, a.Vocab), transformertest.RandomTokens(rng, 9, a.Vocab)}, step, step)
		require.NoError(t, err)
	}
	adapter := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(adapter, nil))

	got := toyLogits(t, path, decoding.ModelOptions{Backend: be, LoRA: []decoding.LoRA{{Path: adapter}}})
	o := openOracle(t, path)
	plain, err := o.Logits(oracleSeq(a.Vocab))
	require.NoError(t, err)
	require.NoError(t, o.SetLoRA(adapter, 1))
	want, err := o.Logits(oracleSeq(a.Vocab))
	require.NoError(t, err)
	assert.Less(t, transformertest.RelErr32(got, want), oracleQ8Tol, "toy's adapter in llama.cpp")
	t.Logf("toy against llama.cpp %.2e; llama.cpp with and without the adapter %.2e", transformertest.RelErr32(got, want), transformertest.RelErr32(plain, want))
	// Measured 3.2: far beyond what the tolerance above lets through.
	assert.Greater(t, transformertest.RelErr32(plain, want), 100*oracleQ8Tol, "the trained adapter changes the logits")

	merged := filepath.Join(t.TempDir(), "merged.gguf")
	require.NoError(t, decoding.MergeLoRA(path, []decoding.LoRA{{Path: adapter}}, merged, ggml.F32))
	fromMerged, err := openOracle(t, merged).Logits(oracleSeq(a.Vocab))
	require.NoError(t, err)
	assert.Less(t, transformertest.RelErr32(got, fromMerged), 2e-2, "the merged export in llama.cpp (f32 weights where the base had q8_0)")
}
