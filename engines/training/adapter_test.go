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
	"github.com/toyml/toy/ggml"
)

// noStep is AdamW with a zero learning rate: a Step computes the loss and the gradients and
// leaves every tensor as it was.
var noStep = [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1}

// randomizeAdapter gives every A and B random values (B too, so no gradient is trivially zero)
// and returns them by name.
func randomizeAdapter(t *testing.T, ad *Adapter, rng *rand.Rand) map[string][]float32 {
	vals := map[string][]float32{}
	for _, w := range ad.Tensors() {
		v := make([]float32, w.Len())
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.2)
		}
		require.NoError(t, w.SetF32(v))
		vals[w.Name()] = v
	}
	return vals
}

// mergedRef is the float64 reference of the base with every adapter merged into its weight:
// W + scale·B·A.
func mergedRef(base map[string][]float64, a transformer.Architecture, ad *Adapter, vals map[string][]float32) *transformertest.RefInfer {
	w := map[string][]float64{}
	for k, v := range base {
		w[k] = append([]float64(nil), v...)
	}
	o := ad.Options()
	for _, t := range ad.Tensors() {
		name, ok := trimSuffix(t.Name(), ".lora_a")
		if !ok {
			continue
		}
		in, r := int(t.Ne()[0]), int(t.Ne()[1])
		b := vals[name+".lora_b"]
		transformertest.MergeLoRAPart(w[name], transformertest.LoRAPart{In: in, Out: len(b) / r, Rank: r, A: vals[name+".lora_a"], B: b}, float64(o.Alpha)/float64(o.Rank))
	}
	return &transformertest.RefInfer{A: a, W: w, ExactGELU: true} // as the training graph computes GELU
}

func trimSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// refLoss is the mean next-token cross entropy of seq (T+1 ids) under r.
func refLoss(r *transformertest.RefInfer, seq []int32) float64 {
	lg := r.Logits(seq[:len(seq)-1])
	total := 0.0
	for p, row := range lg {
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(v - mx)
		}
		total += -(row[seq[p+1]] - mx - math.Log(sum))
	}
	return total / float64(len(lg))
}

// TestAdapterGradients checks the gradient of every LoRA matrix — all seven projections, rank
// 2 — against central finite differences of the float64 reference run on the merged weights,
// on f32 bases of three architectures (relative to each entry) and on a q8_0 base (whose
// reference uses the dequantized weights; ggml also rounds to q8_0 the activations it
// multiplies with them, so there the error is bounded relative to the gradient's largest
// entry: 2%, where a wrong term would be of the order of 100%).
func TestAdapterGradients(t *testing.T) {
	be := newBackend(t)
	for _, c := range []struct {
		variant string
		typ     ggml.Type
		tol     float64
		chunk   int64 // inputGradChunk, 0 for the default
	}{{"llama", ggml.F32, 1e-2, 0}, {"qwen2", ggml.F32, 1e-2, 0}, {"qwen3", ggml.F32, 1e-2, 0}, {"gpt2", ggml.F32, 1e-2, 0}, {"smollm2", ggml.Q8_0, 2e-2, 0}, {"llama", ggml.F16, 2e-2, 0},
		{"smollm2", ggml.Q8_0, 2e-2, 7}} { // the quantized base's input gradients by ragged chunks of 7 outputs
		name := c.variant + "/" + ggml.TypeName(c.typ)
		if c.chunk > 0 {
			name += "/chunked"
		}
		t.Run(name, func(t *testing.T) {
			if c.chunk > 0 {
				defer func(n int64) { inputGradChunk = n }(inputGradChunk)
				inputGradChunk = c.chunk
			}
			a := transformertest.TinyArch(c.variant)
			m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, c.typ, 3), decoding.ModelOptions{Backend: be})
			ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"all"}})
			require.NoError(t, err)
			defer ad.Close()
			rng := rand.New(rand.NewPCG(21, 22))
			vals := randomizeAdapter(t, ad, rng)
			const T = 6
			tr, err := newTrainer(ad, T, 1, true, false)
			require.NoError(t, err)
			defer tr.Close()
			seq := transformertest.RandomTokens(rng, T+1, a.Vocab)
			loss, err := tr.Step([][]int32{seq}, noStep, noStep)
			require.NoError(t, err)
			base := decodingtest.LoadedWeights(t, m)
			lossTol := 1e-3
			if c.typ != ggml.F32 {
				lossTol = 1e-2
			}
			assert.InDelta(t, refLoss(mergedRef(base, m.Arch, ad, vals), seq), float64(loss), lossTol*math.Max(1, float64(loss)), "loss")
			for _, w := range ad.Tensors() {
				got, err := tr.grad(w)
				require.NoError(t, err)
				v := vals[w.Name()]
				maxAbs := 0.0
				for _, g := range got {
					maxAbs = math.Max(maxAbs, math.Abs(float64(g)))
				}
				worst := 0.0
				for _, i := range rng.Perm(len(v))[:3] {
					const eps = 1e-3
					orig := v[i]
					v[i] = orig + eps
					up := refLoss(mergedRef(base, m.Arch, ad, vals), seq)
					v[i] = orig - eps
					down := refLoss(mergedRef(base, m.Arch, ad, vals), seq)
					v[i] = orig
					fd := (up - down) / (2 * float64(eps))
					scale := math.Max(math.Abs(fd), 1e-2*math.Max(maxAbs, 1e-6))
					if c.typ != ggml.F32 {
						scale = math.Max(maxAbs, 1e-6) // rounding noise does not shrink with the entry
					}
					worst = math.Max(worst, math.Abs(float64(got[i])-fd)/scale)
				}
				assert.Less(t, worst, c.tol, "%s: worst relative error %.3g", w.Name(), worst)
			}
		})
	}
}

