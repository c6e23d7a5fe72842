package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/internal/gguffile"
)

// onlyRunDir is the one run directory under runsDir.
func onlyRunDir(t *testing.T, runsDir string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(runsDir, "*"))
	require.NoError(t, err)
	require.Len(t, dirs, 1)
	return dirs[0]
}

// runConfig is the config{} of a run's first run_start.
func runConfig(t *testing.T, dir string) map[string]any {
	t.Helper()
	evs, err := runs.ReadEvents(filepath.Join(dir, runs.EventsFile))
	require.NoError(t, err)
	raw, err := json.Marshal(evs[0].Data.(runs.RunStart).Config)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	return cfg
}

// TestTrainLengthFlags: -tokens sets the number of steps (tokens / (batch × seq), with the
// sequence length the run will use), a -tokens that is not positive or given with -steps is
// refused (exit status 2) before anything is written, as is a negative -max-text-bytes, in
// toy train and toy finetune. -max-text-bytes caps a single file (it was read whole): the
// run's tokens are those of at most that many bytes.
func TestTrainLengthFlags(t *testing.T) {
	text := clitest.WriteCorpus(t, 41)
	base := []string{"train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-batch", "2", "-eval-batches", "1", "-sample", "0", "-text", text}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tokens", "-5"}, "-tokens -5: want at least 1"},
		{[]string{"-tokens", "0"}, "-tokens 0: want at least 1"},
		{[]string{"-tokens", "320", "-steps", "3"}, "give one of them"},
		{[]string{"-max-text-bytes", "-1"}, "-max-text-bytes -1 is negative"},
	} {
		runsDir := filepath.Join(t.TempDir(), "runs")
		_, errOut, code := runToy(append(append(base, "-runs", runsDir), c.args...)...)
		assert.NotEqual(t, 0, code, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
		assert.NoDirExists(t, runsDir, "%v: refused before anything is written", c.args)
	}
	_, errOut, code := runToy("finetune", "-m", clitest.TinyCheckpoint(t), "-data", text, "-max-text-bytes", "-3", "-runs", filepath.Join(t.TempDir(), "r"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "-max-text-bytes -3 is negative")

	// -tokens 320 with batch 2 and the tiny preset's sequence (its context, 16): 10 steps.
	runsDir := t.TempDir()
	_, errOut, code = runToy(append(append(base, "-runs", runsDir), "-tokens", "320")...)
	require.Equal(t, 0, code, errOut)
	cfg := runConfig(t, onlyRunDir(t, runsDir))
	assert.EqualValues(t, 10, cfg["steps"])
	assert.EqualValues(t, 16, cfg["seq_len"])

	// One file of 40 KiB capped at 3000 bytes: the tokens of 3000 bytes at most (each token is at
	// least one byte; each part ends with one end-of-text token).
	rng := rand.New(rand.NewPCG(41, 1))
	var sb strings.Builder
	for sb.Len() < 40<<10 {
		sb.WriteString([]string{"alpha ", "beta ", "gamma ", "délta ", "€psilon\n"}[rng.IntN(5)])
	}
	one := filepath.Join(t.TempDir(), "one.txt")
	require.NoError(t, os.WriteFile(one, []byte(sb.String()), 0o644))
	runsDir = t.TempDir()
	_, errOut, code = runToy("train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-batch", "2", "-steps", "1", "-eval-batches", "1",
		"-sample", "0", "-text", one, "-max-text-bytes", "3000", "-runs", runsDir)
	require.Equal(t, 0, code, errOut)
	dir := onlyRunDir(t, runsDir)
	var tokens int64
	for _, name := range []string{"train.tok", "heldout.tok"} {
		c, err := data.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		tokens += c.Len()
		c.Close()
	}
	assert.LessOrEqual(t, tokens, int64(3000+2), "the text read is capped")
	assert.Greater(t, tokens, int64(300), "and is not empty")
}

// TestExportAndLoRAChecks: -lora-scale NaN, ±Inf, beyond float32 (1e300) or 0 is refused by
// toy export and toy generate (exit status 2) before any output; an adapter toy finetune trained
// on one base and given with another of the same shapes loads with a warning naming both
// (generate and export), and with none on its own base.
func TestExportAndLoRAChecks(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 30)), 0o644))
	runsDir := filepath.Join(dir, "runs")
	_, errOut, code := runToy("finetune", "-m", model, "-data", text, "-steps", "1", "-batch", "2", "-seq", "16",
		"-eval-batches", "1", "-runs", runsDir, "-t", "1")
	require.Equal(t, 0, code, errOut)
	adapter := filepath.Join(onlyRunDir(t, runsDir), "weights", "adapter.gguf")

	// Another base of the same shapes: the model with one weight changed.
	raw, err := os.ReadFile(model)
	require.NoError(t, err)
	hdr, err := gguffile.ReadFile(model)
	require.NoError(t, err)
	ti, ok := hdr.Tensor("blk.0.attn_q.weight")
	require.True(t, ok)
	at := hdr.DataOffset + int64(ti.Offset)
	binary.LittleEndian.PutUint32(raw[at:], math.Float32bits(0.5))
	other := filepath.Join(dir, "other.gguf")
	require.NoError(t, os.WriteFile(other, raw, 0o644))

	for _, s := range []string{"NaN", "Inf", "-Inf", "1e300", "0"} {
		out := filepath.Join(dir, "x.gguf")
		_, errOut, code := runToy("export", "-m", model, "-lora", adapter, "-lora-scale", s, "-o", out)
		assert.Equal(t, 2, code, "export -lora-scale %s: %s", s, errOut)
		assert.Contains(t, errOut, "-lora-scale")
		assert.NoFileExists(t, out)
		_, errOut, code = runToy("generate", "-m", model, "-lora", adapter, "-lora-scale", s, "-p", "func", "-n", "2", "-t", "1")
		assert.Equal(t, 2, code, "generate -lora-scale %s: %s", s, errOut)
	}

	gen := func(base string) string {
		_, errOut, code := runToy("generate", "-m", base, "-lora", adapter, "-p", "func", "-n", "2", "--temp", "0", "-t", "1")
		require.Equal(t, 0, code, errOut)
		return errOut
	}
	assert.NotContains(t, gen(model), "warning")
	warned := gen(other)
	assert.Contains(t, warned, "toy generate: warning: the LoRA adapter "+adapter+` was trained on the base "tiny.gguf"`)
	assert.Contains(t, warned, other)
	_, errOut, code = runToy("export", "-m", other, "-lora", adapter, "-o", filepath.Join(dir, "merged.gguf"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "toy export: warning: the LoRA adapter")
}

