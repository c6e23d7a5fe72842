package decoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/reference"
)

// stepErr runs the prompt seq[:split] and then the rest token by token, and returns the error
// of every logits row against the reference.
// unsupportedHere reports (and logs) whether err says that the build's GPU backend lacks an op
// the test needs (ggml's CUDA flash attention has no f32 K/V; its TOP_K for mixture-of-experts
// routing is missing in this ggml): the case is then left out, on that backend only.
func unsupportedHere(t *testing.T, err error) bool {
	if ggml.BackendKind != "cpu" && errors.Is(err, ggml.ErrUnsupported) {
		t.Logf("left out on %s: %v", ggml.BackendKind, err)
		return true
	}
	return false
}

func stepErr(t *testing.T, d *Decoder, seq []int32, split int, ref [][]float64) float64 {
	d.Reset()
	var got [][]float32
	lg, err := d.Prompt(seq[:split])
	require.NoError(t, err)
	got = append(got, append([]float32(nil), lg...))
	for _, tok := range seq[split:] {
		lg, err := d.Next(tok)
		require.NoError(t, err)
		got = append(got, append([]float32(nil), lg...))
	}
	return transformertest.RelErr(got, ref[split-1:])
}

// TestDecoderMatchesReference writes a tiny GGUF of every supported architecture with f32
// weights, loads it (memory-mapped), checks the detected architecture, and compares the
// decoder's logits against the float64 reference: at every position of a prompt (Logits), and
// for a prompt fed in batches followed by token-by-token decoding across cache-length buckets,
// with the unfused and the flash attention (f32 cache), and greedy generation.
func TestDecoderMatchesReference(t *testing.T) {
	const T = 11
	for _, variant := range transformertest.AllVariants {
		t.Run(variant, func(t *testing.T) {
			a := transformertest.TinyArch(variant)
			path := transformertest.WriteTiny(t, a, ggml.F32, 1)
			m := openTiny(t, path, ModelOptions{})
			assert.False(t, m.Mapped(), "weights are read into memory unless Mmap asks")
			assert.Equal(t, a, m.Arch, "detected architecture")
			ref := &transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}
			rng := rand.New(rand.NewPCG(2, uint64(len(variant))))
			seq := transformertest.RandomTokens(rng, T, a.Vocab)
			want := ref.Logits(seq)

			// ggml's CPU GELU reads an f16 table: where an input lies near an f16 rounding
			// boundary, float rounding differences flip it by one f16 step (2⁻¹¹ relative).
			tol := 1e-4
			if a.FFN == transformer.FFNGeGLU || a.FFN == transformer.FFNGELU {
				tol = 1e-3
			}
			for _, fa := range []bool{false, true} {
				name := map[bool]string{false: "unfused", true: "flash"}[fa]
				d := newDecoder(t, m, DecoderOptions{KVType: KVF32, FlashAttention: fa, Batch: 3}, 4)
				got, err := d.Logits(seq)
				if unsupportedHere(t, err) {
					continue
				}
				require.NoError(t, err)
				e := transformertest.RelErr(got, want)
				assert.Less(t, e, tol, "%s Logits: relative error %.3g", name, e)
				s := stepErr(t, d, seq, 5, want)
				assert.Less(t, s, tol, "%s prompt+steps: relative error %.3g", name, s)
				t.Logf("%-8s %-7s max relative error: all positions %.2e, prompt+decode %.2e", variant, name, e, s)
			}

			// Greedy decoding: the reference's argmax at each step.
			d := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 4)
			prompt := seq[:3]
			lg, err := d.Prompt(prompt)
			if unsupportedHere(t, err) {
				return
			}
			require.NoError(t, err)
			out := append([]int32(nil), prompt...)
			for i := 0; i < 6; i++ {
				tok := transformertest.Argmax32(lg)
				out = append(out, tok)
				if lg, err = d.Next(tok); err != nil {
					t.Fatal(err)
				}
			}
			refOut := append([]int32(nil), prompt...)
			for i := 0; i < 6; i++ {
				r := ref.Logits(refOut)
				refOut = append(refOut, transformertest.Argmax64(r[len(r)-1]))
			}
			assert.Equal(t, refOut, out, "greedy tokens")
		})
	}
}

