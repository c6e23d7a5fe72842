package recipes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
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
	m, meta, err := training.Load(filepath.Join(res.RunDir, "weights", modelFile), be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, "gpt2", meta["tokenizer.ggml.model"])
	tok, err := LoadTokenizer(filepath.Join(res.RunDir, "weights", modelFile))
	require.NoError(t, err)
	assert.Equal(t, m.Arch.Vocab, tok.VocabSize())
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
// "training"): its keys are the Go field names, nested structs likewise, and the fields of an
// embedded struct (an option group) at its own level, as encoding/json writes them.
func goNames(v reflect.Value) any {
	if v.Kind() != reflect.Struct {
		return v.Interface()
	}
	out := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, goNames(v.Field(i)).(map[string]any))
		case f.Tag.Get("json") != "-" && f.IsExported():
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

func TestEnsureHeldOutWhenAllHeldOut(t *testing.T) {
	doc := func(p, text string) data.Document { return data.Document{Path: p, Text: []byte(text)} }
	tr, he, err := ensureHeldOut(nil, []data.Document{doc("one.txt", strings.Repeat("z", 100))}, "one.txt")
	require.NoError(t, err)
	assert.Len(t, tr[0].Text, 95, "a single file keeps its first 95% for training")
	assert.Len(t, he[0].Text, 5, "and holds out its last 5%")
	tr, he, err = ensureHeldOut(nil, []data.Document{doc("a", "x"), doc("b", "y"), doc("c", "z")}, "dir")
	require.NoError(t, err)
	assert.Len(t, tr, 2)
	assert.Equal(t, "c", he[0].Path)
}

// TestScratchSingleFile trains on one file, whatever side of the hash split its name falls.
func TestScratchSingleFile(t *testing.T) {
	dir := writeText(t)
	var all []byte
	for f := 0; f < 30; f++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)))
		require.NoError(t, err)
		all = append(all, b...)
	}
	one := t.TempDir()
	var held, kept string
	for i := 0; held == "" || kept == ""; i++ {
		name := fmt.Sprintf("corpus%d.txt", i)
		if data.IsHeldOut(name) {
			held = name
		} else {
			kept = name
		}
	}
	for _, name := range []string{held, kept} {
		path := filepath.Join(one, name)
		require.NoError(t, os.WriteFile(path, all, 0o644))
		s := tinyScratch(t, path)
		s.Steps, s.Warmup, s.SampleTokens = 2, 1, 0
		res, err := s.Run(context.Background())
		require.NoError(t, err, name)
		assert.Equal(t, 2, res.Steps)
	}
}

// TestScratchFailedStartLeavesNothing: a start that fails (bad options, missing text, a text
// too small for one window) leaves no run directory behind.
func TestScratchFailedStartLeavesNothing(t *testing.T) {
	small := filepath.Join(t.TempDir(), "small.txt")
	require.NoError(t, os.WriteFile(small, []byte(strings.Repeat("ab ", 300)), 0o644))
	for name, mod := range map[string]func(*Scratch){
		"vocab":   func(s *Scratch) { s.Model.Vocab = 64 },
		"missing": func(s *Scratch) { s.Text = filepath.Join(t.TempDir(), "nope") },
		"small":   func(s *Scratch) { s.Text, s.SeqLen, s.Model.Context = small, 64, 64 },
	} {
		s := tinyScratch(t, writeText(t))
		s.RunsDir = filepath.Join(t.TempDir(), "runs")
		mod(&s)
		_, err := s.Run(context.Background())
		require.Error(t, err, name)
		if name == "vocab" {
			assert.ErrorContains(t, err, "-vocab 257 or more")
		}
		_, statErr := os.Stat(s.RunsDir)
		assert.True(t, os.IsNotExist(statErr), "%s: %v left %s", name, err, s.RunsDir)
	}
}

// interrupted runs a tiny scratch until the progress line shows stop, as Ctrl-C would.
func interrupted(t *testing.T, s Scratch, stop string) *Result {
	s.ProgressEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Out = &cancelAt{text: stop, cancel: cancel}
	res, err := s.Run(ctx)
	require.NoError(t, err)
	require.True(t, res.Interrupted)
	return res
}

