package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
)

func TestGenerateInspectPerplexity(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
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
	entry := &kernels.Model{Presets: []kernels.Preset{{Name: "greedy"}, {Name: "default", Sampling: config.SamplingOverlay{
		Temperature: new(0.2), TopK: new(0), TopP: new(0.9), MinP: new(0.0), RepeatPenalty: new(1.1), RepeatLastN: new(32)}}}}
	p := sample.DefaultParams()
	require.NoError(t, cli.ApplyPreset(&p, entry, "default", map[string]bool{"top-p": true}))
	assert.Equal(t, 0.2, p.Temperature)
	assert.Equal(t, 0, p.TopK)
	assert.Equal(t, sample.DefaultParams().TopP, p.TopP, "set by the user: kept")
	assert.Equal(t, 1.1, p.RepeatPenalty)
	assert.Equal(t, 32, p.RepeatLastN)
}

// TestPresetOptionsByFlag: for each sampling option with a flag, a preset that gives every
// option applies all of them but the one whose flag (or alias) the user set; one that gives
// none changes nothing; a repeat_last_n of 0 applies (the penalties off), while a repeat_penalty
// of 0 and a seed of 0 are not applied. The options are compared by their JSON keys.
func TestPresetOptionsByFlag(t *testing.T) {
	all := config.SamplingOverlay{Temperature: new(0.3), TopK: new(7), TopP: new(0.5), MinP: new(0.2), RepeatPenalty: new(1.3),
		RepeatLastN: new(0), FrequencyPenalty: new(0.4), PresencePenalty: new(-0.6), Seed: new(uint64(9))}
	entry := &kernels.Model{Name: "m", Presets: []kernels.Preset{{Name: "all", Sampling: all}, {Name: "none"}}}
	asJSON := func(p sample.Params) map[string]any {
		b, err := json.Marshal(p)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	start := sample.DefaultParams()
	start.MinP, start.RepeatLastN = 0.01, 16 // values a preset that leaves them out must keep
	want := config.Sampling(start)
	all.Apply(&want)
	preset := asJSON(sample.Params(want))
	before := asJSON(start)

	p, set := start, map[string]bool{}
	require.NoError(t, cli.ApplyPreset(&p, entry, "none", set))
	assert.Equal(t, start, p, "a preset that gives nothing")
	assert.Empty(t, set)

	flags := 0
	for _, o := range config.SamplingOptions() {
		if o.Flag == "" {
			continue
		}
		for _, name := range []string{o.Flag, o.Alias} {
			if name == "" {
				continue
			}
			flags++
			p, set := start, map[string]bool{name: true}
			require.NoError(t, cli.ApplyPreset(&p, entry, "all", set))
			got := asJSON(p)
			for key := range preset {
				switch key {
				case o.JSON:
					assert.Equal(t, before[key], got[key], "-%s set: %s kept", name, key)
				default:
					assert.Equal(t, preset[key], got[key], "-%s set: %s from the preset", name, key)
				}
			}
			if o.JSON != "seed" {
				assert.True(t, set["seed"], "-%s set: the preset's seed counts as given", name)
			}
		}
	}
	assert.Equal(t, 10, flags, "every sampling flag and -s")
	assert.Equal(t, 0, want.RepeatLastN, "repeat_last_n 0 is applied")

	zeros := &kernels.Model{Name: "m", Presets: []kernels.Preset{{Name: "zeros", Sampling: config.SamplingOverlay{
		RepeatPenalty: new(0.0), Seed: new(uint64(0)), RepeatLastN: new(0)}}}}
	p, set = start, map[string]bool{}
	require.NoError(t, cli.ApplyPreset(&p, zeros, "zeros", set))
	assert.Equal(t, start.RepeatPenalty, p.RepeatPenalty, "a repeat_penalty of 0 is not applied")
	assert.Equal(t, start.Seed, p.Seed, "a seed of 0 is not applied")
	assert.False(t, set["seed"], "nor counts as given")
	assert.Equal(t, 0, p.RepeatLastN, "a repeat_last_n of 0 is")
}

// TestSamplingPresets checks -sampling-preset: a preset chosen by name, its seed (unless -seed
// is given, which then counts as given so that none is drawn), a name the entry lacks (a usage
// error naming the entry's presets), and which entries may supply presets: a named preset from
// whichever entry resolved, the default only from one that names the model.
func TestSamplingPresets(t *testing.T) {
	entry := &kernels.Model{Name: "m", Presets: []kernels.Preset{
		{Name: "default", Sampling: config.SamplingOverlay{Temperature: new(0.7), TopK: new(40), TopP: new(0.9)}},
		{Name: "greedy", Sampling: config.SamplingOverlay{Temperature: new(0.0), TopK: new(0), TopP: new(1.0)}},
		{Name: "seeded", Sampling: config.SamplingOverlay{Temperature: new(0.5), TopK: new(10), TopP: new(0.8), Seed: new(uint64(42))}},
	}}
	p := sample.DefaultParams()
	set := map[string]bool{}
	require.NoError(t, cli.PresetFor(&p, entry, false, "greedy", set))
	assert.Equal(t, 0.0, p.Temperature, "a preset named by -sampling-preset applies though the entry does not name the model")

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, cli.PresetFor(&p, entry, false, "default", set))
	assert.Equal(t, sample.DefaultParams(), p, "the default preset needs an entry that names the model")
	require.NoError(t, cli.PresetFor(&p, entry, true, "default", set))
	assert.Equal(t, 0.7, p.Temperature)

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, cli.PresetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(42), p.Seed)
	assert.True(t, set["seed"], "the preset's seed counts as given: none is drawn")
	p, set = sample.DefaultParams(), map[string]bool{"seed": true}
	p.Seed = 7
	require.NoError(t, cli.PresetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(7), p.Seed, "-seed wins over the preset's")

	err := cli.PresetFor(&p, entry, true, "creative", map[string]bool{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default, greedy, seeded")
	require.Error(t, cli.PresetFor(&p, nil, false, "greedy", map[string]bool{}))
	require.NoError(t, cli.PresetFor(&p, nil, false, "default", map[string]bool{}))
}

// TestAddEOSAndPresetFlag runs generate on two checkpoints that differ only in
// tokenizer.ggml.add_eos_token: the one that adds EOS has one prompt token more (the EOS after
// the prompt, as llama.cpp tokenizes it), and -sampling-preset greedy (the llama entry's, which
// resolves for the random model by its architecture) gives what --temp 0 gives.
func TestAddEOSAndPresetFlag(t *testing.T) {
	plain := clitest.TinyCheckpoint(t)
	withEOS := clitest.CheckpointOf(t, "tiny", filepath.Join(t.TempDir(), "eos.gguf"), transformer.KV{Key: tokenizer.KeyAddEOS, Value: true})
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
