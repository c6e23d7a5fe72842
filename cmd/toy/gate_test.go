package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// TestKernelGate runs the commands that run a model against a cuda target whose llama entry
// lacks the sampling module: toy generate, whose device sampling looks up argmax_f32 or
// sample_f32 there, refuses unless --dangerously-allow-unresolved-kernel-lookups (and then
// samples on the host); generate with parameters the sampling kernel does not compute, and
// perplexity, bench, train, finetune and serve's gate, which dispatch none of toy's kernels,
// run without it.
func TestKernelGate(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	clitest.WithTarget(t, &kernels.Target{
		Name: "cuda-test", Backend: kernels.BackendCUDA, Arch: "sm_80", Sources: kernels.ModuleCUDASampling.Tree(),
		Modules: []kernels.Module{
			{ID: kernels.ModuleCUDAAdamw, Name: "adamw", Dir: "common", Kernels: []string{"adamw_f32"}},
			{ID: kernels.ModuleCUDASampling, Name: "sampling", Dir: "common", Kernels: []string{"argmax_f32", "sample_f32"}},
		},
		Models: []kernels.Model{{Name: "llama", MatchNames: []string{"llama"}, Types: []kernels.ModelType{{ModelType: "llama"}},
			Modules: []kernels.ModuleID{kernels.ModuleCUDAAdamw}}},
	})
	greedy := []string{"generate", "-m", model, "-p", "func main", "-n", "6", "--temp", "0", "-t", "1"}
	want, errOut, code := runToy(append(greedy, "--"+cli.AllowUnresolvedFlag)...)
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(want, "func main"), want)
	assert.Contains(t, errOut, "sampling on the host", "a cpu build has no device: the allowed run samples on the host")

	_, errOut, code = runToy(greedy...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "sampling.argmax_f32")
	assert.NotContains(t, errOut, "sample_f32", "greedy generation looks up argmax only")
	assert.Contains(t, errOut, cli.AllowUnresolvedFlag)

	_, errOut, code = runToy("generate", "-m", model, "-p", "func main", "-n", "6", "--temp", "0.8", "-top-k", "0", "-top-p", "0.9", "-min-p", "0", "-seed", "1", "-t", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "sampling.sample_f32")

	// Min-p is computed on the host: nothing is looked up, nothing refused.
	_, errOut, code = runToy("generate", "-m", model, "-p", "func main", "-n", "6", "--temp", "0.8", "-min-p", "0.05", "-seed", "1", "-t", "1")
	assert.Equal(t, 0, code, errOut)
	// Speculative decoding samples on the host too.
	got, errOut, code := runToy(append(greedy, "-draft", model)...)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, want, got)

	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 30)), 0o644))
	_, errOut, code = runToy("perplexity", "-m", model, "-f", text, "-c", "16", "-chunks", "1", "-t", "1")
	assert.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("bench", "model", "-m", model, "-p", "4", "-n", "2", "-r", "1", "-t", "1")
	assert.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-seq", "16", "-batch", "2", "-steps", "1",
		"-eval-batches", "1", "-sample", "0", "-text", text, "-runs", t.TempDir(), "-t", "1")
	assert.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("finetune", "-m", model, "-data", text, "-steps", "1", "-batch", "2", "-seq", "16",
		"-eval-batches", "1", "-runs", t.TempDir(), "-t", "1")
	assert.Equal(t, 0, code, errOut)
}

// TestKernelGateCPU runs every command that decodes a model against cpu tables that fail it: one
// whose entries lack the RMS norm's module (a lookup that neither resolves nor is expected
// absent), and one that declares no entry for the model at all. Each command refuses, naming the
// lookup and the override; with --dangerously-allow-unresolved-kernel-lookups each runs, and the
// greedy text is the same as with the full table (ggml's operation runs where toy's did not
// resolve, and computes the same model). The audit line says what resolved.
func TestKernelGateCPU(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	model := clitest.TinyCheckpoint(t)
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 30)), 0o644))
	greedy := []string{"generate", "-m", model, "-p", "func main", "-n", "6", "--temp", "0", "-t", "1"}
	full := clitest.BuildCPU(t)
	want, errOut, code := runToy(greedy...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "toy generate: kernels: target "+full.Name+", model llama:")
	assert.Contains(t, errOut, "resolved (mul_mat_cols.mul_mat_cols[f32]")

	noNorm := clitest.WithoutModules(full, kernels.ModuleCPURmsNorm)
	noEntry := *full
	noEntry.Models = nil

	commands := map[string][]string{
		"generate":   greedy,
		"perplexity": {"perplexity", "-m", model, "-f", text, "-c", "16", "-chunks", "1", "-t", "1"},
		"bench":      {"bench", "model", "-m", model, "-p", "4", "-n", "2", "-r", "1", "-t", "1"},
		"serve":      {"serve", "-m", model, "-addr", "127.0.0.1:0", "-t", "1"},
	}
	for table, tc := range map[string]struct {
		target *kernels.Target
		want   string
	}{
		"lacks a module": {noNorm, "unresolved kernel lookups: rms_norm.rms_norm_mul"},
		"lacks an entry": {&noEntry, "declares no entry for this model"},
	} {
		t.Run(table, func(t *testing.T) {
			clitest.WithCPUTarget(t, tc.target)
			for name, args := range commands {
				_, errOut, code := runToy(args...)
				assert.Equal(t, 1, code, "%s: %s", name, errOut)
				assert.Contains(t, errOut, tc.want, name)
				assert.Contains(t, errOut, cli.AllowUnresolvedFlag, name)
			}
			for name, args := range commands {
				if name == "serve" {
					url, stop := startServe(t, "-m", model, "--"+cli.AllowUnresolvedFlag)
					assert.NotEmpty(t, url)
					stop()
					continue
				}
				got, errOut, code := runToy(append(args, "--"+cli.AllowUnresolvedFlag)...)
				require.Equal(t, 0, code, "%s: %s", name, errOut)
				if name == "generate" {
					assert.Equal(t, want, got, "ggml's RMS norm computes what toy's does")
				}
			}
		})
	}
}

