package ggml

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/ggmlc"
)

func (c *Context) binary(name string, a, b *Tensor, f func(ggmlc.Context, ggmlc.Tensor, ggmlc.Tensor) ggmlc.Tensor) *Tensor {
	return c.op(name, []*Tensor{a, b}, 1, func() error {
		if err := needFloat(a, b); err != nil {
			return err
		}
		if b.Type() != a.Type() && b.Type() != F32 {
			return fmt.Errorf("cannot combine %s with %s (b must be f32 or of a's type)", a.describe(), b.describe())
		}
		if err := needRows(a); err != nil {
			return err
		}
		if needRows(b) != nil && a.Ne() != b.Ne() {
			return fmt.Errorf("%s has strided rows and is broadcast (use Cont first)", b.describe())
		}
		return canRepeat(b, a)
	}, func() ggmlc.Tensor { return f(c.c, a.t, b.t) })
}

func (c *Context) unary(name string, a *Tensor, f func(ggmlc.Context, ggmlc.Tensor) ggmlc.Tensor) *Tensor {
	return c.op(name, []*Tensor{a}, 1, func() error {
		if err := needFloat(a); err != nil {
			return err
		}
		return needRows(a)
	}, func() ggmlc.Tensor { return f(c.c, a.t) })
}

// scaled is SCALE, whose builder asserts ggml_is_padded_1d.
func (c *Context) scaled(name string, a *Tensor, f func(ggmlc.Context, ggmlc.Tensor) ggmlc.Tensor) *Tensor {
	return c.op(name, []*Tensor{a}, 1, func() error {
		if err := needFloat(a); err != nil {
			return err
		}
		ne, nb := a.Ne(), a.Nb()
		if nb[0] != ggmlc.TypeSize(a.Type()) || nb[2] != nb[1]*int(ne[1]) || nb[3] != nb[2]*int(ne[2]) {
			return fmt.Errorf("%s is strided beyond dimension 1 (use Cont first)", a.describe())
		}
		return nil
	}, func() ggmlc.Tensor { return f(c.c, a.t) })
}

// rowwise is a unary op that also needs contiguous rows (ggml_is_contiguous_1, asserted by
// ggml_unary_impl and by the CPU kernels of SQR, SQRT and LOG).
func (c *Context) rowwise(name string, a *Tensor, f func(ggmlc.Context, ggmlc.Tensor) ggmlc.Tensor) *Tensor {
	return c.op(name, []*Tensor{a}, 1, func() error {
		if err := needFloat(a); err != nil {
			return err
		}
		return needContiguous1(a)
	}, func() ggmlc.Tensor { return f(c.c, a.t) })
}

// Add is a+b; b is broadcast over a (each dimension of a a multiple of b's).
func (c *Context) Add(a, b *Tensor) *Tensor { return c.binary("Add", a, b, ggmlc.Add) }

// Sub is a-b; b is broadcast over a. (Its backward needs b of a's shape.)
func (c *Context) Sub(a, b *Tensor) *Tensor { return c.binary("Sub", a, b, ggmlc.Sub) }

// Mul is the element-wise a*b; b is broadcast over a.
func (c *Context) Mul(a, b *Tensor) *Tensor { return c.binary("Mul", a, b, ggmlc.Mul) }

// Div is the element-wise a/b; b is broadcast over a. (Its backward needs b of a's shape.)
func (c *Context) Div(a, b *Tensor) *Tensor { return c.binary("Div", a, b, ggmlc.Div) }

// Add1 adds the scalar b to every element of a.
func (c *Context) Add1(a, b *Tensor) *Tensor {
	return c.op("Add1", []*Tensor{a, b}, 1, func() error {
		if err := needFloat(a, b); err != nil {
			return err
		}
		if b.Len() != 1 {
			return fmt.Errorf("%s is not a scalar", b.describe())
		}
		return needContiguous(a)
	}, func() ggmlc.Tensor { return ggmlc.Add1(c.c, a.t, b.t) })
}