// TestCorpusTokenizerChecked: a corpus toy tokenize made records its tokenizer (version 2), and
// toy train -corpus refuses it with another -tokenizer, of the same vocabulary size (the
// fingerprint) or of another one (the size), before any run directory exists; with its own
// tokenizer it trains, and so does a corpus of the first version (no fingerprint) of the right
// size.
func TestCorpusTokenizerChecked(t *testing.T) {
	dir := t.TempDir()
	textA, textB := clitest.WriteCorpus(t, 41), clitest.WriteCorpus(t, 42)
	for _, s := range []struct{ name, vocab, text string }{{"a", "300", textA}, {"b", "300", textB}, {"small", "290", textA}} {
		_, errOut, code := runToy("tokenizer", "train", "-vocab", s.vocab, "-o", filepath.Join(dir, s.name+".gguf"), s.text)
		require.Equal(t, 0, code, errOut)
	}
	corpus := filepath.Join(dir, "a.tok")
	_, errOut, code := runToy("tokenize", "-tokenizer", filepath.Join(dir, "a.gguf"), "-o", corpus, textA)
	require.Equal(t, 0, code, errOut)
	c, err := data.Open(corpus)
	require.NoError(t, err)
	_, recorded := c.Fingerprint()
	ids := make([]int32, c.Len())
	_, err = c.ReadAt(ids, 0)
	require.NoError(t, err)
	c.Close()
	assert.True(t, recorded, "toy tokenize records the tokenizer")
	old := filepath.Join(dir, "old.tok")
	w, err := data.NewWriter(old, 2, 300)
	require.NoError(t, err)
	require.NoError(t, w.Write(ids))
	require.NoError(t, w.Close())

	train := func(corpus, tok string) (string, int, string) {
		runsDir := filepath.Join(t.TempDir(), "runs")
		_, errOut, code := runToy("train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-batch", "2", "-steps", "1", "-eval-batches", "1",
			"-sample", "0", "-corpus", corpus, "-tokenizer", filepath.Join(dir, tok+".gguf"), "-runs", runsDir)
		return errOut, code, runsDir
	}
	for _, c := range []struct{ tok, want string }{{"b", "was made with another tokenizer of 300 tokens"}, {"small", "was made with a tokenizer of 300 tokens"}} {
		errOut, code, runsDir := train(corpus, c.tok)
		assert.Equal(t, 1, code, errOut)
		assert.Contains(t, errOut, c.want)
		assert.Contains(t, errOut, c.tok+".gguf")
		assert.NoDirExists(t, runsDir)
	}
	for _, cp := range []string{corpus, old} {
		errOut, code, _ := train(cp, "a")
		assert.Equal(t, 0, code, "%s: %s", cp, errOut)
	}
}
