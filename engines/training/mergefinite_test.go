package training

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// rewriteGGUF copies the GGUF file src to a new file with its metadata values passed through kv
// and its tensors' data through tensor (either may be nil), and returns the new file's path.
func rewriteGGUF(t *testing.T, src string, kv func(key string, v any) any, tensor func(name string, typ uint32, data []byte) []byte) string {
	t.Helper()
	hdr, err := gguffile.ReadFile(src)
	require.NoError(t, err)
	f, err := ggml.OpenGGUF(src)
	require.NoError(t, err)
	defer f.Close()
	var w gguffile.Writer
	for _, e := range hdr.KVs {
		v := e.Value
		if kv != nil {
			v = kv(e.Key, v)
		}
		require.NoError(t, w.AddKV(e.Key, v))
	}
	for _, ti := range hdr.Tensors {
		data, err := f.ReadTensorData(ti.Name)
		require.NoError(t, err)
		if tensor != nil {
			data = tensor(ti.Name, ti.Type, data)
		}
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Shape(), data))
	}
	out := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, w.WriteFile(out))
	return out
}

// setF32 returns a tensor editor that sets element i of the f32 tensor called name to v.
func setF32(name string, i int, v float32) func(string, uint32, []byte) []byte {
	return func(n string, _ uint32, data []byte) []byte {
		if n == name {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		return data
	}
}

// decodesFinite checks that a model loads and that its first logits are finite, as toy
// generate needs: the decoder refuses non-finite logits.
func decodesFinite(t *testing.T, path string) {
	t.Helper()
	m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	d, err := decoding.NewDecoder(m, decoding.DecoderOptions{MaxContext: 8})
	require.NoError(t, err)
	defer d.Close()
	_, err = d.Logits([]int32{1, 2, 3})
	require.NoError(t, err, "%s decodes", path)
}

// TestMergeRefusesNonFinite: toy export never writes a model generate would refuse. A scale
// that is NaN or infinite (or beyond float32, which makes it infinite), an adapter holding a NaN
// or an alpha that is NaN or infinite are refused when the adapter is loaded (for generate and
// serve too); a base holding a NaN in a copied tensor or in an adapted one is refused with the
// tensor's name; merged or converted values beyond f16's range (or, through their f16 scales,
// a block type's) are clamped to ±65504 with a warning naming the tensor, and the result
// decodes; one whose finite weights still overflow the activations is not written. Without the
// clamp an f16 or q4_0 conversion of a weight of 1e6 was infinite.
func TestMergeRefusesNonFinite(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	a.DModel, a.NHeads, a.NKVHeads, a.DFF = 64, 4, 2, 64 // rows of whole q4_0 blocks
	base := transformertest.WriteTiny(t, a, ggml.F32, 5)
	m := decodingtest.OpenTiny(t, base, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 4, Targets: []string{"q", "v"}})
	require.NoError(t, err)
	defer ad.Close()
	randomizeAdapter(t, ad, rand.New(rand.NewPCG(41, 7)))
	adapter := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(adapter, nil))
	out := func() string { return filepath.Join(t.TempDir(), "out.gguf") }

	ok := out()
	require.NoError(t, decoding.MergeLoRA(base, []decoding.LoRA{{Path: adapter}}, ok, ggml.F16))
	decodesFinite(t, ok)

	big := 1e300 // as a flag's float64 becomes when the command converts it
	for _, s := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(big)} {
		err := decoding.MergeLoRA(base, []decoding.LoRA{{Path: adapter, Scale: s}}, out(), ggml.F16)
		assert.ErrorContains(t, err, "want a finite number", "scale %v", s)
		_, err = decoding.OpenModel(base, decoding.ModelOptions{Backend: be, LoRA: []decoding.LoRA{{Path: adapter, Scale: s}}})
		assert.ErrorContains(t, err, "scale", "generate refuses scale %v too", s)
	}
	for _, alpha := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		bad := rewriteGGUF(t, adapter, func(k string, v any) any {
			if k == "adapter.lora.alpha" {
				return alpha
			}
			return v
		}, nil)
		assert.ErrorContains(t, decoding.MergeLoRA(base, []decoding.LoRA{{Path: bad}}, out(), ggml.F16), "adapter.lora.alpha is", "alpha %v", alpha)
	}
	nanAdapter := rewriteGGUF(t, adapter, nil, setF32("blk.1.attn_v.weight.lora_b", 3, float32(math.NaN())))
	err = decoding.MergeLoRA(base, []decoding.LoRA{{Path: nanAdapter}}, out(), ggml.F16)
	assert.ErrorContains(t, err, "blk.1.attn_v.weight.lora_b holds a NaN")
	_, err = decoding.OpenModel(base, decoding.ModelOptions{Backend: be, LoRA: []decoding.LoRA{{Path: nanAdapter}}})
	assert.ErrorContains(t, err, "blk.1.attn_v.weight.lora_b holds a NaN")

	for _, name := range []string{"blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight"} {
		bad := rewriteGGUF(t, base, nil, setF32(name, 5, float32(math.Inf(-1))))
		for _, ads := range [][]decoding.LoRA{nil, {{Path: adapter}}} {
			err := decoding.MergeLoRA(bad, ads, out(), ggml.Q8_0)
			assert.ErrorContains(t, err, name, "%d adapters", len(ads))
			assert.ErrorContains(t, err, "not finite")
		}
	}

	// A weight of 1e6: beyond f16, and beyond what q4_0's f16 block scale (max/8) holds.
	huge := rewriteGGUF(t, base, nil, setF32("blk.0.ffn_down.weight", 7, 1e6))
	for _, typ := range []ggml.Type{ggml.F16, ggml.Q4_0, ggml.Q8_0} {
		var warnings []string
		path := out()
		require.NoError(t, decoding.MergeLoRAWith(huge, nil, path, typ, decoding.MergeOptions{Warn: func(w string) { warnings = append(warnings, w) }}))
		require.Len(t, warnings, 1, "%s", ggml.TypeName(typ))
		assert.Contains(t, warnings[0], "blk.0.ffn_down.weight: 1 values beyond ±65504")
		decodesFinite(t, path)
	}
	var warnings []string
	require.NoError(t, decoding.MergeLoRAWith(huge, nil, out(), ggml.F32, decoding.MergeOptions{Warn: func(w string) { warnings = append(warnings, w) }}))
	assert.Empty(t, warnings, "f32 holds it")
	// A finite scale large enough to take the merged weights beyond f16: clamped, with warnings,
	// but weights of 65504 everywhere overflow the activations, so the result, which would not
	// decode, is not written.
	warnings = nil
	path := out()
	err = decoding.MergeLoRAWith(base, []decoding.LoRA{{Path: adapter, Scale: 1e9}}, path, ggml.F16, decoding.MergeOptions{Warn: func(w string) { warnings = append(warnings, w) }})
	assert.ErrorContains(t, err, "the result does not decode, so it is not written")
	assert.NoFileExists(t, path)
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Empty(t, entries, "no temporary file left")
	assert.NotEmpty(t, warnings)
	for _, w := range warnings {
		assert.True(t, strings.Contains(w, "attn_q") || strings.Contains(w, "attn_v"), w)
	}
}