// kvTolerance are the documented error bounds (max |Δlogit| / max |logit|) of the cache
// types against the float64 reference with f32 weights, measured on the tiny models and
// given a margin of about 3×.
var kvTolerance = map[string]float64{
	"f16 unfused": 5e-3,
	"f16 flash":   5e-3,
	"q8_0 flash":  3e-2,
}

// TestDecoderKVCaches checks the f16 cache (unfused and flash) and the q8_0 cache (flash)
// against the reference within kvTolerance.
func TestDecoderKVCaches(t *testing.T) {
	const T = 11
	for _, variant := range []string{"llama", "qwen3", "gemma2", "qwen3moe", "gpt2"} {
		t.Run(variant, func(t *testing.T) {
			a := transformertest.TinyArch(variant)
			m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 3), ModelOptions{})
			ref := &transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}
			seq := transformertest.RandomTokens(rand.New(rand.NewPCG(4, 4)), T, a.Vocab)
			want := ref.Logits(seq)
			for _, c := range []struct {
				name string
				kv   KVCacheType
				fa   bool
			}{{"f16 unfused", KVF16, false}, {"f16 flash", KVF16, true}, {"q8_0 flash", KVQ8_0, true}} {
				d := newDecoder(t, m, DecoderOptions{KVType: c.kv, FlashAttention: c.fa, Batch: 4}, 4)
				got, err := d.Logits(seq)
				if unsupportedHere(t, err) {
					continue
				}
				require.NoError(t, err)
				e := transformertest.RelErr(got, want)
				s := stepErr(t, d, seq, 4, want)
				t.Logf("%-8s %-12s max relative error: all positions %.2e, prompt+decode %.2e", variant, c.name, e, s)
				assert.Less(t, e, kvTolerance[c.name], c.name)
				assert.Less(t, s, kvTolerance[c.name], c.name)
			}
		})
	}
}

// TestDecoderLongCache decodes past ggml.AttendBlockCells() cached cells, where a generation
// step's attention (f16 cache, unfused) goes in blocks of cells that a second node joins: a
// 1,100-token prompt, then tokens one at a time, against the float64 reference.
func TestDecoderLongCache(t *testing.T) {
	const prompt, steps = 1100, 3
	require.Greater(t, int64(prompt), ggml.AttendBlockCells(), "the prompt must outgrow a block")
	a := transformertest.TinyArch("llama")
	a.Context = prompt + steps + 8
	m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 5), ModelOptions{})
	ref := &transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}
	seq := transformertest.RandomTokens(rand.New(rand.NewPCG(5, 5)), prompt+steps, a.Vocab)
	want := ref.Logits(seq)
	d := newDecoder(t, m, DecoderOptions{KVType: KVF16}, 0)
	e := stepErr(t, d, seq, prompt, want)
	t.Logf("max relative error of the prompt's last row and %d steps: %.2e", steps, e)
	assert.Less(t, e, kvTolerance["f16 unfused"])
}

// weightTolerance are the documented error bounds of quantized weights against the reference
// computed with the same (dequantized) weights: what remains is ggml rounding the activations
// for its dot products — to f16 for f16 weights, bf16 for bf16, q8_0 (q8_K for k-quants) for
// block-quantized ones — and for gemma the GELU table. Measured worst cases over 8 seeds of
// the tiny models: f16 1.3e-3, q8_0 3.2e-2, q4_0 2.8e-2 (gemma3); bounds about 2× that.
var weightTolerance = map[ggml.Type]float64{
	ggml.F16:  3e-3,
	ggml.BF16: 2e-2,
	ggml.Q8_0: 6e-2,
	ggml.Q4_0: 6e-2,
	ggml.Q4_1: 6e-2,
	ggml.Q5_0: 6e-2,
	ggml.Q4_K: 6e-2,
	ggml.Q6_K: 6e-2,
}

