package ggml

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/reference"
)

// roundColumnsQ32 is x's columns as toy_quantize_q32 rounds them: each block of 32 values
// divided by its largest magnitude over 127 (in f32), rounded to the nearest integer (ties to
// even, as the vector conversion rounds), times that scale.
func roundColumnsQ32(x reference.Tensor) reference.Tensor {
	out := reference.New(x.Ne[0], x.Ne[1])
	for b := 0; b < len(x.Data); b += 32 {
		amax := float32(0)
		for _, v := range x.Data[b : b+32] {
			amax = max(amax, float32(math.Abs(v)))
		}
		d, id := amax/127, float32(0)
		if amax > 0 {
			id = 127 / amax
		}
		for i, v := range x.Data[b : b+32] {
			out.Data[b+i] = math.RoundToEven(float64(float32(v)*id)) * float64(d)
		}
	}
	return out
}

// TestMulMatQ32 checks toy's 8-bit integer products over q8_0, q4_0, q5_0 and q5_1 weights
// against a float64 product of the weights as ggml's dequantizer reads them and the columns as
// the kernel rounds them (only f32 rounding apart), and against ggml's MulMat (which rounds the
// columns to q8_0 or q8_1 with an f16 scale), on shapes whose rows are not a multiple of the
// kernel's 64 nor its columns of its 3, odd and even counts of blocks, 1 to 200 columns, and
// 1 to 3 threads; then the same graph again on other columns (the claim counters reset).
func TestMulMatQ32(t *testing.T) {
	if !onCPU || !CPUKernelsQ32() {
		t.Skip("MulMatQ32 runs on a CPU build with AVX-512 VNNI only")
	}
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0, Q5_1} {
		for _, s := range []struct{ k, n, threads int }{{32, 1, 1}, {96, 23, 2}, {576, 130, 2}, {1536, 64, 2}, {64, 200, 3}, {320, 77, 1}} {
			t.Run(fmt.Sprintf("%s/%dx%d/threads=%d", TypeName(typ), s.k, s.n, s.threads), func(t *testing.T) {
				h := newHarness(t)
				if s.threads != testThreads {
					be, err := NewCPUBackend(s.threads)
					require.NoError(t, err)
					t.Cleanup(func() { be.Close() })
					h.be = be
				}
				raw, err := Quantize(typ, h.rand(-1, 1, s.k, s.n).ToF32(), s.k)
				require.NoError(t, err)
				w := h.inBytes(typ, raw, int64(s.k), int64(s.n))
				deq := h.c.Cast(w, F32) // the weights as ggml's dequantizer reads them
				const most = 200
				b := h.rand(-1, 1, s.k, most)
				x := h.in(b)
				ms := []int{1, 2, 3, 4, 5, 7, 25, 64, 65, 130, most}
				var outs, ggmls []*Tensor
				for _, m := range ms {
					cols := h.c.View(x, []int64{int64(s.k), int64(m)}, []int{s.k * 4}, 0)
					outs = append(outs, h.c.MulMatQ32(w, cols))
					ggmls = append(ggmls, h.c.MulMat(w, cols))
				}
				h.run(append(append(outs, ggmls...), deq)...)
				a := h.out(deq)
				want := reference.MulMat(a, roundColumnsQ32(b))
				scale := maxAbs(want.Data)
				for i, m := range ms {
					exact := reference.Tensor{Ne: [4]int{s.n, m, 1, 1}, Data: want.Data[:s.n*m]}
					// f32 sums of k/32 blocks' scaled integer sums: a few units of f32 rounding
					// of the largest result.
					near(t, fmt.Sprintf("MulMatQ32, %d columns", m), exact, h.out(outs[i]), 1e-6, scale)
					// ggml rounds the columns too, differently: within the two roundings' error.
					near(t, fmt.Sprintf("MulMatQ32 against ggml, %d columns", m), h.out(ggmls[i]), h.out(outs[i]), 3e-3, scale)
				}
				// The graph again, on other columns: the threads' claim counters were reset.
				b2 := h.rand(-1, 1, s.k, most)
				require.NoError(t, x.SetF32(b2.ToF32()))
				require.NoError(t, h.be.Compute(h.g))
				want2 := reference.MulMat(a, roundColumnsQ32(b2))
				near(t, "MulMatQ32 again", want2, h.out(outs[len(outs)-1]), 1e-6, maxAbs(want2.Data))
			})
		}
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		w, x := h.in(h.rand(-1, 1, 32, 4)), h.in(h.rand(-1, 1, 32, 5))
		require.Nil(t, h.c.MulMatQ32(w, x))
		require.Error(t, h.c.Err())
	})
}