// TestScratchResumeSteps: a finished run is not resumed without more steps; -steps at or below
// the run's step, or below the warmup, is refused with an error (not a panic); an extension is
// remembered by later resumes; eval events count the steps done, as the console does.
func TestScratchResumeSteps(t *testing.T) {
	text := writeText(t)
	s := tinyScratch(t, text)
	s.Warmup = 10
	res := interrupted(t, s, "step 5/12")
	r := DefaultScratch()
	r.Resume, r.ResumeSteps = res.RunDir, 8
	_, err := r.Run(context.Background())
	assert.ErrorContains(t, err, "warmup", "8 steps cannot hold a warmup of 10")
	r = DefaultScratch()
	r.Resume, r.ResumeSteps = res.RunDir, 5
	_, err = r.Run(context.Background())
	assert.ErrorContains(t, err, "already at step 5")

	r = DefaultScratch()
	r.Resume = res.RunDir
	_, err = r.Run(context.Background())
	require.NoError(t, err)
	r = DefaultScratch()
	r.Resume = res.RunDir
	_, err = r.Run(context.Background())
	assert.ErrorContains(t, err, "the run is finished (12 of 12 steps)")

	r = DefaultScratch()
	r.Resume, r.ResumeSteps = res.RunDir, 18
	res2, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 18, res2.Steps)
	r = DefaultScratch()
	r.Resume = res.RunDir
	_, err = r.Run(context.Background())
	assert.ErrorContains(t, err, "finished (18 of 18 steps)", "the extension is remembered")

	evs, err := runs.ReadEvents(filepath.Join(res.RunDir, runs.EventsFile))
	require.NoError(t, err)
	var evals []int
	for _, e := range evs {
		if ev, ok := e.Data.(runs.Eval); ok {
			evals = append(evals, ev.Step)
		}
		if end, ok := e.Data.(runs.RunEnd); ok {
			assert.NotZero(t, end.Loss)
		}
	}
	assert.Equal(t, []int{5, 6, 12, 18}, evals, "eval steps count the steps done")
}

// TestScratchResumeKeep: a resume takes the options that do not change the run from the
// caller, and refuses the others.
func TestScratchResumeKeep(t *testing.T) {
	res := interrupted(t, tinyScratch(t, writeText(t)), "step 5/12")
	r := DefaultScratch()
	r.Resume, r.ResumeKeep = res.RunDir, []string{"lr"}
	_, err := r.Run(context.Background())
	assert.ErrorContains(t, err, "lr would change the run")
	r = DefaultScratch()
	r.Resume, r.ResumeKeep, r.Threads, r.SampleTokens = res.RunDir, []string{"threads", "sample_tokens"}, 1, 0
	out, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, r.Threads)
	assert.Empty(t, out.Sample)
	assert.Equal(t, 2, r.Batch, "the run's own batch")
}

// TestScratchCheckpointPairing: a checkpoint whose optimizer state is another step's is
// refused; the first layout (weights/model.gguf and optimizer.gguf, no manifest) still resumes,
// bit for bit.
func TestScratchCheckpointPairing(t *testing.T) {
	text := writeText(t)
	full := tinyScratch(t, text)
	resFull, err := full.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, resFull.RunDir)

	s := tinyScratch(t, text)
	s.SaveEvery = 2
	res := interrupted(t, s, "step 5/12")
	w := filepath.Join(res.RunDir, runs.WeightsDir)
	// The first layout: move the checkpoint's files up, drop the manifest.
	for _, n := range []string{modelFile, stateFile} {
		require.NoError(t, os.Rename(filepath.Join(w, "step-00000005", n), filepath.Join(w, n)))
	}
	require.NoError(t, os.RemoveAll(filepath.Join(w, "step-00000005")))
	require.NoError(t, os.Remove(filepath.Join(w, runs.CheckpointFile)))

	// Another step's optimizer state beside the model is refused.
	other := interrupted(t, tinyScratch(t, text), "step 3/12")
	st, err := os.ReadFile(filepath.Join(other.RunDir, runs.WeightsDir, "step-00000003", stateFile))
	require.NoError(t, err)
	good, err := os.ReadFile(filepath.Join(w, stateFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w, stateFile), st, 0o644))
	r := DefaultScratch()
	r.Resume = res.RunDir
	_, err = r.Run(context.Background())
	assert.ErrorContains(t, err, "are not one checkpoint")

	require.NoError(t, os.WriteFile(filepath.Join(w, stateFile), good, 0o644))
	r = DefaultScratch()
	r.Resume = res.RunDir
	res2, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 12, res2.Steps)
	_, got := events(t, res.RunDir)
	assert.Equal(t, want, got)
	_, err = os.Stat(filepath.Join(w, runs.CheckpointFile))
	assert.NoError(t, err, "the next save writes the new layout")
}

