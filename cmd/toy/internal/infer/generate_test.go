package infer

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer"
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
