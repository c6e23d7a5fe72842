package transformer_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestAttendBlocksMatchesReference: ForwardPass.AttendBlocks gives a float64 attention's output
// for blocks of queries over their own keys under a random mask, with grouped-query heads, value
// heads narrower than key heads, and with and without an attention soft-cap.
func TestAttendBlocksMatchesReference(t *testing.T) {
	be := transformertest.CPUBackend(t)
	const hdk, hdv, H, Hkv, n, m, B = 8, 6, 4, 2, 3, 5, 2
	rng := rand.New(rand.NewPCG(3, 5))
	random := func(size int) []float32 {
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, softcap := range []float32{0, 1.5} {
		a := transformer.Architecture{HeadDimK: hdk, HeadDimV: hdv, NHeads: H, NKVHeads: Hkv, QueryScale: 0.4, AttnSoftcap: softcap}
		ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 64, Graphs: 1, GraphSize: 64})
		require.NoError(t, err)
		defer ctx.Close()
		q := ctx.NewTensor(ggml.F32, hdk, H, n*B).SetInput()
		k := ctx.NewTensor(ggml.F32, hdk, Hkv, m*B).SetInput()
		v := ctx.NewTensor(ggml.F32, hdv*Hkv, m*B).SetInput()
		mask := ctx.NewTensor(ggml.F32, m, n, 1, B).SetInput()
		f := &transformer.ForwardPass{Ctx: ctx, A: &a}
		out := f.AttendBlocks(q, k, v, mask, n, m, B).SetOutput()
		g, err := ctx.NewGraph(64, false)
		require.NoError(t, err)
		require.NoError(t, g.Expand(out))
		alloc, err := be.NewAllocator()
		require.NoError(t, err)
		defer alloc.Close()
		require.NoError(t, alloc.Alloc(g))

		qv, kv, vv := random(hdk*H*n*B), random(hdk*Hkv*m*B), random(hdv*Hkv*m*B)
		mv := make([]float32, m*n*B)
		for i := range mv {
			if i%m != 0 && rng.IntN(3) == 0 { // every query sees its block's first key
				mv[i] = float32(math.Inf(-1))
			}
		}
		for _, e := range []error{q.SetF32(qv), k.SetF32(kv), v.SetF32(vv), mask.SetF32(mv)} {
			require.NoError(t, e)
		}
		require.NoError(t, be.Compute(g))
		got, err := out.F32()
		require.NoError(t, err)
		require.Len(t, got, hdv*H*n*B)

		worst := 0.0
		for b := range B {
			for i := range n {
				for h := range H {
					kh := h / (H / Hkv)
					scores := make([]float64, m)
					for j := range m {
						s := 0.0
						for e := range hdk {
							s += float64(qv[((b*n+i)*H+h)*hdk+e]) * float64(kv[((b*m+j)*Hkv+kh)*hdk+e])
						}
						s *= float64(a.QueryScale)
						if softcap > 0 {
							s = float64(softcap) * math.Tanh(s/float64(softcap))
						}
						scores[j] = s + float64(mv[(b*n+i)*m+j])
					}
					p := transformertest.SoftmaxRef(scores)
					for e := range hdv {
						want := 0.0
						for j := range m {
							want += p[j] * float64(vv[(b*m+j)*hdv*Hkv+kh*hdv+e])
						}
						worst = math.Max(worst, math.Abs(float64(got[(b*n+i)*hdv*H+h*hdv+e])-want))
					}
				}
			}
		}
		t.Logf("soft-cap %v: max abs error %.2g", softcap, worst)
		assert.Less(t, worst, 1e-5, "soft-cap %v", softcap)
	}
}
