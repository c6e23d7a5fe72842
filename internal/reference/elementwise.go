package reference

import "math"

// CanRepeat reports whether t1 can be formed by repeating t0
// (ggml_can_repeat): every extent of t1 is a multiple of t0's. An empty t0
// repeats only into an empty t1.
func CanRepeat(t0, t1 Tensor) bool {
	if t0.Len() == 0 {
		return t1.Len() == 0
	}
	for d := 0; d < MaxDims; d++ {
		if t1.Ne[d]%t0.Ne[d] != 0 {
			return false
		}
	}
	return true
}

// binary applies op with ggml's broadcast of b over a (binary-ops.cpp): the
// result has a's shape and b is indexed modulo its extents in every dim.
func binaryOp(fn string, a, b Tensor, op func(x, y float64) float64) Tensor {
	a.check(fn)
	b.check(fn)
	assertf(CanRepeat(b, a), fn, "b %v cannot be repeated to a %v (ggml_can_repeat)", b.Ne, a.Ne)
	out := New(a.Ne[:]...)
	for i3 := 0; i3 < a.Ne[3]; i3++ {
		for i2 := 0; i2 < a.Ne[2]; i2++ {
			for i1 := 0; i1 < a.Ne[1]; i1++ {
				arow := a.Row(i1, i2, i3)
				brow := b.Row(i1%b.Ne[1], i2%b.Ne[2], i3%b.Ne[3])
				orow := out.Row(i1, i2, i3)
				for i0, x := range arow {
					orow[i0] = op(x, brow[i0%b.Ne[0]])
				}
			}
		}
	}
	return out
}

// Add is ggml_add(a, b) = a + b; the result has a's shape and b is repeated
// over a (ggml_can_repeat(b, a): each a extent a multiple of b's; b is indexed
// modulo its extents).
func Add(a, b Tensor) Tensor {
	return binaryOp("Add", a, b, func(x, y float64) float64 { return x + y })
}

// Sub is ggml_sub(a, b) = a - b with b broadcast over a as in Add.
func Sub(a, b Tensor) Tensor {
	return binaryOp("Sub", a, b, func(x, y float64) float64 { return x - y })
}

// Mul is ggml_mul(a, b) = a * b elementwise with b broadcast over a as in Add.
func Mul(a, b Tensor) Tensor {
	return binaryOp("Mul", a, b, func(x, y float64) float64 { return x * y })
}

// Div is ggml_div(a, b) = a / b elementwise with b broadcast over a as in Add.
func Div(a, b Tensor) Tensor {
	return binaryOp("Div", a, b, func(x, y float64) float64 { return x / y })
}

// Add1 is ggml_add1(a, b) with b a scalar tensor (given here as its value):
// a + b elementwise. Shape of a.
func Add1(a Tensor, b float64) Tensor { return a.Map(func(x float64) float64 { return x + b }) }

// Scale is ggml_scale(a, s) = a*s. Shape of a.
func Scale(a Tensor, s float64) Tensor { return a.Map(func(x float64) float64 { return x * s }) }

// ScaleBias is ggml_scale_bias(a, s, b) = a*s + b. Shape of a.
func ScaleBias(a Tensor, s, b float64) Tensor {
	return a.Map(func(x float64) float64 { return x*s + b })
}

// Sqr is ggml_sqr: x*x.
func Sqr(a Tensor) Tensor { return a.Map(func(x float64) float64 { return x * x }) }

// Sqrt is ggml_sqrt: sqrt(x) (NaN for x < 0).
func Sqrt(a Tensor) Tensor { return a.Map(math.Sqrt) }

// Log is ggml_log: natural log (−Inf at 0, NaN for x < 0).
func Log(a Tensor) Tensor { return a.Map(math.Log) }

// Exp is ggml_exp: e^x.
func Exp(a Tensor) Tensor { return a.Map(math.Exp) }

// Expm1 is ggml_expm1. The CPU kernel computes expf(x) - 1 (not expm1f), so
// near 0 ggml loses relative precision that this float64 version keeps.
func Expm1(a Tensor) Tensor { return a.Map(func(x float64) float64 { return math.Exp(x) - 1 }) }

// Neg is ggml_neg: -x.
func Neg(a Tensor) Tensor { return a.Map(func(x float64) float64 { return -x }) }

// Abs is ggml_abs: |x|.
func Abs(a Tensor) Tensor { return a.Map(math.Abs) }

// Sgn is ggml_sgn: 1 for x > 0, -1 for x < 0, else 0 (also for NaN).
func Sgn(a Tensor) Tensor {
	return a.Map(func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	})
}

// Step is ggml_step: 1 for x > 0, else 0.
func Step(a Tensor) Tensor {
	return a.Map(func(x float64) float64 {
		if x > 0 {
			return 1
		}
		return 0
	})
}

// Sin is ggml_sin.
func Sin(a Tensor) Tensor { return a.Map(math.Sin) }

// Cos is ggml_cos.
func Cos(a Tensor) Tensor { return a.Map(math.Cos) }

