package training

import (
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

// TestFullFinetuneFromGGUF: a Model made from a GGUF (FromGGUF) computes the GGUF model's
// logits exactly (f32) and within rounding (q8_0, dequantized); a step trains every weight but
// the frozen embeddings; its checkpoint keeps the source's architecture and decodes with the
// training forward's logits.
func TestFullFinetuneFromGGUF(t *testing.T) {
	be := newBackend(t)
	for _, c := range []struct {
		variant string
		typ     ggml.Type
	}{{"qwen3", ggml.F32}, {"llama", ggml.Q8_0}, {"gpt2", ggml.F32}} {
		t.Run(c.variant+"/"+ggml.TypeName(c.typ), func(t *testing.T) {
			a := transformertest.TinyArch(c.variant)
			src := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, c.typ, 3), decoding.ModelOptions{Backend: be})
			m, err := FromGGUF(src, be)
			require.NoError(t, err)
			defer m.Close()
			const T = 8
			seq := transformertest.RandomTokens(rand.New(rand.NewPCG(1, 2)), T+1, a.Vocab)
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
			if c.typ == ggml.F32 {
				assert.Equal(t, logits(Frozen{src}), logits(m), "the same weights, the same graph")
			}
			embd, err := m.w.TokEmbd.F32()
			require.NoError(t, err)
			before := map[string][]float32{}
			for _, w := range m.Weights() {
				before[w.Name()], err = w.F32()
				require.NoError(t, err)
			}
			m.FreezeEmbeddings()
			tr, err := NewTrainer(m, T, 1)
			require.NoError(t, err)
			step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, 1 / (1 - 0.9), 1 / (1 - 0.999)}
			_, err = tr.Step([][]int32{seq}, step, step)
			require.NoError(t, err)
			tr.Close()
			for _, w := range m.Weights() {
				after, err := w.F32()
				require.NoError(t, err)
				if w == m.w.TokEmbd || m.roles[w] == transformer.RoleRopeFreqs {
					assert.Equal(t, before[w.Name()], after, "%s is frozen", w.Name())
				} else {
					assert.NotEqual(t, before[w.Name()], after, "%s trains", w.Name())
				}
			}
			after, err := m.w.TokEmbd.F32()
			require.NoError(t, err)
			assert.Equal(t, embd, after)

			path := filepath.Join(t.TempDir(), "full.gguf")
			require.NoError(t, m.Save(path, nil))
			saved := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
			assert.Equal(t, a, saved.Arch, "the checkpoint keeps the source's architecture")
			trained := logits(m)
			got, err := decodingtest.NewDecoder(t, saved, decoding.DecoderOptions{KVType: decoding.KVF32}).Logits(seq[:T])
			require.NoError(t, err)
			want := make([][]float64, T)
			for i := range want {
				for _, v := range trained[i*a.Vocab : (i+1)*a.Vocab] {
					want[i] = append(want[i], float64(v))
				}
			}
			assert.Less(t, transformertest.RelErr(got, want), 1e-3)
		})
	}
	_, err := FromGGUF(decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("gemma2"), ggml.F32, 1), decoding.ModelOptions{Backend: be}), be)
	assert.ErrorContains(t, err, "no backward")
}

// TestWarmStart: the donor's token embeddings are copied into a new model; a donor of another
// width is refused naming both widths.
func TestWarmStart(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("smollm2")
	donor := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, ggml.Q8_0, 4), decoding.ModelOptions{Backend: be})
	c := tinyConfig(t, true, false)
	c.Vocab, c.DModel, c.NHeads, c.NKVHeads = a.Vocab, a.DModel, 4, 2
	require.NoError(t, transformer.Validate(c))
	m, err := New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	require.NoError(t, m.WarmStart(donor))
	got, err := m.w.TokEmbd.F32()
	require.NoError(t, err)
	assert.Equal(t, decodingtest.Dequantize(t, donor.TokEmbd), got)

	c.DModel = a.DModel * 2
	wide, err := New(c, be)
	require.NoError(t, err)
	defer wide.Close()
	assert.ErrorContains(t, wide.WarmStart(donor), "width 96, the model's d_model is 192")
}

// TestHoldEmbeddings: while a trainer holds the embeddings, steps leave them as they are and
// train the other weights, and their AdamW moments follow the gradients; released, they train.
func TestHoldEmbeddings(t *testing.T) {
	be := newBackend(t)
	m, err := New(tinyConfig(t, true, false), be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	tr, err := NewTrainer(m, 8, 2)
	require.NoError(t, err)
	defer tr.Close()
	rng := rand.New(rand.NewPCG(61, 62))
	seqs := [][]int32{transformertest.RandomTokens(rng, 9, m.Arch.Vocab), transformertest.RandomTokens(rng, 9, m.Arch.Vocab)}
	step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	values := func(w *ggml.Tensor) []float32 {
		v, err := w.F32()
		require.NoError(t, err)
		return v
	}
	emb, q := m.w.TokEmbd, m.w.Layers[0].Wq
	embBefore, qBefore := values(emb), values(q)
	tr.HoldEmbeddings(true)
	_, err = tr.Step(seqs, step, step)
	require.NoError(t, err)
	assert.Equal(t, embBefore, values(emb), "held embeddings do not move")
	assert.NotEqual(t, qBefore, values(q), "the rest trains")
	mom, _ := tr.Moments(emb)
	assert.NotEqual(t, make([]float32, mom.Len()), values(mom), "the held embeddings' moments follow their gradients")
	tr.HoldEmbeddings(false)
	_, err = tr.Step(seqs, step, step)
	require.NoError(t, err)
	assert.NotEqual(t, embBefore, values(emb), "released, they train")
}