// Scale is s*a.
func (c *Context) Scale(a *Tensor, s float32) *Tensor {
	return c.scaled("Scale", a, func(ctx ggmlc.Context, a ggmlc.Tensor) ggmlc.Tensor { return ggmlc.Scale(ctx, a, s) })
}

// ScaleBias is s*a + b.
func (c *Context) ScaleBias(a *Tensor, s, b float32) *Tensor {
	return c.scaled("ScaleBias", a, func(ctx ggmlc.Context, a ggmlc.Tensor) ggmlc.Tensor { return ggmlc.ScaleBias(ctx, a, s, b) })
}

// Clamp limits every element of a to [lo, hi].
func (c *Context) Clamp(a *Tensor, lo, hi float32) *Tensor {
	return c.op("Clamp", []*Tensor{a}, 1, func() error {
		if lo > hi {
			return fmt.Errorf("empty range [%g, %g]", lo, hi)
		}
		if err := needFloat(a); err != nil {
			return err
		}
		return needRows(a)
	}, func() ggmlc.Tensor { return ggmlc.Clamp(c.c, a.t, lo, hi) })
}

// Sqr is a².
func (c *Context) Sqr(a *Tensor) *Tensor { return c.rowwise("Sqr", a, ggmlc.Sqr) }

// Sqrt is √a.
func (c *Context) Sqrt(a *Tensor) *Tensor { return c.rowwise("Sqrt", a, ggmlc.Sqrt) }

// Log is the natural logarithm of a.
func (c *Context) Log(a *Tensor) *Tensor { return c.rowwise("Log", a, ggmlc.Log) }

// Exp is eᵃ.
func (c *Context) Exp(a *Tensor) *Tensor { return c.rowwise("Exp", a, ggmlc.Exp) }

// Neg is -a.
func (c *Context) Neg(a *Tensor) *Tensor { return c.rowwise("Neg", a, ggmlc.Neg) }

// Abs is |a|.
func (c *Context) Abs(a *Tensor) *Tensor { return c.rowwise("Abs", a, ggmlc.Abs) }

// Softplus is log(1+eᵃ).
func (c *Context) Softplus(a *Tensor) *Tensor { return c.rowwise("Softplus", a, ggmlc.Softplus) }

// Silu is a·σ(a).
func (c *Context) Silu(a *Tensor) *Tensor { return c.rowwise("Silu", a, ggmlc.Silu) }

// Relu is max(a, 0).
func (c *Context) Relu(a *Tensor) *Tensor { return c.rowwise("Relu", a, ggmlc.Relu) }

// Tanh is tanh(a). It has no backward.
func (c *Context) Tanh(a *Tensor) *Tensor { return c.rowwise("Tanh", a, ggmlc.Tanh) }

// Sigmoid is σ(a). It has no backward.
func (c *Context) Sigmoid(a *Tensor) *Tensor { return c.rowwise("Sigmoid", a, ggmlc.Sigmoid) }

// Gelu is GELU in its tanh approximation. It has no backward (see GeluComposite).
func (c *Context) Gelu(a *Tensor) *Tensor { return c.rowwise("Gelu", a, ggmlc.Gelu) }

// GeluErf is the exact GELU, x·Φ(x). It has no backward.
func (c *Context) GeluErf(a *Tensor) *Tensor { return c.rowwise("GeluErf", a, ggmlc.GeluErf) }

// GeluQuick is x·σ(1.702x). It has no backward.
func (c *Context) GeluQuick(a *Tensor) *Tensor { return c.rowwise("GeluQuick", a, ggmlc.GeluQuick) }

// GeluComposite is the tanh-form GELU built from ops that have a backward (and that never
// overflow): x·exp(-softplus(-1.5957691·(x+0.044715x³))).
func (c *Context) GeluComposite(x *Tensor) *Tensor {
	z := c.Scale(c.Add(x, c.Scale(c.Mul(c.Sqr(x), x), 0.044715)), -1.5957691)
	return c.Mul(x, c.Exp(c.Scale(c.Softplus(z), -1)))
}

// Sum is the scalar sum of all elements.
func (c *Context) Sum(a *Tensor) *Tensor { return c.unary("Sum", a, ggmlc.Sum) }

