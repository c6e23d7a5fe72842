package recipes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// writeText makes a small directory of text files with learnable structure.
func writeText(t *testing.T) string {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "go", "x", "y"}
	for f := 0; f < 30; f++ {
		var b bytes.Buffer
		for l := 0; l < 60; l++ {
			fmt.Fprintf(&b, "%s %s := %d\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), b.Bytes(), 0o644))
	}
	return dir
}

func tinyScratch(t *testing.T, text string) Scratch {
	s := DefaultScratch()
	m, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	m.Vocab, m.Context = 320, 16
	s.Model, s.Text, s.RunsDir = m, text, t.TempDir()
	s.Steps, s.Batch, s.SeqLen, s.Warmup, s.LR, s.MinLR = 12, 2, 16, 2, 5e-3, 5e-4
	s.EvalEvery, s.EvalBatches, s.SampleTokens = 6, 2, 8
	return s
}

func events(t *testing.T, dir string) (types []string, losses []float64) {
	evs, err := runs.ReadEvents(filepath.Join(dir, runs.EventsFile))
	require.NoError(t, err)
	for _, e := range evs {
		types = append(types, e.Type)
		if st, ok := e.Data.(runs.Step); ok {
			losses = append(losses, st.Loss)
		}
	}
	return types, losses
}

// TestScratchRun trains a tiny model end to end and checks the run bundle: events in schema
// toy/v1, a checkpoint that loads with its tokenizer, and a held-out loss below the unigram
// baseline's.
func TestScratchRun(t *testing.T) {
	s := tinyScratch(t, writeText(t))
	s.Steps, s.Warmup = 150, 10
	var out bytes.Buffer
	s.Out = &out
	res, err := s.Run(context.Background())
	require.NoError(t, err, out.String())
	assert.Equal(t, 150, res.Steps)
	assert.Less(t, res.HeldOutLoss, res.UnigramLoss, "beats a unigram model")
	types, losses := events(t, res.RunDir)
	assert.Equal(t, runs.TypeRunStart, types[0])
	assert.Equal(t, runs.TypeRunEnd, types[len(types)-1])
	assert.Len(t, losses, 150)
	assert.Contains(t, types, runs.TypeEval)
	assert.Contains(t, out.String(), "held-out loss")

	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, meta, err := llama.Load(filepath.Join(res.RunDir, "weights", modelFile), be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, "gpt2", meta["tokenizer.ggml.model"])
	tok, err := LoadTokenizer(filepath.Join(res.RunDir, "weights", modelFile))
	require.NoError(t, err)
	assert.Equal(t, m.Cfg.Vocab, tok.VocabSize())
}

// cancelAt is an output that cancels the run once a progress line shows the given text,
// as Ctrl-C would at that moment.
type cancelAt struct {
	bytes.Buffer
	text   string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if bytes.Contains(c.Buffer.Bytes(), []byte(c.text)) {
		c.cancel()
	}
	return n, err
}

// TestScratchInterruptAndResume interrupts a run after step 5 of 12 (as Ctrl-C does), resumes
// it from its checkpoint, and checks that every step's loss equals that of an uninterrupted
// run, bit for bit.
func TestScratchInterruptAndResume(t *testing.T) {
	text := writeText(t)
	full := tinyScratch(t, text)
	res, err := full.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, res.RunDir)
	require.Len(t, want, 12)

	part := tinyScratch(t, text)
	part.ProgressEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelAt{text: "step 5/12", cancel: cancel}
	part.Out = out
	res1, err := part.Run(ctx)
	require.NoError(t, err)
	require.True(t, res1.Interrupted, out.String())
	assert.Equal(t, 5, res1.Steps)
	assert.Contains(t, out.String(), "continue with toy train -resume")
	types, _ := events(t, res1.RunDir)
	assert.Equal(t, runs.TypeRunEnd, types[len(types)-1])

	resumed := DefaultScratch()
	resumed.Resume = res1.RunDir
	res2, err := resumed.Run(context.Background())
	require.NoError(t, err)
	assert.False(t, res2.Interrupted)
	assert.Equal(t, 12, res2.Steps)
	_, got := events(t, res1.RunDir)
	assert.Equal(t, want, got)
}