// TestQuantizedWeights loads f16, bf16, q8_0, q4_0, q4_1, q5_0 (and, on a model wide enough for
// 256-element super-blocks, q4_K and q6_K) checkpoints, keeping the file's type, and checks the
// logits against the reference run on the dequantized weights, within weightTolerance; it
// also reports the error against the original f32 weights (the quantization error itself).
func TestQuantizedWeights(t *testing.T) {
	const T = 9
	for _, c := range []struct {
		variant string
		types   []ggml.Type
	}{
		{"llama", []ggml.Type{ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0}},
		{"qwen3moe", []ggml.Type{ggml.Q8_0, ggml.Q4_0}},
		{"gemma2", []ggml.Type{ggml.Q8_0}},
		{"gpt2", []ggml.Type{ggml.F16, ggml.Q8_0, ggml.Q4_0}},
		{"wide", []ggml.Type{ggml.Q4_K, ggml.Q6_K}},
	} {
		a := transformertest.TinyArch("smollm2")
		if c.variant == "wide" {
			a.DModel, a.DFF, a.NHeads, a.NKVHeads, a.HeadDimK, a.HeadDimV, a.RopeDims = 256, 256, 8, 4, 32, 32, 32
		} else {
			a = transformertest.TinyArch(c.variant)
		}
		f32path := filepath.Join(t.TempDir(), "f32.gguf")
		orig, err := transformer.WriteRandomGGUFValues(f32path, a, ggml.F32, 5, 1, true)
		require.NoError(t, err)
		origW := map[string][]float64{}
		for k, v := range orig {
			f := make([]float64, len(v))
			for i, x := range v {
				f[i] = float64(x)
			}
			origW[k] = f
		}
		seq := transformertest.RandomTokens(rand.New(rand.NewPCG(6, 6)), T, a.Vocab)
		wantOrig := (&transformertest.RefInfer{A: a, W: origW}).Logits(seq)
		for _, typ := range c.types {
			t.Run(c.variant+"/"+ggml.TypeName(typ), func(t *testing.T) {
				path := transformertest.WriteTiny(t, a, typ, 5)
				m := openTiny(t, path, ModelOptions{})
				assert.Equal(t, typ, m.WeightType(), "the file's type is kept")
				want := (&transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}).Logits(seq)
				d := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 0)
				got, err := d.Logits(seq)
				if unsupportedHere(t, err) {
					return
				}
				require.NoError(t, err)
				e, eo := transformertest.RelErr(got, want), transformertest.RelErr(got, wantOrig)
				t.Logf("%-8s %-5s max relative error vs dequantized weights %.2e, vs original f32 weights %.2e", c.variant, ggml.TypeName(typ), e, eo)
				tol := weightTolerance[typ]
				// q5_0 weights the k-quant kernel takes (repacked at load) multiply columns rounded
				// to 8 bits, as ggml's do: the bound of the quantized types.
				exactQ5 := typ == ggml.Q5_0 && !kquantWeight(typ)
				if (typ == ggml.Q8_0 || exactQ5) && !a.IsMoE() && ggml.CPUKernelsFast() && ggml.BackendKind == "cpu" {
					// toy's few-column kernel multiplies q8_0's and q5_0's values exactly, by f32
					// columns: float32 rounding alone (gemma's GELU table as with f32 weights).
					tol = 1e-4
					if a.FFN == transformer.FFNGeGLU || a.FFN == transformer.FFNGELU {
						tol = 1e-3
					}
				}
				assert.Less(t, e, tol)
			})
		}
	}
}

// TestCommonPrefix: random pairs that agree on exactly k tokens (then differ, or one ends)
// give k.
func TestCommonPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		k := rng.IntN(20)
		a := make([]int32, k+rng.IntN(5))
		for i := range a {
			a[i] = rng.Int32N(4)
		}
		b := append(append([]int32(nil), a[:k]...), make([]int32, rng.IntN(5))...)
		for i := k; i < len(b); i++ {
			b[i] = rng.Int32N(4)
		}
		if k < len(a) && k < len(b) {
			b[k] = a[k] + 1 // the first difference
		}
		assert.Equal(t, k, CommonPrefix(a, b), "%v %v", a, b)
		assert.Equal(t, k, CommonPrefix(b, a))
	}
	assert.Equal(t, 0, CommonPrefix(nil, []int32{1}))
}

