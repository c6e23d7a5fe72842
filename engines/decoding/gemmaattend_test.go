package decoding

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// TestGemmaAttentionShadows checks the gemma family's own attention module in the cpu table: it
// replaces the common attend module for the gemma entry alone (the soft-capped kernels resolve
// there and nowhere else, the common ones are dropped, and the audit says so), Gemma 2's and
// Gemma 3's decoders look it up in place of the common attention, and a random Gemma 2 model
// (soft-capped logits, a sliding window on alternate layers) decodes with it the greedy tokens
// it decodes with ggml's operations (MulMat, Scale, Tanh, Scale, SoftMax: the unfused path, or
// flash attention over a q8_0 cache), with logits within ggml's f16 rounding of the queries and
// probabilities, and with fewer of ggml's TANH or FLASH_ATTN_EXT nodes in its graphs (a
// generation step's attention is one node of toy's). Gemma 3 (no cap) looks up the same
// kernels, which then compute the common attention.
func TestGemmaAttentionShadows(t *testing.T) {
	cpu := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu)
	gemma, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: "gemma2", HiddenSize: 64, Names: []string{"gemma-2-test"}})
	require.NoError(t, err)
	llama, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: transformer.Arch, HiddenSize: 64, Names: []string{"llama"}})
	require.NoError(t, err)
	mod, ok := kernelrt.Lookup(cpu, gemma, kernels.KernelCPUGemmaAttendAttendOneSoftcap)
	assert.True(t, ok)
	assert.Equal(t, kernels.ModuleCPUGemmaAttend, mod)
	both := append(needAttendSoftcap(ggml.F16), needAttend(ggml.F16)...)
	r := kernelrt.Audit(cpu, gemma, both)
	assert.Equal(t, needAttendSoftcap(ggml.F16), r.Resolved)
	assert.Equal(t, needAttend(ggml.F16), r.Unresolved, "gemma's module drops the common attention")
	assert.Contains(t, r.Lines(), "module attend: dropped by shadowing: attend_one, attend_blocks, attend_merge")
	assert.Contains(t, r.Summary(), "module attend shadowed by the model's own (dropped: attend_one, attend_blocks, attend_merge)")
	r = kernelrt.Audit(cpu, gemma, needAttendSoftcap(ggml.F32)[:2])
	assert.Empty(t, r.Unresolved, "an f32 cache's attention is expected absent: %v", r.Lines())
	assert.Len(t, r.ExpectedAbsent, 2)
	r = kernelrt.Audit(cpu, llama, both)
	assert.Equal(t, needAttend(ggml.F16), r.Resolved)
	assert.Equal(t, needAttendSoftcap(ggml.F16), r.Unresolved, "only gemma's entry has gemma's attention")

	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: none runs")
	}
	for _, variant := range []string{"gemma2", "gemma3"} {
		for _, c := range []struct {
			kv    KVCacheType
			flash bool
		}{{KVF16, false}, {KVQ8_0, true}} {
			t.Run(fmt.Sprintf("%s/%s/flash=%v", variant, c.kv.ggmlType(), c.flash), func(t *testing.T) {
				path := transformertest.WriteTiny(t, transformertest.TinyArch(variant), ggml.F16, 7)
				type run struct {
					logits []float32
					tokens []int32
					ggml   int // ggml's TANH and FLASH_ATTN_EXT nodes in the decoder's graphs
				}
				decode := func(withKernel bool) run {
					m, err := OpenModel(path, ModelOptions{Threads: 1})
					require.NoError(t, err)
					defer m.Close()
					needs := m.KernelNeeds(c.kv, c.flash)
					attend := needAttendSoftcap(c.kv.ggmlType())
					require.Subset(t, needs, attend)
					for _, n := range needAttend(c.kv.ggmlType()) {
						require.NotContains(t, needs, n)
					}
					if !withKernel {
						needs = slices.DeleteFunc(needs, func(n kernelrt.Need) bool { return slices.Contains(attend, n) })
					}
					m.UseKernels(kernelrt.Audit(cpu, gemma, needs).Resolved)
					d, err := NewDecoder(m, DecoderOptions{Threads: 1, KVType: c.kv, FlashAttention: c.flash})
					require.NoError(t, err)
					defer d.Close()
					var out run
					out.tokens, out.logits = greedy(t, d, []int32{1, 5, 9, 2, 7, 11, 3}, 16)
					out.ggml = graphNodes(d, func(n *ggml.Tensor) bool {
						l := n.OpLabel()
						return strings.Contains(l, "TANH") || strings.Contains(l, "FLASH_ATTN")
					})
					return out
				}
				with, without := decode(true), decode(false)
				assert.Equal(t, without.tokens, with.tokens, "the same greedy tokens")
				worst := 0.0
				for i := range with.logits {
					worst = math.Max(worst, math.Abs(float64(with.logits[i]-without.logits[i])))
				}
				t.Logf("largest logit difference %.3g over %d logits", worst, len(with.logits))
				assert.Less(t, worst, 2e-2, "logits within ggml's f16 rounding")
				if variant == "gemma2" || c.flash {
					assert.Less(t, with.ggml, without.ggml, "toy's attention ran in place of ggml's Tanh or flash attention")
				}
			})
		}
	}
}
