package training

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

var updateKeys = flag.Bool("update-keys", false, "rewrite testdata/checkpoint_keys.golden with the metadata the checkpoints hold now")

// checkpointKeysGolden lists, for each family's checkpoint, every metadata key a save writes, in
// file order, with its GGUF type and value. It was first written by the code before the
// families became one spec'd description; checkpoints of every later version must hold the
// same keys with the same types and values, so that files of either load in the other. Their
// order is not compared: no reader depends on it, and a vit checkpoint's changed when its keys
// came to be written through the core's spec.
const checkpointKeysGolden = "testdata/checkpoint_keys.golden"

// TestCheckpointKeysUnchanged saves a llama (plain, and with biases, an untied output and YaRN),
// a gpt2 and a vit checkpoint and compares the metadata each holds with the golden list (keys,
// types and values, as a set per checkpoint), then loads each back.
func TestCheckpointKeysUnchanged(t *testing.T) {
	be := newBackend(t)
	llama := config.DefaultLlama()
	llama.Vocab, llama.DModel, llama.DFF, llama.NHeads, llama.NKVHeads, llama.NLayers, llama.Context = 11, 8, 12, 4, 2, 2, 8
	llama.InitScale, llama.Seed = 0.25, 3
	yarn := llama
	yarn.TiedOutput, yarn.QKVBias, yarn.RopeBase = false, true, 5e5
	yarn.RopeScaling, yarn.RopeScaleFactor, yarn.RopeOrigContext = config.LlamaRopeScalingYarn, 4, 4
	gpt2 := config.DefaultGpt2()
	gpt2.Vocab, gpt2.DModel, gpt2.DFF, gpt2.NHeads, gpt2.NLayers, gpt2.Context = 11, 8, 12, 4, 2, 8
	gpt2.LayerNormEps, gpt2.InitScale, gpt2.Seed = 1e-6, 0.125, 9
	untied := gpt2
	untied.TiedOutput = false
	models := []struct {
		name string
		new  func() (*Model, error)
	}{
		{"llama", func() (*Model, error) { return New(llama, be) }},
		{"llama-yarn-bias-untied", func() (*Model, error) { return New(yarn, be) }},
		{"gpt2", func() (*Model, error) { return NewGPT2(gpt2, be) }},
		{"gpt2-untied", func() (*Model, error) { return NewGPT2(untied, be) }},
		{"vit", func() (*Model, error) { return NewViT(transformertest.TinyViT(), be) }},
	}
	var got strings.Builder
	dir := t.TempDir()
	for _, m := range models {
		model, err := m.new()
		require.NoError(t, err, m.name)
		require.NoError(t, model.Init())
		path := filepath.Join(dir, m.name+".gguf")
		require.NoError(t, model.Save(path, []transformer.KV{{Key: "general.name", Value: m.name}}))
		model.Close()
		fmt.Fprintf(&got, "[%s]\n", m.name)
		f, err := ggml.OpenGGUF(path)
		require.NoError(t, err)
		for _, k := range f.Keys() {
			v, err := f.Value(k)
			require.NoError(t, err)
			fmt.Fprintf(&got, "%s %T %v\n", k, v, v)
		}
		f.Close()
		back, _, err := Load(path, be)
		require.NoError(t, err, m.name)
		back.Close()
	}
	if *updateKeys {
		require.NoError(t, os.WriteFile(checkpointKeysGolden, []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile(checkpointKeysGolden)
	require.NoError(t, err)
	assert.Equal(t, keySets(string(want)), keySets(got.String()))
}

// keySets sorts the lines of each [checkpoint] section of a golden listing.
func keySets(listing string) string {
	sections := strings.SplitAfter(listing, "[")
	for i, s := range sections {
		lines := strings.Split(s, "\n")
		slices.Sort(lines[1:])
		sections[i] = strings.Join(lines, "\n")
	}
	return strings.Join(sections, "")
}