// Clamp is ggml_clamp(a, min, max): MAX(MIN(x, max), min) with C macro
// semantics, so NaN becomes max (and min wins if min > max).
func Clamp(a Tensor, lo, hi float64) Tensor {
	return a.Map(func(x float64) float64 { return cmax(cmin(x, hi), lo) })
}

// ---- activations (ggml_unary_op) ----

func relu(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// ggml's float constants, widened exactly.
const (
	geluCoefA      = float64(float32(0.044715))
	geluQuickCoef  = float64(float32(-1.702))
	sqrt2OverPi    = float64(float32(0.79788456080286535587989211986876))
	sqrt2Inv       = float64(float32(0.70710678118654752440084436210484))
	softplusThresh = 20.0
)

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(sqrt2OverPi*x*(1+geluCoefA*x*x)))
}

func geluErf(x float64) float64 { return 0.5 * x * (1 + math.Erf(x*sqrt2Inv)) }

func geluQuick(x float64) float64 { return x * (1 / (1 + math.Exp(geluQuickCoef*x))) }

// geluTanhF32 evaluates ggml_gelu_f32 step by step in float32, as ggml does
// when it fills its fp16 GELU table (tanh itself is rounded from float64).
// For x below about -4 the float32 1+tanh cancels, which the table inherits.
func geluTanhF32(x float32) float32 {
	const a, s = float32(0.044715), float32(0.79788456080286535587989211986876)
	inner := float32(float32(s*x) * float32(1+float32(float32(a*x)*x)))
	th := float32(math.Tanh(float64(inner)))
	return float32(float32(0.5*x) * float32(1+th))
}

// geluQuickF32 evaluates ggml_gelu_quick_f32 in float32.
func geluQuickF32(x float32) float32 {
	const k = float32(-1.702)
	e := float32(math.Exp(float64(float32(k * x))))
	return float32(x * float32(1/float32(1+e)))
}

func f16(x float32) float32 { return F16ToF32(F32ToF16(x)) }

// geluTanhCPU models ggml_vec_gelu_f32 with GGML_GELU_FP16 (the default): the
// input is rounded to fp16 and the result is a table entry, itself rounded to
// fp16; x <= -10 and x >= 10 bypass the table.
func geluTanhCPU(x float64) float64 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	return float64(f16(geluTanhF32(f16(float32(x)))))
}

// geluQuickCPU models ggml_vec_gelu_quick_f32 with GGML_GELU_QUICK_FP16: input
// and output both go through fp16, with no bypass for large |x|.
func geluQuickCPU(x float64) float64 { return float64(f16(geluQuickF32(f16(float32(x))))) }

// Relu is ggml_relu: x > 0 ? x : 0.
func Relu(a Tensor) Tensor { return a.Map(relu) }

// Tanh is ggml_tanh.
func Tanh(a Tensor) Tensor { return a.Map(math.Tanh) }

// Sigmoid is ggml_sigmoid: 1/(1+e^-x).
func Sigmoid(a Tensor) Tensor { return a.Map(sigmoid) }

// Silu is ggml_silu: x/(1+e^-x).
func Silu(a Tensor) Tensor { return a.Map(silu) }

// Softplus is ggml_softplus: x > 20 ? x : log(1+e^x). (ggml evaluates
// logf(1+expf(x)) in float32, which loses relative precision for x below about
// -10; this uses log1p.)
func Softplus(a Tensor) Tensor {
	return a.Map(func(x float64) float64 {
		if x > softplusThresh {
			return x
		}
		return math.Log1p(math.Exp(x))
	})
}

// Elu is ggml_elu: x > 0 ? x : e^x - 1.
func Elu(a Tensor) Tensor {
	return a.Map(func(x float64) float64 {
		if x > 0 {
			return x
		}
		return math.Expm1(x)
	})
}

// Hardsigmoid is ggml_hardsigmoid: min(1, max(0, (x+3)/6)).
func Hardsigmoid(a Tensor) Tensor {
	return a.Map(func(x float64) float64 { return math.Min(1, math.Max(0, (x+3)/6)) })
}

// Hardswish is ggml_hardswish: x * min(1, max(0, (x+3)/6)).
func Hardswish(a Tensor) Tensor {
	return a.Map(func(x float64) float64 { return x * math.Min(1, math.Max(0, (x+3)/6)) })
}

// GeluTanh is the exact tanh-form GELU, 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))),
// which ggml_gelu approximates. Note: the CPU kernel of ggml_gelu goes through
// an FP16 table (GGML_GELU_FP16), so it differs from this by up to ~1e-3
// relative (2e-3 absolute near |x|~6); compare with GeluTanhCPU for a tight
// check, or with GeluTanh and a tolerance of a few fp16 ulps.
func GeluTanh(a Tensor) Tensor { return a.Map(geluTanh) }

