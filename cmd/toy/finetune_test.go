package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/internal/gguffile"
)

// TestFinetuneFullCLI: toy finetune -full writes a model toy generate runs; -warm-start refuses
// a donor of another width (status 1, naming both widths).
func TestFinetuneFullCLI(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
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

// TestFinetuneLoRAExportCLI: the default mode (LoRA) writes an adapter; toy export merges it
// into a model whose greedy text equals the base with the adapter applied at load; export's
// usage errors are status 2 and an existing output is kept without -force.
func TestFinetuneLoRAExportCLI(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 30)), 0o644))
	runsDir := filepath.Join(dir, "runs")
	_, errOut, code := runToy("finetune", "-m", model, "-data", text, "-steps", "3", "-batch", "2", "-seq", "16",
		"-lr", "0.05", "-eval-batches", "1", "-runs", runsDir, "-t", "1")
	require.Equal(t, 0, code, errOut)
	adapters, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "adapter.gguf"))
	require.NoError(t, err)
	require.Len(t, adapters, 1)

	merged := filepath.Join(dir, "merged.gguf")
	_, errOut, code = runToy("export", "-m", model, "-lora", adapters[0], "-o", merged, "-type", "f32")
	require.Equal(t, 0, code, errOut)
	gen := func(args ...string) string {
		out, errOut, code := runToy(append([]string{"generate", "-p", "func main", "-n", "12", "--temp", "0", "-t", "1"}, args...)...)
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `(?:^|\n)\ntoy generate: load \d+ ms\ntoy generate: prompt \d+ tokens in \d+ ms: [0-9.]+ tokens/s\ntoy generate: generated 12 tokens; 11 after the first in \d+ ms: [0-9.]+ tokens/s\n$`, errOut)
		return out
	}
	withAdapter := gen("-m", model, "-lora", adapters[0])
	assert.Equal(t, withAdapter, gen("-m", merged))
	// The adapter trained: the merged query weights moved from the base's, the others did not.
	tensor := func(path, name string) []byte {
		f, err := gguffile.ReadFile(path)
		require.NoError(t, err)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, ti := range f.Tensors {
			if ti.Name == name {
				return raw[f.DataOffset+int64(ti.Offset) : f.DataOffset+int64(ti.Offset)+ti.Size]
			}
		}
		t.Fatalf("%s: no tensor %s", path, name)
		return nil
	}
	assert.NotEqual(t, tensor(model, "blk.0.attn_q.weight"), tensor(merged, "blk.0.attn_q.weight"))
	assert.Equal(t, tensor(model, "blk.0.attn_k.weight"), tensor(merged, "blk.0.attn_k.weight"))

	// Without -lora, export converts: the f32 checkpoint's matrices become f16, and it runs.
	converted := filepath.Join(dir, "f16.gguf")
	out, errOut, code := runToy("export", "-m", model, "-o", converted, "-type", "f16")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "weight matrices to f16")
	assert.Len(t, tensor(converted, "blk.0.attn_k.weight"), len(tensor(model, "blk.0.attn_k.weight"))/2)
	gen("-m", converted)

	before, err := os.ReadFile(merged)
	require.NoError(t, err)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-m", model, "-lora", adapters[0], "-o", merged, "-merge=false"}, 2, "-merge=false: toy export only writes merged models"},
		{[]string{"-m", model, "-lora", adapters[0]}, 2, "give the model (-m) and the output (-o)"},
		{[]string{"-m", model, "-lora", adapters[0], "-o", merged + ".2", "-type", "q9_9"}, 2, `-type "q9_9": not a ggml type`},
		{[]string{"-m", model, "-lora", adapters[0], "-o", merged}, 1, merged},
	} {
		_, errOut, code := runToy(append([]string{"export"}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, c.args)
	}
	after, err := os.ReadFile(merged)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused export must leave the existing file as it was")
}
