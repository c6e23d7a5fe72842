package decoding

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// TestGPT2LayerNormShadows checks the gpt2 family's own norm module in the cpu table: it
// replaces the common rms_norm module for the gpt2 entry alone (layer_norm_mul_add resolves
// there and nowhere else, rms_norm_mul is dropped, and the audit says so), a GPT-2 model's
// decoders look it up in place of the RMS norm, and decoding with it gives the logits of
// ggml's Norm, Mul and Add to the bit, so the same greedy tokens, in graphs without ggml's
// NORM nodes.
func TestGPT2LayerNormShadows(t *testing.T) {
	cpu := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu)
	gpt2, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: transformer.GPT2Arch, HiddenSize: 64})
	require.NoError(t, err)
	llama, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: transformer.Arch, HiddenSize: 64, Names: []string{"llama"}})
	require.NoError(t, err)
	mod, ok := kernelrt.Lookup(cpu, gpt2, needLayerNormMulAdd.Kernel)
	assert.True(t, ok)
	assert.Equal(t, kernels.ModuleCPUGpt2RmsNorm, mod)
	r := kernelrt.Audit(cpu, gpt2, []kernelrt.Need{needLayerNormMulAdd, needRMSNormMul})
	assert.Equal(t, []kernelrt.Need{needLayerNormMulAdd}, r.Resolved)
	assert.Equal(t, []kernelrt.Need{needRMSNormMul}, r.Unresolved, "GPT-2's module drops the RMS norm")
	assert.Contains(t, r.Lines(), "module rms_norm: dropped by shadowing: rms_norm_mul")
	assert.Contains(t, r.Summary(), "module rms_norm shadowed by the model's own (dropped: rms_norm_mul)")
	r = kernelrt.Audit(cpu, llama, []kernelrt.Need{needLayerNormMulAdd, needRMSNormMul})
	assert.Equal(t, []kernelrt.Need{needRMSNormMul}, r.Resolved)
	assert.Equal(t, []kernelrt.Need{needLayerNormMulAdd}, r.Unresolved, "only gpt2's entry has GPT-2's norm")
	assert.Empty(t, r.Shadowed)

	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: none runs")
	}
	path := transformertest.WriteTiny(t, transformertest.TinyArch("gpt2"), ggml.F16, 5)
	type run struct {
		logits []float32
		tokens []int32
		norms  int // ggml NORM nodes in the decoder's graphs
	}
	decode := func(withLayerNorm bool) run {
		m, err := OpenModel(path, ModelOptions{Threads: 1})
		require.NoError(t, err)
		defer m.Close()
		needs := m.KernelNeeds(KVF16, false)
		require.Contains(t, needs, needLayerNormMulAdd)
		require.NotContains(t, needs, needRMSNormMul)
		if !withLayerNorm {
			needs = slices.DeleteFunc(needs, func(n kernelrt.Need) bool { return n == needLayerNormMulAdd })
		}
		m.UseKernels(kernelrt.Audit(cpu, gpt2, needs).Resolved)
		d, err := NewDecoder(m, DecoderOptions{Threads: 1})
		require.NoError(t, err)
		defer d.Close()
		var out run
		out.tokens, out.logits = greedy(t, d, []int32{1, 5, 9, 2, 7, 11, 3}, 12)
		out.norms = graphNodes(d, func(n *ggml.Tensor) bool { return n.OpName() == "NORM" })
		return out
	}
	with, without := decode(true), decode(false)
	assert.Zero(t, with.norms, "toy's LayerNorm ran in place of ggml's NORM")
	assert.Positive(t, without.norms)
	assert.Equal(t, without.tokens, with.tokens)
	assert.Equal(t, without.logits, with.logits, "the same logits to the bit")
}
