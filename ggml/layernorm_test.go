package ggml

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/reference"
)

// TestLayerNormMulAddCPU compares GPT-2's fused LayerNorm with a float64 reference (ggml_norm's
// definition, times the scale, plus the bias) and, to the bit, with ggml's own Norm, Mul and
// Add, on rows of GPT-2's widths, odd and short lengths (the variance's blocks and the values
// left over), strided rows and magnitudes and means from 1e-3 to 1e3; and checks what it
// refuses.
func TestLayerNormMulAddCPU(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("LayerNormMulAddCPU runs on a vectorized CPU build only")
	}
	const eps = 1e-5
	for _, s := range []struct {
		name   string
		ne     []int
		stride int // the input's row stride in floats (0: rows side by side)
	}{
		{"a decoding step's rows", []int{768, 8}, 0},
		{"gpt2-demo's width", []int{192, 33}, 0},
		{"odd row length, 4-D", []int{37, 5, 2, 3}, 0},
		{"shorter than a block", []int{3, 7}, 0},
		{"long rows", []int{1100, 3}, 0},
		{"strided rows", []int{768, 5}, 800},
	} {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t)
			n := s.ne[0]
			x := h.rand(-4, 4, s.ne...)
			for r := 0; r < x.NRows(); r++ { // magnitudes from 1e-3 to 1e3, means up to twice the spread
				f, mean := math.Pow(10, float64(r%7)-3), float64(r%5-2)
				for i := range n {
					x.Data[r*n+i] = reference.RoundF32((x.Data[r*n+i] + mean) * f)
				}
			}
			w, b := h.rand(-2, 2, n), h.rand(-1, 1, n)
			var xi *Tensor
			if s.stride == 0 {
				xi = h.in(x)
			} else {
				padded := reference.New(s.stride, s.ne[1])
				for r := range s.ne[1] {
					copy(padded.Data[r*s.stride:r*s.stride+n], x.Data[r*n:(r+1)*n])
				}
				xi = h.c.View(h.in(padded), []int64{int64(n), int64(s.ne[1])}, []int{4 * s.stride}, 0)
			}
			wi, bi := h.in(w), h.in(b)
			got, viaGGML := h.c.LayerNormMulAddCPU(xi, wi, bi, eps), h.c.Add(h.c.Mul(h.c.Norm(xi, eps), wi), bi)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, viaGGML)
			want := reference.Add(reference.Mul(reference.Norm(x, eps), w), b)
			near(t, "LayerNormMulAddCPU", want, h.out(got), 2e-6, 1) // w·y and b cancel: errors against the terms' size
			sameBits(t, "LayerNormMulAddCPU against ggml's Norm, Mul and Add", h.out(viaGGML), h.out(got))
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		x, w, b := h.in(h.rand(-1, 1, 8, 2)), h.in(h.rand(-1, 1, 8)), h.in(h.rand(-1, 1, 8))
		require.NoError(t, LayerNormMulAddCPUFits(x, w, b, eps))
		for _, c := range []struct {
			x, w, b *Tensor
			eps     float32
			want    string
		}{
			{x, h.in(h.rand(-1, 1, 7)), b, eps, "scale"},
			{x, w, h.in(h.rand(-1, 1, 8, 2)), eps, "bias"},
			{h.inF16(h.rand(-1, 1, 8, 2)), w, b, eps, "want f32"},
			{x, w, h.inF16(h.rand(-1, 1, 8)), eps, "want f32"},
			{x, w, b, -1, "eps -1"},
			{x, w, b, float32(math.NaN()), "eps NaN"},
		} {
			err := LayerNormMulAddCPUFits(c.x, c.w, c.b, c.eps)
			require.ErrorContains(t, err, c.want)
			require.Nil(t, h.c.LayerNormMulAddCPU(c.x, c.w, c.b, c.eps))
		}
	})
}
