package decoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/ggml"
)

// TestDequantizeMatchesGraph: DequantizeOnCPU's direct conversion (ggml's type traits through
// ggml.Dequantize) gives, to the bit, the values of ggml's GetRows graph, for f32, f16, bf16
// and every block type ggml quantizes without an importance matrix, on random rows of
// several lengths and magnitudes; and ggml.Dequantize refuses data that is not whole blocks.
func TestDequantizeMatchesGraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 3))
	types := []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
		ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K, ggml.TQ1_0, ggml.TQ2_0, ggml.IQ4_NL, ggml.IQ4_XS, ggml.MXFP4}
	for _, typ := range types {
		for _, width := range []int{256, 512, 768} {
			if width%ggml.BlockSize(typ) != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", ggml.TypeName(typ), width), func(t *testing.T) {
				rows := 1 + rng.IntN(7)
				scale := math.Pow(10, float64(rng.IntN(5)-2))
				values := make([]float32, rows*width)
				for i := range values {
					values[i] = float32(rng.NormFloat64() * scale)
				}
				raw, err := ggml.Quantize(typ, values, width)
				require.NoError(t, err)
				ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 1})
				require.NoError(t, err)
				defer ctx.Close()
				w := ctx.NewTensor(typ, int64(width), int64(rows))
				require.NoError(t, ctx.Err())
				cpu, err := ggml.NewCPUBackend(0)
				require.NoError(t, err)
				defer cpu.Close()
				buf, err := cpu.Alloc(ctx)
				require.NoError(t, err)
				defer buf.Close()
				require.NoError(t, w.SetBytes(raw))
				direct, err := DequantizeOnCPU(w, ggml.F32)
				require.NoError(t, err)
				graph, err := dequantizeGraph(w, raw, ggml.F32)
				require.NoError(t, err)
				require.Equal(t, graph, direct)
			})
		}
	}
	require.Error(t, ggml.Dequantize(ggml.Q4_K, make([]byte, 144), make([]float32, 128)), "half a block")
	require.Error(t, ggml.Dequantize(ggml.Q4_K, make([]byte, 100), make([]float32, 256)), "short data")
	require.Error(t, ggml.Dequantize(ggml.I32, make([]byte, 4), make([]float32, 1)), "no conversion")
}