// TestContextFull checks both policies: ContextError refuses what does not fit (processing
// nothing), ContextShift keeps the last half and goes on as if the sequence had started there.
func TestContextFull(t *testing.T) {
	a := transformertest.TinyArch("qwen2")
	m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 7), ModelOptions{})
	ref := &transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}
	seq := transformertest.RandomTokens(rand.New(rand.NewPCG(8, 8)), 12, a.Vocab)

	d := newDecoder(t, m, DecoderOptions{KVType: KVF32, MaxContext: 8}, 4)
	_, err := d.Prompt(seq[:8])
	require.NoError(t, err)
	_, err = d.Next(seq[8])
	assert.True(t, errors.Is(err, ErrContextFull), "%v", err)
	assert.Equal(t, 8, d.Pos(), "nothing was processed")
	_, err = d.Logits(seq[:9])
	assert.True(t, errors.Is(err, ErrContextFull), "%v", err)

	s := newDecoder(t, m, DecoderOptions{KVType: KVF32, MaxContext: 8, ContextFull: ContextShift, Batch: 3}, 4)
	_, err = s.Prompt(seq[:8])
	require.NoError(t, err)
	got, err := s.Next(seq[8])
	require.NoError(t, err)
	assert.Equal(t, 5, s.Pos(), "the last 4 tokens kept, then the new one")
	assert.Equal(t, seq[4:9], s.History())
	want := ref.Logits(seq[4:9])
	assert.Less(t, transformertest.RelErr([][]float32{got}, want[4:]), 1e-4)
	// A prompt longer than the context slides through it.
	got, err = s.Prompt(seq)
	require.NoError(t, err)
	want = ref.Logits(s.History())
	assert.Less(t, transformertest.RelErr([][]float32{got}, want[len(want)-1:]), 1e-4)
}

// TestReadNotMapped checks that the weights read into memory (the default) give the same
// logits, to the bit, as the mapped ones.
func TestReadNotMapped(t *testing.T) {
	a := transformertest.TinyArch("qwen3")
	path := transformertest.WriteTiny(t, a, ggml.Q8_0, 9)
	mapped := openTiny(t, path, ModelOptions{Mmap: true})
	read := openTiny(t, path, ModelOptions{})
	assert.True(t, mapped.Mapped())
	assert.False(t, read.Mapped())
	seq := transformertest.RandomTokens(rand.New(rand.NewPCG(1, 9)), 7, a.Vocab)
	a1, err := newDecoder(t, mapped, DecoderOptions{}, 0).Logits(seq)
	require.NoError(t, err)
	a2, err := newDecoder(t, read, DecoderOptions{}, 0).Logits(seq)
	require.NoError(t, err)
	assert.Equal(t, a1, a2)
}

