package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// TestDFlashCLI exercises the demo family's [dflash] declaration (kernels/models/toy-demo):
// toy kernels shows it; toy train -recipe dflash writes the declared drafter beside the model
// with the declared pairing; toy generate -dflash finds it and gives the target's greedy text;
// -draft takes precedence; a model the table pairs no drafter with, and a missing drafter, are
// errors naming why.
func TestDFlashCLI(t *testing.T) {
	dir := t.TempDir()
	// A model of the demo preset's shape (192 wide, 4 layers) named as toy train names its
	// models, so that the kernel table's toy-demo entry resolves for it.
	model := clitest.CheckpointOf(t, "demo", filepath.Join(dir, "model.gguf"), transformer.KV{Key: "general.name", Value: "toy test-run"})
	out, errOut, code := runToy("kernels", model)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "resolves to toy-demo")
	assert.Contains(t, out, "dflash: draft toy-demo-dflash.gguf, gamma 8, window 64, mask token 0, target layers [1 2]")

	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)), 0o644))
	out, errOut, code = runToy("train", "-recipe", "dflash", "-target", model, "-data", text, "-steps", "3", "-seqs", "1", "-seq", "32",
		"-anchors", "4", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "block 8, window 64, mask token 0, target layers [1 2]")
	drafter := filepath.Join(dir, "toy-demo-dflash.gguf")
	assert.Contains(t, out, "wrote "+drafter)
	assert.Regexp(t, `held out, \d+ blocks: proposals matching the target by position( \d+){7} %; a greedy verification accepts \d\.\d\d of 7 a block`, out)
	f, err := ggml.OpenGGUF(drafter)
	require.NoError(t, err)
	arch, _ := f.String("general.architecture")
	block, _ := f.Uint32("dflash.block_size")
	f.Close()
	assert.Equal(t, "dflash", arch)
	assert.Equal(t, uint32(8), block)

	greedy := []string{"generate", "-m", model, "-p", "func main", "-n", "20", "--temp", "0", "-t", "1"}
	want, errOut, code := runToy(greedy...)
	require.Equal(t, 0, code, errOut)
	got, errOut, code := runToy(append(greedy, "-dflash")...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, got)
	assert.Contains(t, errOut, "verification steps")
	_, errOut, code = runToy(append(greedy, "-dflash", "-temp", "0.8", "-seed", "2")...)
	assert.Equal(t, 0, code, errOut)

	got, errOut, code = runToy(append(greedy, "-dflash", "-draft", model)...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, got)
	assert.Contains(t, errOut, "-draft takes precedence")

	_, errOut, code = runToy(append(greedy, "-dflash", "-models-dir", t.TempDir())...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "toy-demo-dflash.gguf")

	out, errOut, code = runToy("bench", "model", "-m", model, "-dflash", drafter, "-draft", model, "-p", "4", "-n", "8", "-r", "1", "-t", "1", "-draft-n", "3")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `\| speculative \| tg8   \|   3 \|.*\| true      \|`, out)
	assert.Regexp(t, `\| dflash      \| tg8   \|   7 \|.*\| true      \|`, out)
	// A prompt from a text file, and a DFlash step verifying 3 of the block's 7 proposals.
	out, errOut, code = runToy("bench", "model", "-m", model, "-dflash", drafter, "-dflash-n", "3", "-prompt-file", text, "-p", "6", "-n", "8", "-r", "1", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `\| dflash      \| tg8   \|   3 \|.*\| true      \|`, out)
	_, errOut, code = runToy("bench", "model", "-m", model, "-dflash", drafter, "-prompt-file", filepath.Join(t.TempDir(), "none.txt"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "none.txt")

	tiny := clitest.TinyCheckpoint(t)
	_, errOut, code = runToy("generate", "-m", tiny, "-p", "func main", "-n", "4", "--temp", "0", "-t", "1", "-dflash")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "pairs no DFlash drafter")
	_, errOut, code = runToy("train", "-recipe", "dflash", "-target", model, "-data", text, "-gamma", "1")
	assert.Equal(t, 2, code, errOut)
	_, _, code = runToy("train", "-recipe", "nope")
	assert.Equal(t, 2, code)
}
