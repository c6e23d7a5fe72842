package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
)

// runToy runs toy with args and returns what it wrote to standard output and standard error,
// and its exit status.
func runToy(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// tinyCheckpoint saves a small random llama model with a trained tokenizer, as toy train does.
func tinyCheckpoint(t *testing.T) string {
	return checkpointOf(t, "tiny", filepath.Join(t.TempDir(), "tiny.gguf"))
}

// checkpointOf saves a random llama model of preset's shape (a context of 64) with a tokenizer
// trained on Go-like text at path, with the extra metadata kvs.
func checkpointOf(t *testing.T, preset, path string, kvs ...llama.KV) string {
	return checkpointWithContext(t, preset, path, 64, kvs...)
}

// checkpointWithContext is checkpointOf with a context of ctx positions.
func checkpointWithContext(t *testing.T, preset, path string, ctx int, kvs ...llama.KV) string {
	text := strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)
	tok, err := tokenizer.Train(slices.Values([][]byte{[]byte(text)}), 300, tokenizer.TrainOptions{})
	require.NoError(t, err)
	c, err := config.LlamaPreset(preset)
	require.NoError(t, err)
	c.Vocab, c.Context = tok.VocabSize(), ctx
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := llama.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, llama.KV{Key: kv.Key, Value: kv.Value})
	}
	require.NoError(t, m.Save(path, kvs))
	return path
}

func TestGenerateInspectPerplexity(t *testing.T) {
	model := tinyCheckpoint(t)
	gen := func() (string, int) {
		out, _, code := runToy("generate", "-m", model, "-p", "func main", "-n", "12", "--temp", "0", "-t", "1")
		return out, code
	}
	out1, code := gen()
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out1, "func main"), out1)
	out2, _ := gen()
	assert.Equal(t, out1, out2, "greedy generation is deterministic")

	out, _, code := runToy("inspect", model)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `general.architecture                             "llama"`)
	assert.Contains(t, out, "blk.1.ffn_down.weight")

	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("if err != nil { return err }\n", 30)), 0o644))
	out, errOut, code := runToy("perplexity", "-m", model, "-f", text, "-c", "32", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^(\[\d+\]\d+\.\d{4},)+\nFinal estimate: PPL = \d+\.\d{4} over \d+ chunks of 32 tokens \(\d+ scored\)\n$`, out)

	// Bad input: errors, not crashes; a failure is status 1, a bad invocation 2.
	_, errOut, code = runToy("generate", "-m", filepath.Join(t.TempDir(), "none.gguf"), "-p", "x")
	assert.Equal(t, 1, code, errOut)
	_, errOut, code = runToy("generate", "-m", model, "-p", "x", "--temp", "-1")
	assert.Equal(t, 2, code, errOut)
	_, errOut, code = runToy("perplexity", "-m", model, "-f", text, "-c", "4096")
	assert.Equal(t, 1, code, errOut)
}

// TestPresetDefaults checks that the table entry's default preset fills exactly the sampling
// flags the user did not give.
func TestPresetDefaults(t *testing.T) {
	entry := &kernels.Model{Presets: []kernels.Preset{{Name: "greedy"}, {Name: "default", Temperature: 0.2, TopK: 0, TopP: 0.9, MinP: 0, RepeatPenalty: 1.1, RepeatLastN: 32}}}
	p := sample.DefaultParams()
	applyPreset(&p, entry, map[string]bool{"top-p": true})
	assert.Equal(t, 0.2, p.Temperature)
	assert.Equal(t, 0, p.TopK)
	assert.Equal(t, sample.DefaultParams().TopP, p.TopP, "set by the user: kept")
	assert.Equal(t, 1.1, p.RepeatPenalty)
	assert.Equal(t, 32, p.RepeatLastN)
}