// TestBadCheckpoints checks that broken files are refused with an error naming the file and
// the problem, never an abort.
func TestBadCheckpoints(t *testing.T) {
	a := transformertest.TinyArch("qwen2")
	good := transformertest.WriteTiny(t, a, ggml.F32, 11)
	keepT := func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		return ti.Name, ti.Shape(), data, ti.Type, true
	}
	open := func(path string) error {
		m, err := OpenModel(path, ModelOptions{Threads: 1})
		if err == nil {
			m.Close()
		}
		return err
	}

	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	require.NoError(t, os.WriteFile(cut, raw[:len(raw)-100], 0o644))
	assert.ErrorContains(t, open(cut), "cut.gguf")

	magic := filepath.Join(t.TempDir(), "magic.gguf")
	bad := append([]byte("GGUX"), raw[4:]...)
	require.NoError(t, os.WriteFile(magic, bad, 0o644))
	assert.ErrorContains(t, open(magic), "magic.gguf")

	unknown := transformertest.Rewrite(t, good, func(kv gguffile.KV) (gguffile.KV, bool) {
		if kv.Key == "general.architecture" {
			kv.Value = "mamba"
		}
		return kv, true
	}, keepT)
	err = open(unknown)
	assert.ErrorContains(t, err, `unknown architecture "mamba"`)
	assert.ErrorContains(t, err, "edited.gguf")

	noKey := transformertest.Rewrite(t, good, func(kv gguffile.KV) (gguffile.KV, bool) { return kv, kv.Key != "qwen2.block_count" }, keepT)
	assert.ErrorContains(t, open(noKey), `"qwen2.block_count" is missing`)

	missing := transformertest.Rewrite(t, good, nil, func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		return ti.Name, ti.Shape(), data, ti.Type, ti.Name != "blk.1.attn_k.bias"
	})
	err = open(missing)
	assert.ErrorContains(t, err, `tensor "blk.1.attn_k.bias" is missing`)
	assert.ErrorContains(t, err, "edited.gguf")

	misshapen := transformertest.Rewrite(t, good, nil, func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		ne := ti.Shape()
		if ti.Name == "blk.0.ffn_up.weight" {
			ne = []int64{ne[1], ne[0]}
		}
		return ti.Name, ne, data, ti.Type, true
	})
	assert.ErrorContains(t, open(misshapen), `tensor "blk.0.ffn_up.weight" has shape [96 128], want [128 96]`)

	f16norm := transformertest.Rewrite(t, good, nil, func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		if ti.Name == "output_norm.weight" {
			h := make([]byte, len(data)/2)
			for i := 0; i < len(h)/2; i++ {
				binary.LittleEndian.PutUint16(h[2*i:], transformertest.F32ToF16(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))))
			}
			return ti.Name, ti.Shape(), h, uint32(ggml.F16), true
		}
		return ti.Name, ti.Shape(), data, ti.Type, true
	})
	assert.ErrorContains(t, open(f16norm), `tensor "output_norm.weight" has type f16, want f32`)

	setKey := func(key string, v any) string {
		return transformertest.Rewrite(t, good, func(kv gguffile.KV) (gguffile.KV, bool) {
			if kv.Key == key {
				kv.Value = v
			}
			return kv, true
		}, keepT)
	}
	assert.ErrorContains(t, open(setKey("qwen2.attention.layer_norm_rms_epsilon", float32(-1e-6))), "layer_norm_rms_epsilon -1e-06")
	assert.ErrorContains(t, open(setKey("qwen2.rope.freq_base", float32(math.NaN()))), "rope.freq_base NaN")

	// A NaN weight makes non-finite logits: an error, not empty output.
	nanNorm := transformertest.Rewrite(t, good, nil, func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		if ti.Name == "blk.1.ffn_norm.weight" {
			data = append([]byte(nil), data...)
			binary.LittleEndian.PutUint32(data, math.Float32bits(float32(math.NaN())))
		}
		return ti.Name, ti.Shape(), data, ti.Type, true
	})
	_, err = newDecoder(t, openTiny(t, nanNorm, ModelOptions{}), DecoderOptions{}, 0).Prompt([]int32{1, 2, 3})
	assert.ErrorContains(t, err, "non-finite")

	m := openTiny(t, good, ModelOptions{})
	_, err = NewDecoder(m, DecoderOptions{KVType: KVQ8_0})
	assert.ErrorContains(t, err, "needs flash attention")
	d := newDecoder(t, m, DecoderOptions{}, 0)
	_, err = d.Prompt([]int32{1, int32(a.Vocab)})
	assert.ErrorContains(t, err, fmt.Sprintf("token %d (at 1) is outside the vocabulary 0..%d of %s", a.Vocab, a.Vocab-1, good))
	_, err = d.Prompt(nil)
	assert.Error(t, err)
}

