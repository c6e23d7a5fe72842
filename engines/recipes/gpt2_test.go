package recipes

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// tinyGPT2Scratch is tinyScratch training a GPT-2 model of the same size.
func tinyGPT2Scratch(t *testing.T, text string) Scratch {
	s := tinyScratch(t, text)
	g, err := config.Gpt2Preset("gpt2-demo")
	require.NoError(t, err)
	g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context = 320, 32, 128, 4, 2, 16
	s.GPT2 = &g
	return s
}

// TestScratchGPT2Run trains a tiny GPT-2 end to end, as toy train -preset gpt2-demo does: it
// beats the unigram baseline, logs its model{} with "arch": "gpt2", and its checkpoint loads as
// a gpt2 Model.
func TestScratchGPT2Run(t *testing.T) {
	s := tinyGPT2Scratch(t, writeText(t))
	s.Steps, s.Warmup = 150, 10
	var out bytes.Buffer
	s.Out = &out
	res, err := s.Run(context.Background())
	require.NoError(t, err, out.String())
	assert.Equal(t, 150, res.Steps)
	assert.Less(t, res.HeldOutLoss, res.UnigramLoss, "beats a unigram model")
	assert.Contains(t, out.String(), "model: custom gpt2")
	assert.NotEmpty(t, res.Sample)

	raw, err := os.ReadFile(filepath.Join(res.RunDir, runs.EventsFile))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(raw), "\n")
	var start map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(first), &start))
	var model map[string]any
	require.NoError(t, json.Unmarshal(start["model"], &model))
	assert.Equal(t, "gpt2", model["arch"])
	assert.Equal(t, 32.0, model["d_model"])
	assert.Equal(t, 1e-5, model["layer_norm_eps"])

	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, meta, err := training.Load(filepath.Join(res.RunDir, "weights", modelFile), be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, transformer.GPT2Arch, m.Arch.Name)
	assert.Equal(t, *s.GPT2, transformer.GPT2Config(&m.Arch, m.Initial))
	assert.Equal(t, "gpt2", meta["tokenizer.ggml.model"])
}

// TestScratchGPT2InterruptAndResume interrupts a GPT-2 run after step 5 of 12, resumes it
// (from a Scratch that knows nothing of GPT-2: the checkpoint says what it is) and checks
// every step's loss against an uninterrupted run's, bit for bit.
func TestScratchGPT2InterruptAndResume(t *testing.T) {
	text := writeText(t)
	full := tinyGPT2Scratch(t, text)
	res, err := full.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, res.RunDir)
	require.Len(t, want, 12)

	part := tinyGPT2Scratch(t, text)
	part.ProgressEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	part.Out = &cancelAt{text: "step 5/12", cancel: cancel}
	res1, err := part.Run(ctx)
	require.NoError(t, err)
	require.True(t, res1.Interrupted)

	resumed := DefaultScratch()
	resumed.Resume = res1.RunDir
	res2, err := resumed.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 12, res2.Steps)
	require.NotNil(t, resumed.GPT2, "the checkpoint's family")
	assert.Equal(t, *part.GPT2, *resumed.GPT2)
	_, got := events(t, res1.RunDir)
	assert.Equal(t, want, got)
}
