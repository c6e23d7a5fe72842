package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// TestBenchTrainProfile runs bench train -profile on a tiny shape: the table by op covers the
// whole step (its shares add up to 100 %) and holds the training graph's ops, and the table of
// kinds of node has the rows asked for.
func TestBenchTrainProfile(t *testing.T) {
	out, errOut, code := runToy("bench", "train", "-preset", "tiny", "-seq", "16", "-steps", "1", "-t", "1", "-ceiling=false", "-profile", "3")
	require.Equal(t, 0, code, errOut)
	_, profile, ok := strings.Cut(out, "one step node by node")
	require.True(t, ok, out)
	tables := strings.Split(profile, "  wall ms")
	require.Len(t, tables, 3, profile) // the title line, the table by op, the table by kind
	rows := func(table string) [][]string {
		var r [][]string
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			r = append(r, strings.Fields(line))
		}
		return r
	}
	share, ops := 0.0, map[string]bool{}
	for _, f := range rows(tables[1]) {
		require.GreaterOrEqual(t, len(f), 5, f)
		pct, err := strconv.ParseFloat(f[2], 64)
		require.NoError(t, err)
		share += pct
		ops[f[4]] = true
	}
	assert.InDelta(t, 100, share, 1, "shares of the step by op")
	for _, op := range []string{"MUL_MAT", "SOFT_MAX", "OPT_STEP_ADAMW", "CONT"} {
		assert.True(t, ops[op], "%s in %v", op, ops)
	}
	assert.Len(t, rows(tables[2]), 3)
}

// TestBenchTrainPresetShapes: bench train's shapes are toy train's families' presets
// (cli.TrainFamilies): every llama and gpt2 preset has its spec preset's vocabulary and context, a
// vit preset or an unknown name is refused listing the language models' presets, and the model
// bench train builds of the demo presets is the family's, with the parameters the spec's
// configuration gives.
func TestBenchTrainPresetShapes(t *testing.T) {
	for _, name := range config.LlamaPresetNames() {
		c, err := config.LlamaPreset(name)
		require.NoError(t, err)
		sh, err := presetShape(name)
		require.NoError(t, err, name)
		assert.Equal(t, [2]int{c.Vocab, c.Context}, [2]int{sh.vocab, sh.context}, name)
	}
	for _, name := range config.Gpt2PresetNames() {
		g, err := config.Gpt2Preset(name)
		require.NoError(t, err)
		sh, err := presetShape(name)
		require.NoError(t, err, name)
		assert.Equal(t, [2]int{g.Vocab, g.Context}, [2]int{sh.vocab, sh.context}, name)
	}
	for _, name := range []string{config.VitPresetNames()[0], "nonesuch"} {
		_, err := presetShape(name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "llama: "+strings.Join(config.LlamaPresetNames(), ", ")+"; gpt2: "+strings.Join(config.Gpt2PresetNames(), ", "))
	}

	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	c, _ := config.LlamaPreset("tiny")
	g, _ := config.Gpt2Preset("gpt2-demo")
	for _, want := range []struct {
		preset, arch string
		params       func() (*training.Model, error)
	}{
		{"tiny", transformer.Arch, func() (*training.Model, error) { return training.New(c, be) }},
		{"gpt2-demo", transformer.GPT2Arch, func() (*training.Model, error) { return training.NewGPT2(g, be) }},
	} {
		sh, err := presetShape(want.preset)
		require.NoError(t, err)
		m, err := sh.newModel(be)
		require.NoError(t, err, want.preset)
		ref, err := want.params()
		require.NoError(t, err)
		assert.Equal(t, want.arch, m.Arch.Name, want.preset)
		assert.Equal(t, ref.Params(), m.Params(), want.preset)
		assert.Equal(t, ref.Arch, m.Arch, want.preset)
		m.Close()
		ref.Close()
	}
}