// TestDetectFlags spells out the flags detected for each architecture.
func TestDetectFlags(t *testing.T) {
	for _, variant := range []string{"gemma2", "gemma3", "mistral", "qwen3moe"} {
		a := transformertest.TinyArch(variant)
		var sliding []string
		for il := 0; il < a.NLayers; il++ {
			if a.IsSliding(il) {
				sliding = append(sliding, fmt.Sprint(il))
			}
		}
		switch variant {
		case "gemma2":
			assert.Equal(t, "0 2", strings.Join(sliding, " "))
		case "gemma3":
			assert.Equal(t, "0 1 2 3 4 6", strings.Join(sliding, " "))
			assert.Equal(t, float32(10000), a.Rope(0).FreqBase)
			assert.Equal(t, float32(1000000), a.Rope(5).FreqBase)
			assert.Equal(t, float32(0.25), a.Rope(5).FreqScale)
			assert.Equal(t, float32(1), a.Rope(6).FreqScale)
		case "mistral":
			assert.Equal(t, "0 1", strings.Join(sliding, " "))
		case "qwen3moe":
			assert.Empty(t, sliding)
			assert.True(t, a.IsMoE())
		}
	}
}

// TestBenchRuns runs the benchmark helper on a tiny model.
func TestBenchRuns(t *testing.T) {
	path := transformertest.WriteTiny(t, transformertest.TinyArch("smollm2"), ggml.F16, 1)
	r, err := BenchStats(path, 16, 8, 1, BenchOptions{Reps: 2})
	require.NoError(t, err)
	assert.Greater(t, r.PP.Mean, 0.0)
	assert.Greater(t, r.TG.Mean, 0.0)
	assert.Len(t, r.TG.Samples, 2)
	t.Log(r)

	// After a filled cache (llama-bench's -d), and a depth the context cannot hold.
	r, err = BenchStats(path, 4, 4, 1, BenchOptions{Reps: 1, Depth: 40})
	require.NoError(t, err)
	assert.Contains(t, r.String(), "pp4 @ d40")
	assert.Contains(t, r.String(), "tg4 @ d40")
	_, err = BenchStats(path, 4, 30, 1, BenchOptions{Reps: 1, Depth: 40})
	require.ErrorContains(t, err, "do not fit")

	// A test of no tokens is not run and not named, as llama-bench's -p 0.
	r, err = BenchStats(path, 0, 4, 1, BenchOptions{Reps: 1, Depth: 8})
	require.NoError(t, err)
	assert.NotRegexp(t, `\bpp\d`, r.String())
	assert.Contains(t, r.String(), "tg4 @ d8")
}

// recordingEngine is a benchEngine that records what it is asked to do.
type recordingEngine struct{ calls []string }

func (e *recordingEngine) Reset() error { e.calls = append(e.calls, "reset"); return nil }

func (e *recordingEngine) Eval(tokens []int32) error {
	e.calls = append(e.calls, fmt.Sprintf("eval %d", len(tokens)))
	return nil
}

// TestBenchDepth: the prompt and generation tests start from an empty cache filled with the
// depth's tokens, and time only their own.
func TestBenchDepth(t *testing.T) {
	e := &recordingEngine{}
	_, err := promptRate(e, make([]int32, 7), make([]int32, 3))
	require.NoError(t, err)
	assert.Equal(t, []string{"reset", "eval 7", "eval 3"}, e.calls)
	e.calls = nil
	steps, err := generateSteps(e, make([]int32, 5), make([]int32, 2))
	require.NoError(t, err)
	assert.Len(t, steps, 2)
	assert.Equal(t, []string{"reset", "eval 5", "eval 1", "eval 1"}, e.calls)
	e.calls = nil
	_, err = generateRate(e, nil, make([]int32, 2))
	require.NoError(t, err)
	assert.Equal(t, []string{"reset", "eval 1", "eval 1"}, e.calls)
}