// GeluTanhCPU models the ggml CPU kernel of ggml_gelu bit for bit (up to
// rare one-ulp differences of tanhf/expf): x <= -10 → 0, x >= 10 → x, else
// f16(gelu_f32(f16(x))) where f16 rounds to half precision and gelu_f32 is the
// tanh formula evaluated in float32. For x below about -4 that float32
// evaluation cancels (1 + tanh ≈ 1e-7), so ggml_gelu's tiny negative outputs
// there are off by up to ~2e-7 absolute from GeluTanh; this model reproduces it.
func GeluTanhCPU(a Tensor) Tensor { return a.Map(geluTanhCPU) }

// GeluErf is ggml_gelu_erf: 0.5x(1+erf(x/sqrt 2)). The CPU kernel computes
// it directly in float32 (no table), so for x below about -5 its 1+erf
// cancels and ggml returns 0 or a value off by ~1e-7 absolute.
func GeluErf(a Tensor) Tensor { return a.Map(geluErf) }

// GeluQuick is the exact x*sigmoid(1.702x) that ggml_gelu_quick approximates.
// The CPU kernel uses an FP16 table (GGML_GELU_QUICK_FP16); see GeluQuickCPU.
func GeluQuick(a Tensor) Tensor { return a.Map(geluQuick) }

// GeluQuickCPU models the ggml CPU kernel of ggml_gelu_quick: f16(geluQuick(f16(x))).
func GeluQuickCPU(a Tensor) Tensor { return a.Map(geluQuickCPU) }

// ---- gated linear units (ggml_glu_op) ----

func gluSplit(fn string, g, u Tensor, act func(float64) float64) Tensor {
	g.check(fn)
	u.check(fn)
	assertf(SameShape(g, u), fn, "shapes %v and %v differ", g.Ne, u.Ne)
	out := New(g.Ne[:]...)
	for i := range out.Data {
		out.Data[i] = act(g.Data[i]) * u.Data[i]
	}
	return out
}

// SwigluSplit is ggml_swiglu_split(g, u) = silu(g) * u; g and u same shape.
func SwigluSplit(g, u Tensor) Tensor { return gluSplit("SwigluSplit", g, u, silu) }

// GegluSplit is ggml_geglu_split(g, u) = gelu(g) * u with the exact tanh GELU.
// The CPU kernel uses the FP16 GELU table as ggml_gelu does; see GegluSplitCPU.
func GegluSplit(g, u Tensor) Tensor { return gluSplit("GegluSplit", g, u, geluTanh) }

// GegluSplitCPU models the CPU kernel of ggml_geglu_split: geluTanhCPU(g) * u.
func GegluSplitCPU(g, u Tensor) Tensor { return gluSplit("GegluSplitCPU", g, u, geluTanhCPU) }

// GegluErfSplit is ggml_geglu_erf_split(g, u) = gelu_erf(g) * u.
func GegluErfSplit(g, u Tensor) Tensor { return gluSplit("GegluErfSplit", g, u, geluErf) }

// GegluQuickSplit is ggml_geglu_quick_split(g, u) = gelu_quick(g) * u (exact;
// the CPU kernel uses the FP16 table like GeluQuickCPU).
func GegluQuickSplit(g, u Tensor) Tensor { return gluSplit("GegluQuickSplit", g, u, geluQuick) }

// ReluSplit is ggml_reglu_split(g, u) = relu(g) * u.
func ReluSplit(g, u Tensor) Tensor { return gluSplit("ReluSplit", g, u, relu) }

// Swiglu is the fused ggml_swiglu(a) (swapped=false) or ggml_swiglu_swapped(a)
// (swapped=true): each row of a [2n, ...] is split into halves x = row[:n],
// y = row[n:]; the result [n, ...] is silu(x)*y, or silu(y)*x when swapped.
func Swiglu(a Tensor, swapped bool) Tensor { return gluFused("Swiglu", a, swapped, silu) }

// Geglu is the fused ggml_geglu(a) / ggml_geglu_swapped(a) with the exact tanh
// GELU (see GegluSplit about the CPU's FP16 table); layout as in Swiglu.
func Geglu(a Tensor, swapped bool) Tensor { return gluFused("Geglu", a, swapped, geluTanh) }

func gluFused(fn string, a Tensor, swapped bool, act func(float64) float64) Tensor {
	a.check(fn)
	assertf(a.Ne[0]%2 == 0, fn, "a.ne0=%d is odd", a.Ne[0])
	n := a.Ne[0] / 2
	out := New(n, a.Ne[1], a.Ne[2], a.Ne[3])
	for r := 0; r < a.NRows(); r++ {
		row := a.Data[r*a.Ne[0] : (r+1)*a.Ne[0]]
		g, u := row[:n], row[n:]
		if swapped {
			g, u = u, g
		}
		for i := 0; i < n; i++ {
			out.Data[r*n+i] = act(g[i]) * u[i]
		}
	}
	return out
}

// SiluBack is ggml_silu_back(dy, x): the gradient of silu at x times dy,
// dy * s * (1 + x*(1-s)) with s = sigmoid(x). dy and x have the same shape.
func SiluBack(dy, x Tensor) Tensor {
	return gluSplit("SiluBack", x, dy, func(v float64) float64 {
		s := sigmoid(v)
		return s * (1 + v*(1-s))
	})
}
