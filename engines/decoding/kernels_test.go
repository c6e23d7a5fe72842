package decoding

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// TestEveryArchitectureHasAnEntry fails when toy can decode (or, for ViT, train and classify) an
// architecture that the cpu kernel table declares no model for: the gate would refuse it.
func TestEveryArchitectureHasAnEntry(t *testing.T) {
	cpu := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu)
	for _, arch := range append(transformer.SupportedArchitectures(), transformer.ViTArch) {
		_, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: arch, HiddenSize: 64, Names: []string{"model.gguf"}})
		assert.NoError(t, err, "architecture %s", arch)
	}
}

// TestKernelNeeds checks the lookups a decoder makes: the products over each weight type (the
// packed GEMM for float weights only), RoPE only for a model that rotates, the attention over
// the cache's type, and the transposed store only outside flash attention's layout.
func TestKernelNeeds(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	m, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.Q8_0, 1), ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	var names []string
	for _, n := range m.KernelNeeds(KVF16, false) {
		names = append(names, n.String())
	}
	assert.Equal(t, []string{
		"mul_mat_cols.mul_mat_cols[q8_0]",
		"rms_norm.rms_norm_mul", "rope.rope_table", "rope.rope_apply",
		"attend.attend_one[f16]", "attend.attend_blocks[f16]", "attend.attend_merge",
		"store.store_transposed[f16]", "mul_mat_packed.mul_mat_packed[f16]", "soft_max.soft_max",
	}, names)
	assert.NotContains(t, m.KernelNeeds(KVQ8_0, true), needStore(ggml.Q8_0), "flash attention's values are not stored transposed")

	g, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("gpt2"), ggml.F16, 1), ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer g.Close()
	needs := g.KernelNeeds(KVF16, false)
	assert.Contains(t, needs, needColumns(ggml.F16))
	assert.Contains(t, needs, NeedPacked(ggml.F16))
	assert.NotContains(t, needs, needRope[0], "learned positions rotate nothing")

	ggmlOnly, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F16, 1), ModelOptions{Threads: 1, GGMLKernels: true})
	require.NoError(t, err)
	defer ggmlOnly.Close()
	assert.Empty(t, ggmlOnly.KernelNeeds(KVF16, false), "ModelOptions.GGMLKernels looks nothing up")
}

// TestKernelsGovernWhatRuns decodes the same prompt and steps with what the table resolved:
// with nothing resolved the logits are ggml's to the bit (a model with ModelOptions.GGMLKernels),
// with everything resolved they are toy's kernels' (the default), which differ from ggml's in
// their rounding (ggml rounds the columns to f16 for f16 weights), and with only the
// few-column product withdrawn they are neither: each lookup decides its own operation.
func TestKernelsGovernWhatRuns(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: none runs")
	}
	path := transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F16, 3)
	tokens := []int32{1, 5, 9, 2, 7}
	run := func(opts ModelOptions, use func(m *GGUFModel)) []float32 {
		m, err := OpenModel(path, opts)
		require.NoError(t, err)
		defer m.Close()
		if use != nil {
			use(m)
		}
		d, err := NewDecoder(m, DecoderOptions{Threads: 1})
		require.NoError(t, err)
		defer d.Close()
		_, err = d.Prompt(tokens)
		require.NoError(t, err)
		var all []float32
		for _, tok := range []int32{3, 4, 6} {
			l, err := d.Next(tok)
			require.NoError(t, err)
			all = append(all, l...)
		}
		return all
	}
	ggmlLogits := run(ModelOptions{Threads: 1, GGMLKernels: true}, nil)
	toyLogits := run(ModelOptions{Threads: 1}, nil)
	none := run(ModelOptions{Threads: 1}, func(m *GGUFModel) { m.UseKernels(nil) })
	assert.Equal(t, ggmlLogits, none, "nothing resolved: ggml's operations throughout")
	assert.NotEqual(t, ggmlLogits, toyLogits, "toy's kernels ran by default")
	assert.InDeltaSlice(t, toUnit64(ggmlLogits), toUnit64(toyLogits), 0.05, "the same model either way")
	noColumns := run(ModelOptions{Threads: 1}, func(m *GGUFModel) {
		var keep []kernelrt.Need
		for _, n := range m.KernelNeeds(KVF16, false) {
			if n != needColumns(ggml.F16) {
				keep = append(keep, n)
			}
		}
		m.UseKernels(keep)
	})
	assert.NotEqual(t, toyLogits, noColumns, "withdrawing the few-column product changes the steps")
	assert.NotEqual(t, ggmlLogits, noColumns, "the rest of toy's kernels still run")
}

func toUnit64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
