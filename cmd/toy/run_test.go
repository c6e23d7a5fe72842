package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
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
// trained on Go-like text at path, with the extra metadata kvs (which replace the tokenizer's
// keys of the same name).
func checkpointOf(t *testing.T, preset, path string, kvs ...transformer.KV) string {
	return checkpointWithContext(t, preset, path, 64, kvs...)
}

// checkpointWithContext is checkpointOf with a context of ctx positions.
func checkpointWithContext(t *testing.T, preset, path string, ctx int, kvs ...transformer.KV) string {
	text := strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)
	tok, err := tokenizer.Train(slices.Values([][]byte{[]byte(text)}), 300, tokenizer.TrainOptions{})
	require.NoError(t, err)
	c, err := config.LlamaPreset(preset)
	require.NoError(t, err)
	c.Vocab, c.Context = tok.VocabSize(), ctx
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	given := map[string]bool{}
	for _, kv := range kvs {
		given[kv.Key] = true
	}
	for _, kv := range tok.GGUF() {
		if !given[kv.Key] { // the caller's metadata wins over the tokenizer's own
			kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
		}
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
	require.NoError(t, applyPreset(&p, entry, "default", map[string]bool{"top-p": true}))
	assert.Equal(t, 0.2, p.Temperature)
	assert.Equal(t, 0, p.TopK)
	assert.Equal(t, sample.DefaultParams().TopP, p.TopP, "set by the user: kept")
	assert.Equal(t, 1.1, p.RepeatPenalty)
	assert.Equal(t, 32, p.RepeatLastN)
}

// TestSamplingPresets checks -sampling-preset: a preset chosen by name, its seed (unless -seed
// is given, which then counts as given so that none is drawn), a name the entry lacks (a usage
// error naming the entry's presets), and which entries may supply presets: a named preset from
// whichever entry resolved, the default only from one that names the model.
func TestSamplingPresets(t *testing.T) {
	entry := &kernels.Model{Name: "m", Presets: []kernels.Preset{
		{Name: "default", Temperature: 0.7, TopK: 40, TopP: 0.9},
		{Name: "greedy", Temperature: 0, TopK: 0, TopP: 1},
		{Name: "seeded", Temperature: 0.5, TopK: 10, TopP: 0.8, Seed: 42},
	}}
	p := sample.DefaultParams()
	set := map[string]bool{}
	require.NoError(t, presetFor(&p, entry, false, "greedy", set))
	assert.Equal(t, 0.0, p.Temperature, "a preset named by -sampling-preset applies though the entry does not name the model")

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, presetFor(&p, entry, false, "default", set))
	assert.Equal(t, sample.DefaultParams(), p, "the default preset needs an entry that names the model")
	require.NoError(t, presetFor(&p, entry, true, "default", set))
	assert.Equal(t, 0.7, p.Temperature)

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, presetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(42), p.Seed)
	assert.True(t, set["seed"], "the preset's seed counts as given: none is drawn")
	p, set = sample.DefaultParams(), map[string]bool{"seed": true}
	p.Seed = 7
	require.NoError(t, presetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(7), p.Seed, "-seed wins over the preset's")

	err := presetFor(&p, entry, true, "creative", map[string]bool{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default, greedy, seeded")
	require.Error(t, presetFor(&p, nil, false, "greedy", map[string]bool{}))
	require.NoError(t, presetFor(&p, nil, false, "default", map[string]bool{}))
}

// TestAddEOSAndPresetFlag runs generate on two checkpoints that differ only in
// tokenizer.ggml.add_eos_token: the one that adds EOS has one prompt token more (the EOS after
// the prompt, as llama.cpp tokenizes it), and -sampling-preset greedy (the llama entry's, which
// resolves for the random model by its architecture) gives what --temp 0 gives.
func TestAddEOSAndPresetFlag(t *testing.T) {
	plain := tinyCheckpoint(t)
	withEOS := checkpointOf(t, "tiny", filepath.Join(t.TempDir(), "eos.gguf"), transformer.KV{Key: tokenizer.KeyAddEOS, Value: true})
	promptTokens := func(model string) int {
		_, errOut, code := runToy("generate", "-m", model, "-p", "func main", "-n", "2", "--temp", "0", "-t", "1")
		require.Equal(t, 0, code, errOut)
		m := regexp.MustCompile(`prompt (\d+) tokens`).FindStringSubmatch(errOut)
		require.NotNil(t, m, errOut)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, promptTokens(plain)+1, promptTokens(withEOS))

	greedy, errOut, code := runToy("generate", "-m", plain, "-p", "func main", "-n", "8", "--temp", "0", "-t", "1")
	require.Equal(t, 0, code, errOut)
	preset, errOut, code := runToy("generate", "-m", plain, "-p", "func main", "-n", "8", "-sampling-preset", "greedy", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, greedy, preset)
	assert.NotContains(t, errOut, "seed", "greedy draws no seed")
	_, errOut, code = runToy("generate", "-m", plain, "-p", "func main", "-sampling-preset", "creative", "-t", "1")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "default, greedy")
}
