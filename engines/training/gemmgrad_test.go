package training

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/ggml"
)

// TestFrozenInputGradKeepsSmallGradients: the input gradient Wᵀ·dz of a frozen product, for
// each way its Wᵀ is made (kept in f32 for f32 and f16 weights, made each step for a q8_0 one
// or kept with keepTransposed), matches a float64 product of the dequantized weights to f32
// precision, for output gradients of order 1e-3 and of order 1e-9. A gradient as small as the
// second (a mean over many positions, far from the loss) would vanish in a GEMM that rounds it
// to f16, whose smallest step is 6e-8.
func TestFrozenInputGradKeepsSmallGradients(t *testing.T) {
	be := newBackend(t)
	const k, m, n = 64, 96, 5
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		typ  ggml.Type
		keep bool
	}{{ggml.F32, false}, {ggml.F16, false}, {ggml.Q8_0, false}, {ggml.Q8_0, true}} {
		for _, scale := range []float64{1e-3, 1e-9} {
			wv := make([]float32, k*m)
			for i := range wv {
				wv[i] = float32(rng.NormFloat64())
			}
			raw, err := ggml.Quantize(c.typ, wv, k)
			require.NoError(t, err)
			dzv := make([]float32, m*n)
			for i := range dzv {
				dzv[i] = float32(rng.NormFloat64() * scale)
			}
			wctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 2})
			require.NoError(t, err)
			defer wctx.Close()
			w, dz := wctx.NewTensor(c.typ, k, m).SetName("w"), wctx.NewTensor(ggml.F32, m, n).SetName("dz")
			buf, err := be.Alloc(wctx)
			require.NoError(t, err)
			defer buf.Close()
			require.NoError(t, w.SetBytes(raw))
			require.NoError(t, dz.SetF32(dzv))
			wq := decodingtest.Dequantize(t, w)

			g, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 64, Graphs: 1, GraphSize: 64})
			require.NoError(t, err)
			defer g.Close()
			gb, err := newGemmBackward(g, builtinTrainKernels(be, c.typ), nil, 1)
			require.NoError(t, err)
			defer gb.Close()
			gb.keepTransposed = c.keep
			dx := gb.inputGrad(w, dz).SetOutput()
			require.NoError(t, gb.prepare(be))
			graph, err := g.NewGraph(64, false)
			require.NoError(t, err)
			require.NoError(t, graph.Expand(dx))
			alloc, err := be.NewAllocator()
			require.NoError(t, err)
			defer alloc.Close()
			require.NoError(t, alloc.Alloc(graph))
			require.NoError(t, be.Compute(graph))
			got, err := dx.F32()
			require.NoError(t, err)

			worst := 0.0
			for col := 0; col < n; col++ {
				for i := 0; i < k; i++ {
					want, mag := 0.0, 0.0
					for j := 0; j < m; j++ {
						p := float64(wq[j*k+i]) * float64(dzv[col*m+j])
						want, mag = want+p, mag+math.Abs(p)
					}
					worst = math.Max(worst, math.Abs(float64(got[col*k+i])-want)/mag)
				}
			}
			assert.Less(t, worst, 1e-5, "%s keep=%v, gradients of order %g: worst error relative to Σ|w·dz| %.3g",
				ggml.TypeName(c.typ), c.keep, scale, worst)
		}
	}
}