// TestScratchDistil distils a trained teacher into a student run: the run's data are the
// teacher's greedy continuations, in its token ids, of openings of the text — checked against
// the teacher's logits over each whole sequence computed at once (not by the step-by-step
// decoding that generated them) — and the student carries the teacher's tokenizer, so it can
// draft for it.
func TestScratchDistil(t *testing.T) {
	text := writeText(t)
	ts := tinyScratch(t, text)
	ts.Model.Context = 48
	ts.Steps, ts.Warmup, ts.SampleTokens = 40, 4, 0
	res, err := ts.Run(context.Background())
	require.NoError(t, err)
	teacherPath := filepath.Join(res.RunDir, "weights", modelFile)

	s := tinyScratch(t, text)
	s.Teacher, s.Generated, s.Steps, s.SampleTokens = teacherPath, 8, 4, 0
	var out bytes.Buffer
	s.Out = &out
	res, err = s.Run(context.Background())
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "teacher: 9 of 9 sequences generated")

	teacher, err := decoding.OpenModel(teacherPath, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer teacher.Close()
	dec, err := decoding.NewDecoder(teacher, decoding.DecoderOptions{})
	require.NoError(t, err)
	defer dec.Close()
	tok, err := LoadTokenizer(teacherPath)
	require.NoError(t, err)
	docs, err := data.ReadTexts(text, 0)
	require.NoError(t, err)
	var textIDs []int32
	for _, d := range docs {
		textIDs = append(append(textIDs, tok.Encode(string(d.Text), tokenizer.EncodeOptions{})...), tok.EOS())
	}
	const promptLen, seqLen = speculative.TeacherPromptTokens, 16
	for file, want := range map[string]int{trainFile: 8, heldOutFile: 1} {
		c, err := data.Open(filepath.Join(res.RunDir, file))
		require.NoError(t, err)
		ids := make([]int32, c.Len())
		_, err = c.ReadAt(ids, 0)
		c.Close()
		require.NoError(t, err)
		require.Len(t, ids, want*(promptLen+seqLen), file)
		for off := 0; off < len(ids); off += promptLen + seqLen {
			seq := ids[off : off+promptLen+seqLen]
			assert.True(t, containsRun(textIDs, seq[:promptLen]), "%s: sequence at %d opens with a run of the text's tokens", file, off)
			rows, err := dec.Logits(seq)
			require.NoError(t, err)
			for i := promptLen - 1; i < len(seq)-1; i++ {
				best := slices.Max(rows[i])
				assert.InDelta(t, best, rows[i][seq[i+1]], 1e-4, "%s: token %d of the sequence at %d is the teacher's argmax", file, i+1, off)
			}
		}
	}

	student, err := decoding.OpenModel(filepath.Join(res.RunDir, "weights", modelFile), decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer student.Close()
	assert.NoError(t, speculative.CheckVocab(teacher, student), "the student drafts for its teacher")

	for _, bad := range []struct {
		edit func(*Scratch)
		want string
	}{
		{func(s *Scratch) { s.Generated = 0 }, "needs the number of sequences"},
		{func(s *Scratch) { s.Teacher = "" }, "no teacher is given"},
		{func(s *Scratch) { s.Tokenizer = filepath.Join(t.TempDir(), "other.gguf") }, "takes its teacher's tokenizer"},
		{func(s *Scratch) { s.Teacher = filepath.Join(t.TempDir(), "missing.gguf") }, "missing.gguf"},
	} {
		s := tinyScratch(t, text)
		s.Teacher, s.Generated = teacherPath, 8
		bad.edit(&s)
		_, err := s.Run(context.Background())
		assert.ErrorContains(t, err, bad.want)
		entries, _ := os.ReadDir(s.RunsDir)
		assert.Empty(t, entries, "a refused distillation writes no run")
	}
}

// containsRun reports whether run occurs in ids as consecutive tokens.
func containsRun(ids, run []int32) bool {
	for i := 0; i+len(run) <= len(ids); i++ {
		if slices.Equal(ids[i:i+len(run)], run) {
			return true
		}
	}
	return false
}
