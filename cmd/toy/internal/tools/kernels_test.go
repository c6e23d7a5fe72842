package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/ggml"
)

func writeKernelsGGUF(t *testing.T, name, arch string, hidden uint32, generalName string) string {
	t.Helper()
	w, err := ggml.NewGGUFWriter()
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Set("general.architecture", arch))
	require.NoError(t, w.Set(arch+".embedding_length", hidden))
	if generalName != "" {
		require.NoError(t, w.Set("general.name", generalName))
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, w.WriteFile(path))
	return path
}

// TestKernelsCommand runs toy kernels on its own, on models of every architecture toy runs and
// on one it does not, and with -compute-capability. It checks what it says of the cpu target
// this build compiled (clitest.BuildCPU): cpu, with no arch, in the default build; a portable
// build's (make portable=1) names its arch, the instruction set it compiled for.
func TestKernelsCommand(t *testing.T) {
	cpu := clitest.BuildCPU(t)
	header, skipped := "target "+cpu.Name+": backend cpu, no arch", cpu.Name+": skipped (no arch)"
	if cpu.Arch != "" {
		header = "target " + cpu.Name + ": backend cpu, arch " + cpu.Arch + " (" + cpu.ArchBase + ")"
		skipped = cpu.Name + ": skipped (" + cpu.Arch + " is the instruction set this build compiled for)"
	}
	var out, errw bytes.Buffer
	require.NoError(t, RunKernels(nil, &out, &errw))
	assert.Contains(t, out.String(), header)
	assert.Contains(t, out.String(), "model smollm2: llama/576, llama/960, llama/2048")

	// SmolLM2-135M: the exact (llama, 576) entry, with its behaviour.
	smol := writeKernelsGGUF(t, "model.gguf", "llama", 576, "SmolLM2 135M Instruct")
	out.Reset()
	require.NoError(t, RunKernels([]string{smol}, &out, &errw), out.String())
	assert.Contains(t, out.String(), cpu.Name+": resolves to smollm2")
	assert.Contains(t, out.String(), `chat template "smollm2"`)
	assert.Contains(t, out.String(), "audit: no kernel lookups")

	// A LLaMA of a size nobody declares: the wildcard.
	big := writeKernelsGGUF(t, "big.gguf", "llama", 4096, "")
	out.Reset()
	require.NoError(t, RunKernels([]string{big}, &out, &errw), out.String())
	assert.Contains(t, out.String(), cpu.Name+": resolves to llama")

	// An architecture nobody declares fails, naming what is declared.
	bert := writeKernelsGGUF(t, "bert.gguf", "bert", 768, "")
	out.Reset()
	require.Error(t, RunKernels([]string{bert}, &out, &errw))
	assert.Contains(t, out.String(), `declares no model for model type "bert"`)

	// Every architecture toy trains or runs has an entry: GPT-2 and ViT too.
	for _, arch := range []string{"gpt2", "vit"} {
		out.Reset()
		require.NoError(t, RunKernels([]string{writeKernelsGGUF(t, arch+".gguf", arch, 64, "")}, &out, &errw), out.String())
		assert.Contains(t, out.String(), cpu.Name+": resolves to "+arch)
	}

	// A model toy decodes: the audit lists the lookups of toy's CPU operations its decoders make
	// (f32 weights, an f16 cache), resolved for the llama entry, and the cpu table's own lookups.
	out.Reset()
	require.NoError(t, RunKernels([]string{clitest.TinyCheckpoint(t)}, &out, &errw), out.String())
	assert.Contains(t, out.String(), "module mul_mat_cols (kernels/cpu/c/mul_mat_cols.c): mul_mat_cols [f16 bf16 f32 q8_0 q5_0]")
	assert.Contains(t, out.String(), "expected absent for every model: mul_mat_cols.mul_mat_cols[*]")
	if ggml.CPUKernelsFast() {
		assert.Contains(t, out.String(), "audit: resolved: mul_mat_cols.mul_mat_cols[f32]")
		assert.Contains(t, out.String(), "audit: resolved: attend.attend_one[f16]")
	}

	out.Reset()
	require.NoError(t, RunKernels([]string{"-compute-capability", "9.0"}, &out, &errw))
	assert.Contains(t, out.String(), skipped)
	_ = os.Remove(smol)
}
