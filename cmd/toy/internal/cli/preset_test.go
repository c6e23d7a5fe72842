package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
)

// TestPresetDefaults checks that the table entry's default preset fills exactly the sampling
// flags the user did not give.
func TestPresetDefaults(t *testing.T) {
	entry := &kernels.Model{Presets: []kernels.Preset{{Name: "greedy"}, {Name: "default", Sampling: config.SamplingOverlay{
		Temperature: new(0.2), TopK: new(0), TopP: new(0.9), MinP: new(0.0), RepeatPenalty: new(1.1), RepeatLastN: new(32)}}}}
	p := sample.DefaultParams()
	require.NoError(t, ApplyPreset(&p, entry, "default", map[string]bool{"top-p": true}))
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
	require.NoError(t, ApplyPreset(&p, entry, "none", set))
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
			require.NoError(t, ApplyPreset(&p, entry, "all", set))
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
	require.NoError(t, ApplyPreset(&p, zeros, "zeros", set))
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
	require.NoError(t, PresetFor(&p, entry, false, "greedy", set))
	assert.Equal(t, 0.0, p.Temperature, "a preset named by -sampling-preset applies though the entry does not name the model")

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, PresetFor(&p, entry, false, "default", set))
	assert.Equal(t, sample.DefaultParams(), p, "the default preset needs an entry that names the model")
	require.NoError(t, PresetFor(&p, entry, true, "default", set))
	assert.Equal(t, 0.7, p.Temperature)

	p, set = sample.DefaultParams(), map[string]bool{}
	require.NoError(t, PresetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(42), p.Seed)
	assert.True(t, set["seed"], "the preset's seed counts as given: none is drawn")
	p, set = sample.DefaultParams(), map[string]bool{"seed": true}
	p.Seed = 7
	require.NoError(t, PresetFor(&p, entry, true, "seeded", set))
	assert.Equal(t, uint64(7), p.Seed, "-seed wins over the preset's")

	err := PresetFor(&p, entry, true, "creative", map[string]bool{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default, greedy, seeded")
	require.Error(t, PresetFor(&p, nil, false, "greedy", map[string]bool{}))
	require.NoError(t, PresetFor(&p, nil, false, "default", map[string]bool{}))
}
