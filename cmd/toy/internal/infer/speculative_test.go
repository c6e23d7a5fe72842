package infer

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// TestGenerateDraft checks toy generate -draft: greedy, the same text as without it (the
// target as its own draft); sampling runs; a draft of another vocabulary is refused.
func TestGenerateDraft(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	base := []string{"generate", "-m", model, "-p", "func main", "-n", "20", "--temp", "0", "-t", "1"}
	want, _, code := runToy(base...)
	require.Equal(t, 0, code)
	for _, g := range []string{"1", "3", "8"} {
		for _, pMin := range []string{"0", "0.5"} {
			got, errOut, code := runToy(append(base, "-draft", model, "-draft-n", g, "-draft-p-min", pMin)...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, want, got, "γ %s p-min %s", g, pMin)
			assert.Contains(t, errOut, "verification steps")
			assert.Contains(t, errOut, "tokens/s")
		}
	}
	_, errOut, code := runToy("generate", "-m", model, "-p", "func main", "-n", "10", "--temp", "0.8", "-seed", "3", "-t", "1", "-draft", model)
	assert.Equal(t, 0, code, errOut)

	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.Vocab = 77
	other := filepath.Join(t.TempDir(), "other.gguf")
	require.NoError(t, transformer.WriteRandomGGUF(other, transformer.ArchitectureFromConfig(c), ggml.F32, 1))
	_, errOut, code = runToy(append(base, "-draft", other)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "vocabulary")
	_, _, code = runToy(append(base, "-draft", model, "-draft-n", "0")...)
	assert.Equal(t, 2, code)
	_, errOut, code = runToy(append(base, "-draft", model, "-draft-p-min", "1")...)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-draft-p-min 1")
}