// SumRows sums each row: [n0, n1, n2, n3] → [1, n1, n2, n3].
func (c *Context) SumRows(a *Tensor) *Tensor { return c.unary("SumRows", a, ggmlc.SumRows) }

// Mean averages each row: [n0, n1, n2, n3] → [1, n1, n2, n3]. (Its backward is fragile when a
// already has a gradient; Scale(SumRows(a), 1/n0) is equivalent.)
func (c *Context) Mean(a *Tensor) *Tensor { return c.unary("Mean", a, ggmlc.Mean) }

// Norm normalizes each row to mean 0 and variance 1 (LayerNorm without the affine). It has no
// backward (see LayerNormComposite).
func (c *Context) Norm(a *Tensor, eps float32) *Tensor {
	return c.normed("Norm", a, eps, ggmlc.Norm)
}

// LayerNormComposite is Norm built from ops that have a backward: rms_norm(x - mean(x)).
func (c *Context) LayerNormComposite(x *Tensor, eps float32) *Tensor {
	if x == nil {
		return c.op("LayerNormComposite", []*Tensor{x}, 0, nil, nil)
	}
	mu := c.Scale(c.SumRows(x), -1/float32(x.Ne()[0]))
	return c.RMSNorm(c.Add(x, mu), eps)
}

// RMSNorm scales each row by the inverse of its root mean square: x/√(mean(x²)+eps).
func (c *Context) RMSNorm(a *Tensor, eps float32) *Tensor {
	return c.normed("RMSNorm", a, eps, ggmlc.RMSNorm)
}

// normed is a norm op. ggml's kernels assert eps ≥ 0 when they run (aborting the process), so
// a negative, NaN or infinite eps is refused while the graph is built.
func (c *Context) normed(name string, a *Tensor, eps float32, f func(ggmlc.Context, ggmlc.Tensor, float32) ggmlc.Tensor) *Tensor {
	if !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return c.op(name, []*Tensor{a}, 1, func() error { return fmt.Errorf("eps %g: want a finite value ≥ 0", eps) }, nil)
	}
	return c.unary(name, a, func(ctx ggmlc.Context, a ggmlc.Tensor) ggmlc.Tensor { return f(ctx, a, eps) })
}

// MulMat multiplies a [k, m, …] by b [k, n, …] into [m, n, …]: out[i,j] = Σ a[:,i]·b[:,j].
// a is broadcast over b's dimensions 2 and 3.
func (c *Context) MulMat(a, b *Tensor) *Tensor {
	return c.op("MulMat", []*Tensor{a, b}, 1, func() error {
		an, bn := a.Ne(), b.Ne()
		if an[0] != bn[0] || bn[2]%an[2] != 0 || bn[3]%an[3] != 0 {
			return fmt.Errorf("cannot multiply %s by %s (want a [k, m, p, q], b [k, n, p·r, q·s])", a.describe(), b.describe())
		}
		if nb := a.Nb(); nb[0] > nb[1] {
			return fmt.Errorf("%s is transposed; use Cont first", a.describe())
		}
		if !ValidType(a.Type()) || !isFloat(b.Type()) {
			return fmt.Errorf("b %s must be a float type", b.describe())
		}
		// ggml's GEMM asserts that a row's stride is at least a row, for a always and for b
		// when ggml finds it contiguous (one column).
		if !a.DenseRows() {
			return fmt.Errorf("a %s has overlapping rows (a transposed view of one row or column); use Cont first", a.describe())
		}
		if b.Ne()[1] == 1 && !b.DenseRows() {
			return fmt.Errorf("b %s has overlapping rows (a transposed view of one row or column); use Cont first", b.describe())
		}
		return needRows(b)
	}, func() ggmlc.Tensor { return ggmlc.MulMat(c.c, a.t, b.t) })
}