// TestAdapterOnAnotherBase: an adapter toy finetune wrote records its base's fingerprint
// (ModelFingerprint: the same for a copy, another for another model of the same shapes), and
// applied to another base it loads with a warning naming both; on its own base, or without the
// record (llama.cpp's adapters), with none.
func TestAdapterOnAnotherBase(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	base, other := transformertest.WriteTiny(t, a, ggml.F32, 5), transformertest.WriteTiny(t, a, ggml.F32, 6)
	copied := rewriteGGUF(t, base, nil, nil)
	fp, err := decoding.ModelFingerprint(base)
	require.NoError(t, err)
	fpCopy, err := decoding.ModelFingerprint(copied)
	require.NoError(t, err)
	fpOther, err := decoding.ModelFingerprint(other)
	require.NoError(t, err)
	assert.Equal(t, fp, fpCopy, "a copy is the same base")
	assert.NotEqual(t, fp, fpOther, "another model of the same shapes is not")
	changed, err := decoding.ModelFingerprint(rewriteGGUF(t, base, nil, setF32("output_norm.weight", 0, 3)))
	require.NoError(t, err)
	assert.NotEqual(t, fp, changed, "one weight changed at the start of a tensor")

	m := decodingtest.OpenTiny(t, base, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Targets: []string{"q"}})
	require.NoError(t, err)
	defer ad.Close()
	recorded := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(recorded, []transformer.KV{{Key: "toy.finetune.base", Value: "base.gguf"}, {Key: decoding.BaseFingerprintKey, Value: fp}}))
	plain := filepath.Join(t.TempDir(), "plain.gguf")
	require.NoError(t, ad.Save(plain, nil))
	for _, c := range []struct {
		base, adapter string
		warn          bool
	}{{base, recorded, false}, {copied, recorded, false}, {other, recorded, true}, {other, plain, false}} {
		mm, err := decoding.OpenModel(c.base, decoding.ModelOptions{Backend: be, LoRA: []decoding.LoRA{{Path: c.adapter}}})
		require.NoError(t, err)
		if c.warn {
			require.Len(t, mm.Warnings, 1)
			assert.Contains(t, mm.Warnings[0], `trained on the base "base.gguf"`)
			assert.Contains(t, mm.Warnings[0], c.base)
			assert.Contains(t, mm.Warnings[0], c.adapter)
		} else {
			assert.Empty(t, mm.Warnings, "%s on %s", c.adapter, c.base)
		}
		mm.Close()
	}
	var warnings []string
	require.NoError(t, decoding.MergeLoRAWith(other, []decoding.LoRA{{Path: recorded}}, filepath.Join(t.TempDir(), "m.gguf"), ggml.F32,
		decoding.MergeOptions{Warn: func(w string) { warnings = append(warnings, w) }}))
	assert.Len(t, warnings, 1, "toy export warns too")
}