// TestScratchRunStart checks the run_start a run logs: the backend stamped by the run, the
// model and training configurations with snake_case keys, and every seed.
func TestScratchRunStart(t *testing.T) {
	s := tinyScratch(t, writeText(t))
	s.Steps, s.Warmup, s.SampleTokens, s.Seed, s.Model.Seed = 3, 1, 0, 11, 5
	res, err := s.Run(context.Background())
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(res.RunDir, runs.EventsFile))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(raw), "\n")
	var start map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(first), &start))
	assert.JSONEq(t, fmt.Sprintf(`{"init":5,"data":11,"heldout":%d}`, heldOutSeed), string(start["seeds"]))
	var backend runs.Backend
	require.NoError(t, json.Unmarshal(start["backend"], &backend))
	assert.Equal(t, ggml.BackendKind, backend.Kind)
	var model, cfg map[string]any
	require.NoError(t, json.Unmarshal(start["model"], &model))
	require.NoError(t, json.Unmarshal(start["config"], &cfg))
	assert.Equal(t, 32.0, model["d_model"])
	assert.Equal(t, 5.0, model["seed"])
	assert.Equal(t, 16.0, cfg["seq_len"])
	assert.Equal(t, 11.0, cfg["seed"])
	assert.Equal(t, 0.1, cfg["adamw"].(map[string]any)["weight_decay"])
	for k := range cfg {
		assert.Regexp(t, `^[a-z0-9_]+$`, k, "config keys are snake_case")
	}
	assert.NotContains(t, start, "training")
}

// goNames marshals a struct as if it had no JSON tags (the first run_start shape's
// "training"): its keys are the Go field names, nested structs likewise.
func goNames(v reflect.Value) any {
	if v.Kind() != reflect.Struct {
		return v.Interface()
	}
	out := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Tag.Get("json") != "-" {
			out[f.Name] = goNames(v.Field(i))
		}
	}
	return out
}

// TestScratchResumeOldLog resumes a run whose events.jsonl starts with a run_start of the
// first shape ("backend":"cpu", "training" with Go field names, one "seed"), bit for bit.
func TestScratchResumeOldLog(t *testing.T) {
	text := writeText(t)
	full := tinyScratch(t, text)
	res, err := full.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, res.RunDir)

	part := tinyScratch(t, text)
	part.ProgressEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	part.Out = &cancelAt{text: "step 5/12", cancel: cancel}
	res1, err := part.Run(ctx)
	require.NoError(t, err)
	require.True(t, res1.Interrupted)

	path := filepath.Join(res1.RunDir, runs.EventsFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	first, rest, _ := strings.Cut(string(raw), "\n")
	var start map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(first), &start))
	training, err := json.Marshal(goNames(reflect.ValueOf(part)))
	require.NoError(t, err)
	old := fmt.Sprintf(`{"schema":"toy/v1","type":"run_start","run_id":%s,"time":%s,"backend":"cpu","model":%s,"training":%s,"seed":%d}`,
		start["run_id"], start["time"], start["model"], training, part.Seed)
	require.NoError(t, os.WriteFile(path, []byte(old+"\n"+rest), 0o644))
	evs, err := runs.ReadEvents(path)
	require.NoError(t, err)
	require.True(t, evs[0].Data.(runs.RunStart).Legacy)

	resumed := DefaultScratch()
	resumed.Resume = res1.RunDir
	res2, err := resumed.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 12, res2.Steps)
	assert.Equal(t, part.EvalEvery, resumed.EvalEvery, "options read from the old training{}")
	_, got := events(t, res1.RunDir)
	assert.Equal(t, want, got)
}

// TestScratchRefusesBadOptions checks the errors of impossible settings.
func TestScratchRefusesBadOptions(t *testing.T) {
	s := tinyScratch(t, writeText(t))
	s.SeqLen = 99
	_, err := s.Run(context.Background())
	assert.ErrorContains(t, err, "sequence length 99")
	s = tinyScratch(t, writeText(t))
	s.Corpus = "x.tok"
	s.Text = ""
	_, err = s.Run(context.Background())
	assert.ErrorContains(t, err, "needs the tokenizer")
	s = DefaultScratch()
	s.Resume = t.TempDir()
	_, err = s.Run(context.Background())
	assert.Error(t, err)
}

func TestEnsureHeldOut(t *testing.T) {
	doc := func(p, text string) data.Document { return data.Document{Path: p, Text: []byte(text)} }
	tr, he, err := ensureHeldOut([]data.Document{doc("a", "x"), doc("b", "y")}, nil, "dir")
	require.NoError(t, err)
	assert.Equal(t, "a", tr[0].Path)
	assert.Equal(t, "b", he[0].Path)
	tr, he, err = ensureHeldOut([]data.Document{doc("a", strings.Repeat("z", 100))}, nil, "file")
	require.NoError(t, err)
	assert.Len(t, tr[0].Text, 95)
	assert.Len(t, he[0].Text, 5)
	_, _, err = ensureHeldOut(nil, nil, "empty-dir")
	assert.ErrorContains(t, err, "empty-dir holds no text")
}