// TestFreshAdapterIsTheBase: a fresh adapter (B = 0) leaves the base model's logits exactly as
// they are; after training steps the adapter, saved and applied at load by the decoder, gives
// the logits of the training forward and of the float64 reference with the merged weights.
func TestFreshAdapterIsTheBase(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("smollm2")
	path := transformertest.WriteTiny(t, a, ggml.F16, 4)
	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}, Seed: 9})
	require.NoError(t, err)
	defer ad.Close()
	require.NoError(t, ad.Init())
	const T = 8
	rng := rand.New(rand.NewPCG(5, 6))
	seq := transformertest.RandomTokens(rng, T+1, a.Vocab)
	logits := func(x Trainable) []float32 {
		ev, err := NewEvaluator(x, T, 1)
		require.NoError(t, err)
		defer ev.Close()
		_, err = ev.Loss([][]int32{seq})
		require.NoError(t, err)
		out, err := ev.logits.F32()
		require.NoError(t, err)
		return out
	}
	assert.Equal(t, logits(Frozen{m}), logits(ad), "a fresh adapter changes nothing, to the bit")

	tr, err := NewTrainer(ad, T, 2)
	require.NoError(t, err)
	defer tr.Close()
	step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	first, err := tr.Step([][]int32{seq, seq}, step, step)
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		_, err = tr.Step([][]int32{seq, seq}, step, step)
		require.NoError(t, err)
	}
	last, err := tr.Step([][]int32{seq, seq}, noStep, noStep)
	require.NoError(t, err)
	assert.Less(t, last, first, "training lowers the loss on its batch")
	trained := logits(ad)
	assert.NotEqual(t, logits(Frozen{m}), trained, "the adapter learned something")

	adapterPath := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(adapterPath, nil))
	withLoRA := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be, LoRA: []decoding.LoRA{{Path: adapterPath}}})
	got, err := decodingtest.NewDecoder(t, withLoRA, decoding.DecoderOptions{KVType: decoding.KVF32}).Logits(seq[:T])
	require.NoError(t, err)
	want := make([][]float64, T)
	for i := range want {
		for _, v := range trained[i*a.Vocab : (i+1)*a.Vocab] {
			want[i] = append(want[i], float64(v))
		}
	}
	assert.Less(t, transformertest.RelErr(got, want), 1e-3, "the decoder with the saved adapter gives the training forward's logits")
	vals := map[string][]float32{}
	for _, w := range ad.Tensors() {
		vals[w.Name()], err = w.F32()
		require.NoError(t, err)
	}
	ref := mergedRef(decodingtest.LoadedWeights(t, m), m.Arch, ad, vals).Logits(seq[:T])
	assert.Less(t, transformertest.RelErr(got, ref), 1e-3, "and the float64 merged reference's")

	// The merged export gives the same logits without the adapter.
	for _, typ := range []ggml.Type{ggml.F32, ggml.Q8_0} {
		out := filepath.Join(t.TempDir(), "merged.gguf")
		require.NoError(t, decoding.MergeLoRA(path, []decoding.LoRA{{Path: adapterPath}}, out, typ))
		merged := decodingtest.OpenTiny(t, out, decoding.ModelOptions{Backend: be})
		assert.Equal(t, typ, merged.WeightType())
		fromMerged, err := decodingtest.NewDecoder(t, merged, decoding.DecoderOptions{KVType: decoding.KVF32}).Logits(seq[:T])
		require.NoError(t, err)
		tol := map[ggml.Type]float64{ggml.F32: 1e-3, ggml.Q8_0: 3e-2}[typ] // the tied output stays f16, whose products round activations to f16
		assert.Less(t, transformertest.RelErr(fromMerged, ref), tol, "merged into %s", ggml.TypeName(typ))
	}
}

// TestAdapterRefuses: bad options and untrainable architectures are errors.
func TestAdapterRefuses(t *testing.T) {
	be := newBackend(t)
	m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F32, 1), decoding.ModelOptions{Backend: be})
	for _, o := range []LoRAOptions{{Rank: -1}, {Alpha: float32(math.NaN())}, {Targets: []string{"qkv"}}, {Targets: []string{"gate", "x"}}} {
		_, err := NewAdapter(m, o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := NewTrainer(Frozen{m}, 4, 1)
	assert.ErrorContains(t, err, "nothing to train")
	g := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("gemma2"), ggml.F32, 1), decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(g, LoRAOptions{})
	require.NoError(t, err)
	defer ad.Close()
	_, err = NewTrainer(ad, 4, 1)
	assert.ErrorContains(t, err, "no backward")
}
