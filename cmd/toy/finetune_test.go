package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFinetuneModeUsage: flags of another mode, and both modes at once, are usage errors
// (status 2) naming the flags.
func TestFinetuneModeUsage(t *testing.T) {
	base := []string{"finetune", "-m", "base.gguf", "-data", "d.txt"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-full", "-warm-start"}, "-full and -warm-start exclude each other"},
		{[]string{"-full", "-r", "8", "-lora-targets", "all"}, "-r, -lora-targets: LoRA flags, but the mode is -full"},
		{[]string{"-warm-start", "-alpha", "8"}, "-alpha: LoRA flags, but the mode is -warm-start"},
		{[]string{"-preset", "tiny"}, "-preset: the new model's shape is for -warm-start only"},
		{[]string{"-full", "-d-model", "64", "-n-layers", "2"}, "-d-model, -n-layers: the new model's shape is for -warm-start only"},
		{[]string{"-freeze-embeddings"}, "-freeze-embeddings and -freeze-embeddings-steps are for -full and -warm-start"},
		{[]string{"-freeze-embeddings-steps", "3"}, "-freeze-embeddings and -freeze-embeddings-steps are for -full and -warm-start"},
		{[]string{"-full", "-recompute", "2"}, "-recompute: LoRA flags, but the mode is -full"},
		{[]string{"-warm-start", "-vocab", "100"}, "-vocab: a warm-started model's vocabulary is the donor's"},
		{[]string{"-warm-start", "-preset", "huge"}, `no Llama preset "huge"`},
		{[]string{"-warm-start", "-n-heads", "5"}, "d_model 192 is not a multiple of n_heads 5"},
	} {
		args := append(append([]string(nil), base...), c.args...)
		name := strings.Join(c.args, " ")
		out, errOut, code := runToy(args...)
		assert.Equal(t, 2, code, "%s: %s", name, errOut)
		assert.Empty(t, out, name)
		assert.Equal(t, 1, strings.Count(errOut, c.msg), "%s: the message once in %q", name, errOut)
	}
	_, errOut, code := runToy("finetune", "-resume", "runs/x", "-full")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "-full would change the run")
}

// TestFinetuneFullCLI: toy finetune -full writes a model toy generate runs; -warm-start refuses
// a donor of another width (status 1, naming both widths).
func TestFinetuneFullCLI(t *testing.T) {
	model := tinyCheckpoint(t)
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 30)), 0o644))
	runsDir := t.TempDir()
	out, errOut, code := runToy("finetune", "-full", "-m", model, "-data", text, "-steps", "2", "-batch", "2", "-seq", "16",
		"-eval-batches", "1", "-runs", runsDir, "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "full fine-tune of")
	dirs, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "model.gguf"))
	require.NoError(t, err)
	require.Len(t, dirs, 1)
	gen, errOut, code := runToy("generate", "-m", dirs[0], "-p", "func main", "-n", "4", "--temp", "0", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(gen, "func main"), gen)

	_, errOut, code = runToy("finetune", "-warm-start", "-preset", "tiny", "-d-model", "64", "-m", model, "-data", text,
		"-steps", "2", "-runs", runsDir, "-t", "1")
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "width 32, the model's d_model is 64")
}

// TestBenchFinetune: one mode runs in process and prints its result line; bad modes are usage
// errors.
func TestBenchFinetune(t *testing.T) {
	model := tinyCheckpoint(t)
	for _, mode := range []string{"lora-f32", "full-f32"} {
		out, errOut, code := runToy("bench", "finetune", "-preset", "tiny", "-mode", mode, "-base", model, "-seq", "8", "-steps", "1", "-t", "1")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, benchFinetuneResult+" ", mode)
	}
	for _, c := range []struct{ args, msg string }{
		{"-modes lora-f7", `"f7" is not a ggml weight type`},
		{"-modes half-f16", `want lora-TYPE or full-TYPE`},
		{"-mode full-f16", "-mode needs -base"},
		{"-seq 4096", "-seq 4096 exceeds the smollm2-135m context 2048"},
	} {
		_, errOut, code := runToy(append([]string{"bench", "finetune"}, strings.Fields(c.args)...)...)
		assert.Equal(t, 2, code, "%s: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg)
	}
}
