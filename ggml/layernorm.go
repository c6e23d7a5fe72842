package ggml

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/cpuops"
	"github.com/toyml/toy/generated/ggmlc"
)

// LayerNormMulAddCPU is Add(Mul(Norm(x, eps), w), b), GPT-2's LayerNorm with its scale w and bias
// b, computed by toy's own CPU kernel (kernels/cpu/c/gpt2/rms_norm.c, the gpt2 family's module
// of the kernel table) as one ggml custom operation: x f32 with contiguous rows, w and b f32
// [x's row length], contiguous. ggml makes three nodes of it, and its Norm sums a row's values
// one after the other in double; the kernel sums them eight at a time and normalises,
// multiplies and adds in one pass over the row, with ggml's float operations (its variance
// summed as ggml's kernel sums it for the instruction set of the build), so the results are
// ggml's to the bit unless the other order of the double sums moves a mean across a float
// rounding. Only the CPU backend computes it, and autodiff cannot differentiate it.
func (c *Context) LayerNormMulAddCPU(x, w, b *Tensor, eps float32) *Tensor {
	return c.op("LayerNormMulAddCPU", []*Tensor{x, w, b}, 1, func() error { return LayerNormMulAddCPUFits(x, w, b, eps) }, func() ggmlc.Tensor {
		ne := x.Ne()
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, ne[0], ne[1], ne[2], ne[3], []ggmlc.Tensor{x.t, w.t, b.t}, 3,
			cpuops.LayerNormMulAddAddress(), allThreads, pinned(c, eps))
	})
}

// LayerNormMulAddCPUFits says why LayerNormMulAddCPU cannot take x, w, b and eps, or nil when it
// can.
func LayerNormMulAddCPUFits(x, w, b *Tensor, eps float32) error {
	if err := needF32Rows(x, "operand"); err != nil {
		return err
	}
	for _, p := range []struct {
		t    *Tensor
		what string
	}{{w, "scale"}, {b, "bias"}} {
		if err := needType(p.t, F32, p.what); err != nil {
			return err
		}
		if pn := p.t.Ne(); pn[0] != x.Ne()[0] || pn[1] != 1 || pn[2] != 1 || pn[3] != 1 || !p.t.IsContiguous() {
			return fmt.Errorf("%s %s for %s: want %d contiguous values", p.what, p.t.describe(), x.describe(), x.Ne()[0])
		}
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return fmt.Errorf("eps %g: want a finite number, at least 0", eps)
	}
	return nil
}