// TestSortedTopK: the argsort route to the experts (used where the backend lacks TOP_K, as
// ggml's CUDA backend does) gives the logits of the TOP_K route.
func TestSortedTopK(t *testing.T) {
	for _, variant := range []string{"qwen3moe", "qwen2moe"} {
		t.Run(variant, func(t *testing.T) {
			a := transformertest.TinyArch(variant)
			m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 7), ModelOptions{})
			seq := transformertest.RandomTokens(rand.New(rand.NewPCG(8, 8)), 9, a.Vocab)
			var logits [2][][]float32
			for i, sorted := range []bool{false, true} {
				d := newDecoder(t, m, DecoderOptions{KVType: KVF32, Batch: 4}, 4)
				d.sortTopK = sorted
				got, err := d.Logits(seq)
				require.NoError(t, err)
				logits[i] = got
			}
			want := make([][]float64, len(logits[0]))
			for i, row := range logits[0] {
				want[i] = make([]float64, len(row))
				for j, v := range row {
					want[i][j] = float64(v)
				}
			}
			assert.Less(t, transformertest.RelErr(logits[1], want), 1e-6)
		})
	}
}

// TestF16Embeddings: the f16 copy of token_embd, which GPU backends gather from where they
// cannot gather its type (ggml's CUDA backend and the k-quants), holds exactly ggml's
// dequantized values rounded to f16, and gives the logits of gathering from token_embd itself
// within 2e-2: the quantized products round their activations (to q8_K or q8_0), which turns
// the f16 rounding of an embedding (≤ 2⁻¹¹) into up to 7e-3 in the logits (observed).
func TestF16Embeddings(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	a.DModel, a.DFF, a.NHeads, a.NKVHeads, a.HeadDimK, a.HeadDimV, a.RopeDims = 256, 256, 8, 4, 32, 32, 32
	seq := transformertest.RandomTokens(rand.New(rand.NewPCG(9, 9)), 9, a.Vocab)
	for _, typ := range []ggml.Type{ggml.Q4_K, ggml.Q6_K, ggml.Q8_0} {
		t.Run(ggml.TypeName(typ), func(t *testing.T) {
			path := transformertest.WriteTiny(t, a, typ, 11)
			direct := openTiny(t, path, ModelOptions{})
			copied := openTiny(t, path, ModelOptions{f16Embeddings: true})
			require.Equal(t, typ, direct.TokEmbd.Type())
			assert.Equal(t, ggml.F16, copied.EmbLookup.Type(), "the decoder gathers from the f16 copy")
			if ggml.BackendKind == "cpu" {
				assert.Same(t, direct.TokEmbd, direct.EmbLookup, "the CPU gathers every type itself")
			}
			bits, err := copied.EmbLookup.ReadBytes()
			require.NoError(t, err)
			for i, v := range dequantize(t, direct.TokEmbd) {
				want := reference.F32ToF16(v)
				if got := uint16(bits[2*i]) | uint16(bits[2*i+1])<<8; got != want {
					t.Fatalf("f16 copy, value %d: %#04x, want %#04x (%g)", i, got, want, v)
				}
			}
			logits := func(m *GGUFModel) [][]float32 {
				d := newDecoder(t, m, DecoderOptions{KVType: KVF32, Batch: 4}, 4)
				got, err := d.Logits(seq)
				if unsupportedHere(t, err) {
					t.SkipNow()
				}
				require.NoError(t, err)
				return got
			}
			want := logits(direct)
			ref := make([][]float64, len(want))
			for i, row := range want {
				ref[i] = make([]float64, len(row))
				for j, v := range row {
					ref[i][j] = float64(v)
				}
			}
			e := transformertest.RelErr(logits(copied), ref)
			t.Logf("%s: f16 copy vs direct gather: max relative error %.2e", ggml.TypeName(typ), e)
			assert.Less(t, e, 2e-2)
		})
	}
}

// TestNonFinite: NonFinite finds the first NaN or infinity, and nothing among finite values
// (the largest and the subnormal ones included), against math.IsNaN and math.IsInf.
func TestNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	vals := make([]float32, 1000)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30)))
	}
	vals[10], vals[20], vals[30] = math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32
	assert.Equal(t, -1, NonFinite(vals))
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		at := rng.IntN(len(vals))
		orig := vals[at]
		vals[at] = bad
		want := -1
		for i, v := range vals {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				want = i
				break
			}
		}
		assert.Equal(t, want, NonFinite(vals), "%g at %d", bad, at)
		vals[at] = orig
	}
}
