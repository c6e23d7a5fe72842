package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestGemmaShadowedAttention: toy kernels on a random Gemma 2 model reports that the gemma
// entry's own attend module shadows the common one (its three kernels dropped) and that the
// soft-capped attention resolved for the f16 cache.
func TestGemmaShadowedAttention(t *testing.T) {
	path := transformertest.WriteTiny(t, transformertest.TinyArch("gemma2"), ggml.F16, 7)
	out, errOut, code := runToy("kernels", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, clitest.BuildCPU(t).Name+": resolves to gemma")
	assert.Contains(t, out, "kernels/cpu/c/gemma/attend.c")
	assert.Contains(t, out, "audit: module attend: dropped by shadowing: attend_one, attend_blocks, attend_merge")
	if ggml.CPUKernelsFast() {
		assert.Contains(t, out, "audit: resolved: attend.attend_one_softcap[f16]")
		assert.NotContains(t, out, "resolved: attend.attend_one[")
	}
}