// MulMatID multiplies b by the experts ids selects (mixture of experts): experts [k, m, E],
// b [k, e or 1, T], ids [e, T] i32 → [m, e, T].
func (c *Context) MulMatID(experts, b, ids *Tensor) *Tensor {
	return c.op("MulMatID", []*Tensor{experts, b, ids}, 1, func() error {
		en, bn, in := experts.Ne(), b.Ne(), ids.Ne()
		switch {
		case ids.Type() != I32:
			return fmt.Errorf("ids %s must be i32", ids.describe())
		case en[3] != 1 || bn[3] != 1 || in[2] != 1 || in[3] != 1:
			return fmt.Errorf("want experts [k, m, E], b [k, e, T], ids [e, T]; got %s, %s, %s", experts.describe(), b.describe(), ids.describe())
		case in[1] != bn[2] || en[0] != bn[0] || in[0]%bn[1] != 0:
			return fmt.Errorf("shapes do not agree: experts %s, b %s, ids %s", experts.describe(), b.describe(), ids.describe())
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.MulMatID(c.c, experts.t, b.t, ids.t) })
}

// OutProd is the outer product of a [m, k] and b [n, k] into [m, n].
func (c *Context) OutProd(a, b *Tensor) *Tensor {
	return c.op("OutProd", []*Tensor{a, b}, 1, func() error {
		an, bn := a.Ne(), b.Ne()
		if an[1] != bn[1] || bn[2]%an[2] != 0 || bn[3]%an[3] != 0 {
			return fmt.Errorf("cannot take the outer product of %s and %s", a.describe(), b.describe())
		}
		// ggml's CPU kernel reads a in f32 or a block-quantized type (it aborts on f16), b in f32.
		if err := needType(b, F32, "b"); err != nil {
			return err
		}
		if t := a.Type(); t != F32 && (!IsQuantized(t) || t == Q8_1 || t == Q8_K) {
			return fmt.Errorf("a %s: want f32 or a block-quantized type", a.describe())
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.OutProd(c.c, a.t, b.t) })
}

// SwigluSplit is silu(g)·u, the SwiGLU form that has a backward.
func (c *Context) SwigluSplit(g, u *Tensor) *Tensor {
	return c.glu("SwigluSplit", g, u, ggmlc.SwigluSplit)
}

// GegluSplit is gelu(g)·u. It has no backward.
func (c *Context) GegluSplit(g, u *Tensor) *Tensor {
	return c.glu("GegluSplit", g, u, ggmlc.GegluSplit)
}

func (c *Context) glu(name string, g, u *Tensor, f func(ggmlc.Context, ggmlc.Tensor, ggmlc.Tensor) ggmlc.Tensor) *Tensor {
	return c.op(name, []*Tensor{g, u}, 1, func() error {
		if err := needFloat(g, u); err != nil {
			return err
		}
		if err := sameShape(g, u); err != nil {
			return err
		}
		if g.Type() != u.Type() {
			return fmt.Errorf("types differ: %s and %s", g.describe(), u.describe())
		}
		return needContiguous(g, u)
	}, func() ggmlc.Tensor { return f(c.c, g.t, u.t) })
}

// SoftMax is the softmax of each row.
func (c *Context) SoftMax(a *Tensor) *Tensor { return c.SoftMaxExt(a, nil, 1, 0) }

// SoftMaxExt is softmax(scale·a + mask) per row, with ALiBi when maxBias > 0. mask (or nil) is
// f32 or f16 [n0, ≥n1, …] and broadcast over a's dimensions 2 and 3. Training needs maxBias 0.
func (c *Context) SoftMaxExt(a, mask *Tensor, scale, maxBias float32) *Tensor {
	inputs := []*Tensor{a}
	if mask != nil {
		inputs = append(inputs, mask)
	}
	return c.op("SoftMaxExt", inputs, 1, func() error {
		if err := needFloat(a); err != nil {
			return err
		}
		if err := needContiguous(a); err != nil {
			return err
		}
		if mask == nil {
			if maxBias > 0 {
				return fmt.Errorf("ALiBi (maxBias > 0) needs a mask")
			}
			return nil
		}
		an, mn := a.Ne(), mask.Ne()
		switch {
		case mask.Type() != F32 && mask.Type() != F16:
			return fmt.Errorf("mask %s must be f32 or f16", mask.describe())
		case !mask.IsContiguous():
			return fmt.Errorf("mask %s is not contiguous", mask.describe())
		case mn[0] != an[0] || mn[1] < an[1] || an[2]%mn[2] != 0 || an[3]%mn[3] != 0:
			return fmt.Errorf("mask %s does not fit %s", mask.describe(), a.describe())
		}
		return nil
	}, func() ggmlc.Tensor {
		var m ggmlc.Tensor
		if mask != nil {
			m = mask.t
		}
		return ggmlc.SoftMaxExt(c.c, a.t, m, scale, maxBias)
	})
}

// SoftMaxExtBack is the gradient of SoftMaxExt(x, mask, scale, 0) with respect to x, from the
// gradient grad of its output y: scale·y⊙(grad − Σ grad⊙y) on each row. grad and y are
// contiguous f32 tensors of one shape.
func (c *Context) SoftMaxExtBack(grad, y *Tensor, scale float32) *Tensor {
	return c.op("SoftMaxExtBack", []*Tensor{grad, y}, 1, func() error {
		for _, t := range []*Tensor{grad, y} {
			if t.Type() != F32 || !t.IsContiguous() {
				return fmt.Errorf("%s must be contiguous f32", t.describe())
			}
		}
		if grad.Ne() != y.Ne() {
			return fmt.Errorf("gradient %s and output %s differ in shape", grad.describe(), y.describe())
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.SoftMaxExtBack(c.c, grad.t, y.t, scale, 0) })
}

// DiagMaskInf sets a[i, j] to -∞ where i > j + nPast (a causal mask in place of a mask tensor).
func (c *Context) DiagMaskInf(a *Tensor, nPast int) *Tensor {
	return c.op("DiagMaskInf", []*Tensor{a}, 1, func() error {
		if nPast < 0 {
			return fmt.Errorf("nPast %d is negative", nPast)
		}
		if err := needFloat(a); err != nil {
			return err
		}
		return needContiguous(a)
	}, func() ggmlc.Tensor { return ggmlc.DiagMaskInf(c.c, a.t, nPast) })
}

// Rope holds the parameters of rotary position embedding (ggml_rope_ext).
type Rope struct {
	// Dims is the number of leading elements of each head that rotate (even, ≤ head size).
	Dims int
	// Mode is RopeNormal (adjacent pairs, as llama.cpp's llama) or RopeNeox (halves).
	Mode RopeMode
	// FreqBase is θ's base (10000 for LLaMA); FreqScale divides positions (linear scaling is
	// 1/factor).
	FreqBase, FreqScale float32
	// YaRN: ExtFactor (0 disables), AttnFactor (1 = none), BetaFast, BetaSlow, and the
	// original training context OrigCtx.
	ExtFactor, AttnFactor, BetaFast, BetaSlow float32
	OrigCtx                                   int
}

// RopeMode says which elements of a head RoPE rotates together.
type RopeMode = ggmlc.RopeMode

// RoPE modes.
const (
	RopeNormal = ggmlc.RopeModeNormal
	RopeNeox   = ggmlc.RopeModeNeox
)

// RopeExt rotates a [headDim, heads, tokens, 1] by the i32 positions pos [tokens]; freqFactors
// (f32 [≥Dims/2]) may be nil.
func (c *Context) RopeExt(a, pos, freqFactors *Tensor, r Rope) *Tensor {
	inputs := []*Tensor{a, pos}
	if freqFactors != nil {
		inputs = append(inputs, freqFactors)
	}
	return c.op("RopeExt", inputs, 1, func() error {
		an := a.Ne()
		switch {
		case r.Mode != RopeNormal && r.Mode != RopeNeox:
			return fmt.Errorf("mode %d: want RopeNormal or RopeNeox", r.Mode)
		case r.Dims <= 0 || r.Dims%2 != 0 || int64(r.Dims) > an[0]:
			return fmt.Errorf("Dims %d: want an even number in (0, %d]", r.Dims, an[0])
		case pos.Type() != I32 || pos.Rows() != 1:
			return fmt.Errorf("positions %s: want an i32 vector", pos.describe())
		case pos.Len() != an[2]:
			return fmt.Errorf("%d positions for %s: want one per token (dimension 2)", pos.Len(), a.describe())
		case freqFactors != nil && (freqFactors.Type() != F32 || freqFactors.Ne()[0] < int64(r.Dims/2)):
			return fmt.Errorf("freq factors %s: want f32 with at least %d elements", freqFactors.describe(), r.Dims/2)
		}
		return needFloat(a)
	}, func() ggmlc.Tensor {
		var ff ggmlc.Tensor
		if freqFactors != nil {
			ff = freqFactors.t
		}
		return ggmlc.RopeExt(c.c, a.t, pos.t, ff, r.Dims, r.Mode, r.OrigCtx, r.FreqBase, r.FreqScale,
			r.ExtFactor, r.AttnFactor, r.BetaFast, r.BetaSlow)
	})
}

// FlashAttnExt is fused attention softmax(scale·qkᵀ + mask)·v for inference (no backward):
// q [d, nq, H, B] f32, k [d, nkv, Hkv, B], v [dv, nkv, Hkv, B] with H a multiple of Hkv, and an
// f16 mask [nkv, ≥nq] or nil. The result is [dv, H, nq, B] (heads before tokens).
func (c *Context) FlashAttnExt(q, k, v, mask *Tensor, scale, maxBias, softcap float32) *Tensor {
	inputs := []*Tensor{q, k, v}
	if mask != nil {
		inputs = append(inputs, mask)
	}
	return c.op("FlashAttnExt", inputs, 1, func() error {
		qn, kn, vn := q.Ne(), k.Ne(), v.Ne()
		switch {
		case q.Type() != F32:
			return fmt.Errorf("q %s must be f32", q.describe())
		case qn[0] != kn[0] || qn[2]%kn[2] != 0 || qn[3]%kn[3] != 0:
			return fmt.Errorf("q %s and k %s disagree", q.describe(), k.describe())
		case kn[1] != vn[1] || kn[2] != vn[2] || qn[3] != vn[3]:
			return fmt.Errorf("k %s and v %s disagree", k.describe(), v.describe())
		}
		if mask != nil {
			mn := mask.Ne()
			switch {
			case mask.Type() != F16:
				return fmt.Errorf("mask %s must be f16", mask.describe())
			case !mask.IsContiguous():
				return fmt.Errorf("mask %s is not contiguous", mask.describe())
			case mn[0] != kn[1] || mn[1] < qn[1] || qn[2]%mn[2] != 0 || qn[3]%mn[3] != 0:
				return fmt.Errorf("mask %s does not fit q %s and k %s", mask.describe(), q.describe(), k.describe())
			}
		} else if maxBias > 0 {
			return fmt.Errorf("ALiBi (maxBias > 0) needs a mask")
		}
		return nil
	}, func() ggmlc.Tensor {
		var m ggmlc.Tensor
		if mask != nil {
			m = mask.t
		}
		return ggmlc.FlashAttnExt(c.c, q.t, k.t, v.t, m, scale, maxBias, softcap)
	})
}

// Concat joins a and b along dimension dim; they must agree in every other dimension. It has
// no backward.
func (c *Context) Concat(a, b *Tensor, dim int) *Tensor {
	return c.op("Concat", []*Tensor{a, b}, 1, func() error {
		if dim < 0 || dim > 3 {
			return fmt.Errorf("dimension %d: want 0..3", dim)
		}
		if a.Type() != b.Type() {
			return fmt.Errorf("types differ: %s and %s", a.describe(), b.describe())
		}
		an, bn := a.Ne(), b.Ne()
		for d := range an {
			if d != dim && an[d] != bn[d] {
				return fmt.Errorf("%s and %s differ in dimension %d", a.describe(), b.describe(), d)
			}
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.Concat(c.c, a.t, b.t, dim) })
}

// Repeat tiles a to the shape of like.
func (c *Context) Repeat(a, like *Tensor) *Tensor {
	return c.op("Repeat", []*Tensor{a, like}, 1, func() error {
		if err := needRows(a); err != nil {
			return err
		}
		return canRepeat(a, like)
	},
		func() ggmlc.Tensor { return ggmlc.Repeat(c.c, a.t, like.t) })
}

// Argmax is the index of the largest element of each row of the matrix a, as i32 [rows].
func (c *Context) Argmax(a *Tensor) *Tensor {
	return c.op("Argmax", []*Tensor{a}, 1, func() error {
		if ne := a.Ne(); ne[2] != 1 || ne[3] != 1 {
			return fmt.Errorf("%s is not a matrix", a.describe())
		}
		if err := needType(a, F32, "input"); err != nil {
			return err
		}
		return needRows(a)
	}, func() ggmlc.Tensor { return ggmlc.Argmax(c.c, a.t) })
}

// Argsort sorts each row's indices by value (i32 result of a's shape).
func (c *Context) Argsort(a *Tensor, descending bool) *Tensor {
	order := ggmlc.SortOrderAsc
	if descending {
		order = ggmlc.SortOrderDesc
	}
	return c.op("Argsort", []*Tensor{a}, 1, func() error {
		if err := needType(a, F32, "input"); err != nil {
			return err
		}
		return needRows(a)
	},
		func() ggmlc.Tensor { return ggmlc.Argsort(c.c, a.t, order) })
}

// TopK is the indices of the k largest elements of each row, as i32 [k, …] (in no particular
// order).
func (c *Context) TopK(a *Tensor, k int) *Tensor {
	return c.op("TopK", []*Tensor{a}, 2, func() error {
		if k <= 0 || int64(k) > a.Ne()[0] {
			return fmt.Errorf("k %d: want 1..%d for %s", k, a.Ne()[0], a.describe())
		}
		if err := needType(a, F32, "input"); err != nil {
			return err
		}
		return needRows(a)
	}, func() ggmlc.Tensor { return ggmlc.TopK(c.c, a.t, k) })
}

// GetRows gathers rows of a [n0, n1, n2] by the i32 indices rows [r, n2] into [n0, r, n2]
// (f32 unless a is i32).
func (c *Context) GetRows(a, rows *Tensor) *Tensor {
	return c.op("GetRows", []*Tensor{a, rows}, 1, func() error {
		an, rn := a.Ne(), rows.Ne()
		if rows.Type() != I32 {
			return fmt.Errorf("indices %s must be i32", rows.describe())
		}
		if an[2] != rn[1] || an[3] != rn[2] || rn[3] != 1 {
			return fmt.Errorf("indices %s do not fit %s", rows.describe(), a.describe())
		}
		return needRows(a)
	}, func() ggmlc.Tensor { return ggmlc.GetRows(c.c, a.t, rows.t) })
}

// GetRowsBack is the gradient of GetRows: it scatters the rows of grad [E, n] into a zero
// tensor of like's shape [E, R] (f32), adding each row at its i32 index in rows [n]; repeated
// indices sum. like only gives the shape.
func (c *Context) GetRowsBack(grad, rows, like *Tensor) *Tensor {
	return c.op("GetRowsBack", []*Tensor{grad, rows, like}, 1, func() error {
		gn, ln := grad.Ne(), like.Ne()
		switch {
		case grad.Type() != F32 || !grad.IsContiguous():
			return fmt.Errorf("gradient %s must be contiguous f32", grad.describe())
		case rows.Type() != I32:
			return fmt.Errorf("indices %s must be i32", rows.describe())
		case gn[2] != 1 || gn[3] != 1 || ln[2] != 1 || ln[3] != 1:
			return fmt.Errorf("gradient %s and table %s must be matrices", grad.describe(), like.describe())
		case gn[0] != ln[0] || rows.Len() != gn[1]:
			return fmt.Errorf("gradient %s, indices %s and table %s do not fit", grad.describe(), rows.describe(), like.describe())
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.GetRowsBack(c.c, grad.t, rows.t, like.t) })
}

// SetRows writes the f32 rows of b [n0, r, …] into a [n0, n1, …] at the i32 or i64 indices
// idx [r, …] (converting to a's type), as a KV cache is filled. It returns a view of a.
func (c *Context) SetRows(a, b, idx *Tensor) *Tensor {
	return c.op("SetRows", []*Tensor{a, b, idx}, 1, func() error {
		an, bn, in := a.Ne(), b.Ne(), idx.Ne()
		switch {
		case b.Type() != F32:
			return fmt.Errorf("rows %s must be f32", b.describe())
		case idx.Type() != I32 && idx.Type() != I64:
			return fmt.Errorf("indices %s must be i32 or i64", idx.describe())
		case an[0] != bn[0] || an[2] != bn[2] || an[3] != bn[3] || bn[1] != in[0] || bn[2]%in[1] != 0 || bn[3]%in[2] != 0 || in[3] != 1:
			return fmt.Errorf("a %s, rows %s and indices %s do not fit", a.describe(), b.describe(), idx.describe())
		case a.Nb()[0] != ggmlc.TypeSize(a.Type()) || b.Nb()[0] != ggmlc.TypeSize(b.Type()):
			return fmt.Errorf("rows must be contiguous")
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.SetRows(c.c, a.t, b.t, idx.t) })
}

// CrossEntropyLoss is -Σ labels·log softmax(logits) / rows, a scalar, for logits and label
// probabilities of the same shape [classes, rows] (each label row must sum to 1 for the
// backward to be right).
func (c *Context) CrossEntropyLoss(logits, labels *Tensor) *Tensor {
	return c.op("CrossEntropyLoss", []*Tensor{logits, labels}, 1, func() error {
		if err := needType(logits, F32, "logits"); err != nil {
			return err
		}
		if err := needType(labels, F32, "labels"); err != nil {
			return err
		}
		if err := needRows(logits, labels); err != nil {
			return err
		}
		return sameShape(logits, labels)
	}, func() ggmlc.Tensor { return ggmlc.CrossEntropyLoss(c.c, logits.t, labels.t) })
}

// OptStepAdamW updates the param w in place from its gradient and moments m, v (all of w's
// shape, f32), reading the 7 f32 AdamW parameters (lr, β1, β2, ε, wd, 1/(1-β1ᵗ), 1/(1-β2ᵗ)).
func (c *Context) OptStepAdamW(w, grad, m, v, params *Tensor) *Tensor {
	return c.op("OptStepAdamW", []*Tensor{w, grad, m, v, params}, 1, func() error {
		if !w.IsParam() {
			return fmt.Errorf("%s is not marked as a param", w.describe())
		}
		for _, t := range []*Tensor{w, grad, m, v, params} {
			if err := needType(t, F32, "operand"); err != nil {
				return err
			}
		}
		for _, t := range []*Tensor{grad, m, v} {
			if err := sameShape(w, t); err != nil {
				return err
			}
		}
		if params.Len() != 7 {
			return fmt.Errorf("AdamW parameters %s: want 7 elements", params.describe())
		}
		// The kernel walks grad, m and v with w's strides.
		return needContiguous(w, grad, m, v, params)
	}, func() ggmlc.Tensor { return ggmlc.OptStepAdamW(c.c, w.t, grad.t, m.t, v.t, params.t) })
}

// Acc is a copy of a with b added into the view of a given by strides nb1..nb3 and a byte
// offset (a differentiable way to place b inside a).
func (c *Context) Acc(a, b *Tensor, nb1, nb2, nb3, offset int) *Tensor {
	return c.op("Acc", []*Tensor{a, b}, 1, func() error {
		if err := needType(a, F32, "a"); err != nil {
			return err
		}
		if err := needType(b, F32, "b"); err != nil {
			return err
		}
		if b.Len() > a.Len() {
			return fmt.Errorf("%s does not fit in %s", b.describe(), a.describe())
		}
		bn := b.Ne()
		last := offset + int(bn[0]-1)*4 + int(bn[1]-1)*nb1 + int(bn[2]-1)*nb2 + int(bn[3]-1)*nb3 + 4
		if offset < 0 || nb1 < 0 || nb2 < 0 || nb3 < 0 || last > a.Bytes() {
			return fmt.Errorf("the view for %s at offset %d runs past %s", b.describe(), offset, a.describe())
		}
		return needContiguous(a)
	}, func() ggmlc.Tensor { return ggmlc.Acc(c.c, a.t, b.t, nb1, nb2, nb3, offset) })
}
