package ggml

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/reference"
)

// TestAttendOneSoftcap checks the gemma family's attention of one query per sequence
// (AttendOneSoftcap, kernels/cpu/c/gemma/attend.c) against a float64 reference that soft-caps
// the logits, cap·tanh(scale·q·k/cap), and against ggml's own unfused attention built as the
// decoders build it for a soft-capped model (MulMat, Scale, Tanh, Scale, SoftMaxExt, MulMat),
// on random shapes up to Gemma 2's head size of 256, with logits large enough that the cap
// bends them, masks that hide the cells before a sliding window (Gemma 2's local layers) and
// random cells besides, f32 and f16 masks, and a cache longer than a block (the blocks and
// their merge). A cap of 0 gives AttendOne's results to the bit, and a bad cap is refused.
func TestAttendOneSoftcap(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("AttendOneSoftcap runs on a vectorized CPU build only")
	}
	for _, s := range []struct {
		hdk, hdv, H, Hkv, S, kvLen, window int
		cap                                float32
		maskType                           Type
	}{{256, 256, 8, 4, 2, 40, 0, 50, F16}, {64, 64, 6, 2, 3, 37, 16, 5, F32}, {32, 48, 4, 4, 1, 130, 64, 1, F32},
		{128, 128, 2, 1, 2, 300, 100, 20, F16}, {16, 16, 2, 1, 1, 2600, 1500, 10, F16}, {64, 64, 4, 2, 2, 70, 0, 0, F32}} {
		t.Run(fmt.Sprintf("hdk=%d/H=%d/Hkv=%d/S=%d/kv=%d/window=%d/cap=%g/%s", s.hdk, s.H, s.Hkv, s.S, s.kvLen, s.window, s.cap, TypeName(s.maskType)), func(t *testing.T) {
			h := newHarness(t)
			first, stride := 2, s.kvLen+5 // sequence j's cells start at first + j·stride
			cells := first + s.S*stride
			// Queries of a few units: scaled logits of several units, which a cap of 1 to 20 bends.
			q := h.rand(-3, 3, s.hdk, s.H, s.S)
			kc := h.rand(-1, 1, s.hdk*s.Hkv, cells).Map(reference.RoundF16)
			vc := h.rand(-1, 1, cells, s.hdv*s.Hkv).Map(reference.RoundF16)
			mask := make([]float64, s.kvLen*s.S)
			for j := 0; j < s.S; j++ {
				for c := 0; c < s.kvLen; c++ {
					hidden := s.window > 0 && c < s.kvLen-s.window // outside the sliding window
					if c != s.kvLen-1 && (hidden || h.rng.IntN(4) == 0) {
						mask[j*s.kvLen+c] = math.Inf(-1)
					}
				}
			}
			mt := reference.Tensor{Ne: [4]int{s.kvLen, s.S, 1, 1}, Data: mask}
			m := h.in(mt)
			if s.maskType == F16 {
				m = h.inF16(mt)
			}
			K, V := h.inF16(kc), h.inF16(vc)
			rowK := 2 * s.hdk * s.Hkv
			kv := h.c.View(K, []int64{int64(s.hdk), int64(s.kvLen), int64(s.Hkv), int64(s.S)}, []int{rowK, 2 * s.hdk, stride * rowK}, first*rowK)
			vv := h.c.View(V, []int64{int64(s.kvLen), int64(s.hdv), int64(s.Hkv), int64(s.S)}, []int{2 * cells, 2 * s.hdv * cells, 2 * stride}, 2*first)
			qt := h.in(q)
			scale := float32(1 / math.Sqrt(float64(s.hdk)))
			got := h.c.AttendOneSoftcap(qt, kv, vv, m, scale, s.cap)
			require.NotNil(t, got, "%v", h.c.Err())
			uncapped := h.c.AttendOne(qt, kv, vv, m, scale)
			require.NotNil(t, uncapped, "%v", h.c.Err())
			// ggml's unfused attention of the same views, as kvCache.attend builds it for a
			// soft-capped model.
			Q := h.c.Permute(h.c.Reshape(qt, int64(s.hdk), int64(s.H), 1, int64(s.S)), [4]int{0, 2, 1, 3})
			kq, sc := h.c.MulMat(kv, Q), scale
			if s.cap > 0 {
				kq, sc = h.c.Scale(h.c.Tanh(h.c.Scale(kq, scale/s.cap)), s.cap), 1
			}
			kq = h.c.SoftMaxExt(kq, h.c.Reshape(m, int64(s.kvLen), 1, 1, int64(s.S)), sc, 0)
			viaGGML := h.c.Cont(h.c.Permute(h.c.MulMat(vv, kq), [4]int{0, 2, 1, 3}))
			h.run(got, uncapped, viaGGML)

			want := attendOneCappedReference(q, kc, vc, mask, s.hdv, s.Hkv, s.kvLen, first, stride, scale, s.cap)
			near(t, "AttendOneSoftcap", want, h.out(got), 2e-5, 1)
			ggmlOut := h.out(viaGGML)
			ggmlOut.Ne = want.Ne
			// ggml rounds the queries and the probabilities to f16.
			near(t, "ggml's unfused soft-capped attention", want, ggmlOut, 1e-3, 1)
			if s.cap == 0 {
				sameBits(t, "a cap of 0: AttendOne's bits", h.out(uncapped), h.out(got))
			} else {
				// The cap changes the result: the reference without it is further away.
				plain := attendOneCappedReference(q, kc, vc, mask, s.hdv, s.Hkv, s.kvLen, first, stride, scale, 0)
				e, _ := reference.WorstRelErr(plain.Data, h.out(got).Data, 1)
				require.Greater(t, e, 1e-3, "the cap bends the logits")
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		q, k := h.in(h.rand(-1, 1, 16, 2, 1)), h.inF16(h.rand(-1, 1, 16, 4, 1, 1))
		v, m := h.inF16(h.rand(-1, 1, 4, 16, 1, 1)), h.in(h.rand(0, 0, 4, 1))
		for _, cap := range []float32{-1, float32(math.NaN()), float32(math.Inf(1))} {
			require.ErrorContains(t, AttendOneSoftcapFits(q, k, v, m, 0.25, cap), "soft-cap")
		}
		require.NoError(t, AttendOneSoftcapFits(q, k, v, m, 0.25, 50))
	})
}

// BenchmarkAttendOneSoftcap times one generation step's soft-capped attention of a Gemma 2 2B
// layer (8 query heads of 256 over 4 key/value heads, a cap of 50) over 1,024 and 4,096 cells of
// an f16 cache: toy's kernel (AttendOneSoftcap) and ggml's unfused attention as the decoders
// built it before (MulMat, Scale, Tanh, Scale, SoftMaxExt, MulMat, Permute and Cont).
func BenchmarkAttendOneSoftcap(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	const hd, H, Hkv, capValue, scale = 256, 8, 4, 50, 0.0625
	for _, kvLen := range []int64{1024, 4096} {
		for _, kernel := range []string{"toy", "ggml"} {
			b.Run(fmt.Sprintf("cells=%d/%s", kvLen, kernel), func(b *testing.B) {
				ctx, err := NewContext(ContextOptions{MaxTensors: 32, Graphs: 1, GraphSize: 32})
				require.NoError(b, err)
				defer ctx.Close()
				q := ctx.NewTensor(F32, hd, H, 1)
				mask := ctx.NewTensor(F32, kvLen, 1)
				k := ctx.NewTensor(F16, hd, kvLen, Hkv, 1)
				v := ctx.NewTensor(F16, kvLen, hd, Hkv, 1)
				var out *Tensor
				if kernel == "toy" {
					out = ctx.AttendOneSoftcap(q, k, v, mask, scale, capValue)
				} else {
					Q := ctx.Permute(ctx.Reshape(q, hd, H, 1, 1), [4]int{0, 2, 1, 3})
					kq := ctx.Scale(ctx.Tanh(ctx.Scale(ctx.MulMat(k, Q), scale/capValue)), capValue)
					kq = ctx.SoftMaxExt(kq, ctx.Reshape(mask, kvLen, 1, 1, 1), 1, 0)
					out = ctx.Cont(ctx.Permute(ctx.MulMat(v, kq), [4]int{0, 2, 1, 3}))
				}
				require.NotNil(b, out, "%v", ctx.Err())
				benchGraph(b, be, ctx, 32, out, func() {
					vals := make([]float32, q.Len())
					for i := range vals {
						vals[i] = float32(math.Sin(float64(i)))
					}
					require.NoError(b, q.SetF32(vals))
					require.NoError(b, mask.SetF32(make([]float32, mask.Len())))
					for _, x := range []*Tensor{k, v} {
						bits := make([]uint16, x.Len())
						for i := range bits {
							bits[i] = reference.F32ToF16(float32(math.Cos(float64(i))) / 4)
						}
						require.NoError(b, x.SetF16(bits))
					}
				})
			})
		}
	}
}
