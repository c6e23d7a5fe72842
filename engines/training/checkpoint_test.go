package training

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

func adamParams(step int) (decay, noDecay [7]float32) {
	decay = [7]float32{3e-3, 0.9, 0.95, 1e-8, 0.1,
		float32(1 / (1 - math.Pow(0.9, float64(step+1)))), float32(1 / (1 - math.Pow(0.95, float64(step+1))))}
	noDecay = decay
	noDecay[4] = 0
	return decay, noDecay
}

// TestResumeIsBitForBit trains 6 steps straight, and 3 steps, a checkpoint (weights and
// optimizer state), a fresh model and trainer loaded from it, then 3 more: the losses and the
// final weights are identical to the bit, for a llama and a GPT-2 model.
func TestResumeIsBitForBit(t *testing.T) {
	be := newBackend(t)
	c := tinyConfig(t, false, true)
	c.InitScale = 0.1
	g := tinyGPT2(t, false)
	for _, family := range []string{transformer.Arch, transformer.GPT2Arch} {
		t.Run(family, func(t *testing.T) {
			mk := func() (*Model, error) {
				if family == transformer.GPT2Arch {
					return NewGPT2(g, be)
				}
				return New(c, be)
			}
			testResume(t, be, mk, c.Vocab)
		})
	}
}

// tinyGPT2 is a GPT-2 configuration of tinyConfig's size.
func tinyGPT2(t *testing.T, tied bool) config.Gpt2 {
	g := config.DefaultGpt2()
	g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context = 11, 8, 12, 4, 2, 8
	g.TiedOutput, g.InitScale, g.Seed = tied, 0.1, 7
	require.NoError(t, transformer.ValidateGPT2(g))
	return g
}

func testResume(t *testing.T, be *ggml.Backend, mk func() (*Model, error), vocab int) {
	batches := make([][][]int32, 6)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range batches {
		batches[i] = randomSeqs(rng, 2, 6, vocab)
	}
	run := func(m *Model, tr *Trainer, from, to int) []float32 {
		var losses []float32
		for s := from; s < to; s++ {
			d, nd := adamParams(s)
			loss, err := tr.Step(batches[s], d, nd)
			require.NoError(t, err)
			losses = append(losses, loss)
		}
		return losses
	}

	m1, err := mk()
	require.NoError(t, err)
	defer m1.Close()
	require.NoError(t, m1.Init())
	tr1, err := NewTrainer(m1, 6, 2)
	require.NoError(t, err)
	defer tr1.Close()
	straight := run(m1, tr1, 0, 6)

	m2, err := mk()
	require.NoError(t, err)
	require.NoError(t, m2.Init())
	tr2, err := NewTrainer(m2, 6, 2)
	require.NoError(t, err)
	first := run(m2, tr2, 0, 3)
	dir := t.TempDir()
	model, state := filepath.Join(dir, "model.gguf"), filepath.Join(dir, "optimizer.gguf")
	require.NoError(t, m2.Save(model, []transformer.KV{{Key: "general.name", Value: "tiny"}}))
	require.NoError(t, tr2.SaveState(state, []transformer.KV{{Key: "toy.train.step", Value: uint32(3)}}))
	tr2.Close()
	m2.Close()

	m3, meta, err := Load(model, be)
	require.NoError(t, err)
	defer m3.Close()
	assert.Equal(t, "tiny", meta["general.name"])
	assert.Equal(t, m1.Initial, m3.Initial)
	assert.Equal(t, m1.Arch, m3.Arch)
	tr3, err := NewTrainer(m3, 6, 2)
	require.NoError(t, err)
	defer tr3.Close()
	sm, err := tr3.LoadState(state)
	require.NoError(t, err)
	assert.Equal(t, uint32(3), sm["toy.train.step"])
	second := run(m3, tr3, 3, 6)

	assert.Equal(t, straight, append(first, second...))
	for i, w := range m1.Weights() {
		a, err := w.F32()
		require.NoError(t, err)
		b, err := m3.Weights()[i].F32()
		require.NoError(t, err)
		require.Equal(t, a, b, w.Name())
	}
}

// TestLoadRefusesForeignAndBroken checks that a checkpoint of another architecture, a truncated
// file and a file with a misshapen tensor are refused with errors naming the problem.
func TestLoadRefusesForeignAndBroken(t *testing.T) {
	be := newBackend(t)
	dir := t.TempDir()
	var w gguffile.Writer
	require.NoError(t, w.AddKV("general.architecture", "bert"))
	foreign := filepath.Join(dir, "bert.gguf")
	require.NoError(t, w.WriteFile(foreign))
	_, _, err := Load(foreign, be)
	assert.ErrorContains(t, err, `architecture "bert"`)

	m, err := New(tinyConfig(t, true, false), be)
	require.NoError(t, err)
	defer m.Close()
	good := filepath.Join(dir, "good.gguf")
	require.NoError(t, m.Save(good, nil))
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut.gguf")
	require.NoError(t, os.WriteFile(cut, raw[:len(raw)-40], 0o644))
	_, _, err = Load(cut, be)
	assert.ErrorContains(t, err, "cut.gguf")

	f, err := gguffile.ReadFile(good)
	require.NoError(t, err)
	var bad gguffile.Writer
	for _, kv := range f.KVs {
		require.NoError(t, bad.AddKV(kv.Key, kv.Value))
	}
	for _, ti := range f.Tensors {
		ne := ti.Shape()
		if ti.Name == "blk.0.ffn_up.weight" {
			ne = []int64{ne[1], ne[0]}
		}
		require.NoError(t, bad.AddTensor(ti.Name, ti.Type, ne, raw[f.DataOffset+int64(ti.Offset):f.DataOffset+int64(ti.Offset)+ti.Size]))
	}
	misshapen := filepath.Join(dir, "misshapen.gguf")
	require.NoError(t, bad.WriteFile(misshapen))
	_, _, err = Load(misshapen, be)
	assert.ErrorContains(t, err, `tensor "blk.0.ffn_up.weight" has shape`)
}