// TestGPT2ShadowedNorm trains a GPT-2 checkpoint one step and runs it: toy kernels and toy
// generate's audit say that the gpt2 entry's own norm module shadows the common rms_norm (its
// rms_norm_mul dropped) and that GPT-2's LayerNorm resolved; under a table whose gpt2 entry lacks
// that module generate refuses, naming the lookup, and with the override (ggml's Norm, Mul and
// Add) it writes the same greedy text.
func TestGPT2ShadowedNorm(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)), 0o644))
	runs := t.TempDir()
	_, errOut, code := runToy("train", "-arch", "gpt2", "-vocab", "300", "-c", "32", "-d-model", "32", "-n-heads", "4", "-d-ff", "64",
		"-n-layers", "2", "-seq", "16", "-batch", "2", "-steps", "2", "-eval-batches", "1", "-sample", "0", "-text", text, "-runs", runs, "-t", "1")
	require.Equal(t, 0, code, errOut)
	models, err := filepath.Glob(filepath.Join(runs, "*", "weights", "model.gguf"))
	require.NoError(t, err)
	require.Len(t, models, 1)
	model := models[0]

	out, errOut, code := runToy("kernels", model)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "module rms_norm: dropped by shadowing: rms_norm_mul")
	assert.Contains(t, out, "resolved: rms_norm.layer_norm_mul_add")

	full := clitest.BuildCPU(t)
	greedy := []string{"generate", "-m", model, "-p", "func main", "-n", "8", "--temp", "0", "-t", "1"}
	want, errOut, code := runToy(greedy...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "toy generate: kernels: target "+full.Name+", model gpt2:")
	assert.Contains(t, errOut, "rms_norm.layer_norm_mul_add")
	assert.Contains(t, errOut, "module rms_norm shadowed by the model's own (dropped: rms_norm_mul)")

	clitest.WithCPUTarget(t, clitest.WithoutModules(full, kernels.ModuleCPUGpt2RmsNorm))
	_, errOut, code = runToy(greedy...)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "unresolved kernel lookups: rms_norm.layer_norm_mul_add")
	got, errOut, code := runToy(append(greedy, "--"+cli.AllowUnresolvedFlag)...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, got, "ggml's LayerNorm writes the same greedy text")
}

// TestBuildCPUTarget: the cpu table compiled into this build describes it (the vector unit toy's
// CPU kernels were compiled for is the one its arch compiles them to), toy kernels names that
// unit, and a table that does not describe the build stops the gate unless the override.
func TestBuildCPUTarget(t *testing.T) {
	cpu := clitest.BuildCPU(t)
	require.NoError(t, kernelrt.CheckCPUBuild(cpu, ggml.CPUKernelsISA()))
	out, errOut, code := runToy("kernels")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "target "+cpu.Name+": backend cpu")
	assert.Contains(t, out, "toy's CPU kernels in this build: "+ggml.CPUKernelsISA())
	if !ggml.CPUKernelsFast() {
		return
	}
	other := *cpu
	other.Name, other.Arch = "cpu-arm64", "armv8.2-a+dotprod+fp16" // whose kernels are scalar
	clitest.WithCPUTarget(t, &other)
	model := clitest.TinyCheckpoint(t)
	greedy := []string{"generate", "-m", model, "-p", "func main", "-n", "4", "--temp", "0", "-t", "1"}
	_, errOut, code = runToy(greedy...)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "target cpu-arm64 (arch armv8.2-a+dotprod+fp16) is compiled in, but toy's CPU kernels were compiled for "+ggml.CPUKernelsISA())
	_, errOut, code = runToy(append(greedy, "--"+cli.AllowUnresolvedFlag)...)
	assert.Equal(t, 0, code, errOut)
}
