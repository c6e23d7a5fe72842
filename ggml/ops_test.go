package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/reference"
)

// Forward tests of every op of the package against internal/reference, on random inputs of
// odd sizes. Tolerances are relative with an absolute floor (see near); the comments give
// the largest errors observed (go test -v logs them) and why an op needs more than float32
// rounding.

type ref = reference.Tensor

func TestBinaryOpsBroadcast(t *testing.T) {
	ops := []struct {
		name string
		op   func(c *Context, a, b *Tensor) *Tensor
		ref  func(a, b ref) ref
	}{
		{"Add", (*Context).Add, reference.Add},
		{"Sub", (*Context).Sub, reference.Sub},
		{"Mul", (*Context).Mul, reference.Mul},
		{"Div", (*Context).Div, reference.Div},
	}
	shapes := [][]int{{7, 5, 3, 2}, {7, 1, 3, 1}, {7, 5, 1, 2}, {7, 1, 1, 1}, {1, 5, 3, 2}, {1, 1, 1, 1}}
	for _, o := range ops {
		for _, bs := range shapes {
			t.Run(fmt.Sprintf("%s/b%v", o.name, bs), func(t *testing.T) {
				h := newHarness(t)
				a, b := h.rand(-2, 2, 7, 5, 3, 2), h.randAway(0.5, 2, bs...)
				got := h.eval(o.op(h.c, h.in(a), h.in(b)))
				near(t, o.name, o.ref(a, b), got, tight, 1)
			})
		}
	}
}

func TestScalarOps(t *testing.T) {
	h := newHarness(t)
	a := h.rand(-3, 3, 7, 5, 3)
	s := h.rand(-1, 1, 1)
	x := h.in(a)
	add1 := h.c.Add1(x, h.in(s))
	scale := h.c.Scale(x, -0.37)
	sb := h.c.ScaleBias(x, 1.7, -0.25)
	clamp := h.c.Clamp(x, -1.25, 0.5)
	h.run(add1, scale, sb, clamp)
	near(t, "Add1", reference.Add1(a, s.Data[0]), h.out(add1), tight, 1)
	near(t, "Scale", reference.Scale(a, -0.37), h.out(scale), tight, 1)
	near(t, "ScaleBias", reference.ScaleBias(a, 1.7, -0.25), h.out(sb), tight, 1)
	near(t, "Clamp", reference.Clamp(a, -1.25, 0.5), h.out(clamp), 0, 1)
}

func TestUnaryOps(t *testing.T) {
	cases := []struct {
		name   string
		lo, hi float64
		op     func(c *Context, a *Tensor) *Tensor
		ref    func(ref) ref
		tol    float64
	}{
		{"Sqr", -3, 3, (*Context).Sqr, reference.Sqr, tight},
		{"Sqrt", 0.01, 9, (*Context).Sqrt, reference.Sqrt, tight},
		{"Log", 0.01, 9, (*Context).Log, reference.Log, tight},
		{"Exp", -4, 4, (*Context).Exp, reference.Exp, tight},
		{"Neg", -3, 3, (*Context).Neg, reference.Neg, 0},
		{"Abs", -3, 3, (*Context).Abs, reference.Abs, 0},
		{"Softplus", -8, 25, (*Context).Softplus, reference.Softplus, tight},
		{"Silu", -8, 8, (*Context).Silu, reference.Silu, tight},
		{"Relu", -3, 3, (*Context).Relu, reference.Relu, 0},
		{"Tanh", -4, 4, (*Context).Tanh, reference.Tanh, tight},
		{"Sigmoid", -8, 8, (*Context).Sigmoid, reference.Sigmoid, tight},
		// ggml_gelu and ggml_gelu_quick go through FP16 tables on the CPU; the CPU models
		// reproduce them (observed max err 0, or one ulp of tanhf/expf).
		{"Gelu", -12, 12, (*Context).Gelu, reference.GeluTanhCPU, tight},
		{"GeluQuick", -8, 8, (*Context).GeluQuick, reference.GeluQuickCPU, tight},
		// ggml_gelu_erf runs in float32 without a table; below about -5 its 1+erf cancels
		// (an absolute error of ~1e-7, well inside the floor).
		{"GeluErf", -8, 8, (*Context).GeluErf, reference.GeluErf, tight},
		// GeluComposite is the exact tanh GELU built from ops with a backward; it differs from
		// the float64 formula only by float32 rounding (observed 1e-7).
		{"GeluComposite", -8, 8, (*Context).GeluComposite, reference.GeluTanh, tight},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.ref
			if !onCPU {
				// ggml's CUDA GELUs compute the formulas in float32, without the CPU's FP16 tables.
				ref = map[string]func(reference.Tensor) reference.Tensor{"Gelu": reference.GeluTanh, "GeluQuick": reference.GeluQuick}[tc.name]
				if ref == nil {
					ref = tc.ref
				}
			}
			h := newHarness(t)
			a := h.rand(tc.lo, tc.hi, 7, 5, 3)
			near(t, tc.name, ref(a), h.eval(tc.op(h.c, h.in(a))), tc.tol, 1)
		})
	}
	// ggml_gelu differs from the exact GELU by its FP16 table: at most ~2e-3 absolute.
	t.Run("GeluVsExact", func(t *testing.T) {
		h := newHarness(t)
		a := h.rand(-6, 6, 7, 5, 3)
		near(t, "Gelu vs GeluTanh", reference.GeluTanh(a), h.eval(h.c.Gelu(h.in(a))), 3e-3, 1)
	})
}

func TestReductions(t *testing.T) {
	h := newHarness(t)
	a := h.rand(-2, 2, 7, 5, 3, 2)
	x := h.in(a)
	sum, rows, mean := h.c.Sum(x), h.c.SumRows(x), h.c.Mean(x)
	h.run(sum, rows, mean)
	near(t, "Sum", reference.FromData([]float64{reference.Sum(a)}, 1), h.out(sum), tight, 1)
	near(t, "SumRows", reference.SumRows(a), h.out(rows), tight, 1)
	near(t, "Mean", reference.Mean(a), h.out(mean), tight, 1)
}

func TestNorms(t *testing.T) {
	h := newHarness(t)
	a := h.rand(-2, 3, 13, 5, 3)
	x := h.in(a)
	const eps = 1e-5
	norm, ln, rms := h.c.Norm(x, eps), h.c.LayerNormComposite(x, eps), h.c.RMSNorm(x, eps)
	h.run(norm, ln, rms)
	near(t, "Norm", reference.Norm(a, eps), h.out(norm), 1e-5, 1)
	near(t, "LayerNormComposite", reference.Norm(a, eps), h.out(ln), 1e-5, 1)
	near(t, "RMSNorm", reference.RMSNorm(a, eps), h.out(rms), 1e-5, 1)
}

// mulMatTol bounds f32 and f16 products. On CUDA, ggml rounds the inputs of small f32
// products to a tensor-core format, and f16 products accumulate or store in f16: observed
// 5.7e-4 (f32, 13×7×5) and 3.9e-4 (f16) on an H200; elsewhere 2e-7.
var mulMatTol = map[bool]float64{true: 1e-5, false: 2e-3}[onCPU]

func TestMulMatF32(t *testing.T) {
	for _, s := range []struct{ a, b []int }{
		{[]int{13, 7}, []int{13, 5}},
		{[]int{13, 7, 3}, []int{13, 5, 3}},
		{[]int{13, 7, 2, 1}, []int{13, 5, 4, 3}}, // a broadcast over dims 2 and 3 (GQA-style)
		{[]int{13, 7, 1, 3}, []int{13, 1, 2, 3}}, // a matrix-vector product per batch
	} {
		t.Run(fmt.Sprint(s.a, s.b), func(t *testing.T) {
			h := newHarness(t)
			a, b := h.rand(-1, 1, s.a...), h.rand(-1, 1, s.b...)
			near(t, "MulMat f32", reference.MulMat(a, b), h.eval(h.c.MulMat(h.in(a), h.in(b))), mulMatTol, 1)
		})
	}
}

// An f16 a makes the CPU convert b to f16 too, so the reference multiplies the fp16-rounded
// inputs; what is left is float32 accumulation (observed 5e-8).
func TestMulMatF16(t *testing.T) {
	h := newHarness(t)
	a, b := h.rand(-1, 1, 13, 7, 2), h.rand(-1, 1, 13, 5, 4)
	want := reference.MulMat(a.Map(reference.RoundF16), b.Map(reference.RoundF16))
	near(t, "MulMat f16", want, h.eval(h.c.MulMat(h.inF16(a), h.in(b))), mulMatTol, 1)
}

// Q8_0 and Q4_0 weights quantized by ggml (ggml_quantize_chunk, which must match the
// reference quantizers byte for byte). Both multiply against b quantized to Q8_0, which the
// reference models, leaving float32 rounding (observed 4e-7). Against the unquantized product
// the error is the quantization itself: documented as ≤6e-2 (Q8_0) and ≤6e-1 (Q4_0) relative
// to max(|x|, 1) for k = 96 and inputs in [-1, 1] (observed 3.1e-2 and 3.8e-1).
func TestMulMatQuantized(t *testing.T) {
	const k, m, n = 96, 7, 5
	for _, q := range []struct {
		typ        Type
		quant      func([]float32) []byte
		dequant    func([]byte) []float32
		loose      float64
		name       string
		blockBytes int
	}{
		{Q8_0, reference.QuantizeQ8_0, reference.DequantizeQ8_0, 6e-2, "q8_0", 34},
		{Q4_0, reference.QuantizeQ4_0, reference.DequantizeQ4_0, 6e-1, "q4_0", 18},
	} {
		t.Run(q.name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.rand(-1, 1, k, m), h.rand(-1, 1, k, n, 3)
			raw := make([]byte, m*k/32*q.blockBytes)
			written := ggmlc.QuantizeChunk(q.typ, a.ToF32(), unsafe.Pointer(&raw[0]), 0, m, k, nil)
			require.Equal(t, len(raw), written)
			require.Equal(t, q.quant(a.ToF32()), raw, "ggml's quantizer and the reference disagree")
			aq := reference.FromF32(q.dequant(raw), k, m)
			bq := reference.FromF32(reference.DequantizeQ8_0(reference.QuantizeQ8_0(b.ToF32())), k, n, 3)
			got := h.eval(h.c.MulMat(h.inBytes(q.typ, raw, k, m), h.in(b)))
			// The model is the CPU's: activations quantized to Q8_0. CUDA quantizes them to Q8_1
			// for its integer kernels (Q4_0 here; observed 4.3e-2 against this model), or
			// dequantizes the weights for cuBLAS (Q8_0: 4.4e-7).
			if onCPU || q.typ == Q8_0 {
				near(t, "MulMat "+q.name+" vs modelled", reference.MulMat(aq, bq), got, 1e-5, 1)
			}
			near(t, "MulMat "+q.name+" vs exact", reference.MulMat(a, b), got, q.loose, 1)
		})
	}
}

func TestMulMatID(t *testing.T) {
	for _, nb1 := range []int{2, 1} {
		t.Run(fmt.Sprint("b.ne1=", nb1), func(t *testing.T) {
			h := newHarness(t)
			const k, m, e, nUsed, T = 9, 7, 4, 2, 5
			ex, b := h.rand(-1, 1, k, m, e), h.rand(-1, 1, k, nb1, T)
			ids := make([]int32, nUsed*T)
			for tok := 0; tok < T; tok++ {
				p := h.rng.Perm(e)
				for j := 0; j < nUsed; j++ {
					ids[j+nUsed*tok] = int32(p[j])
				}
			}
			got := h.eval(h.c.MulMatID(h.in(ex), h.in(b), h.inI32(ids, nUsed, T)))
			near(t, "MulMatID", reference.MulMatID(ex, b, ids, nUsed, T), got, 1e-5, 1)
		})
	}
}

func TestOutProd(t *testing.T) {
	for _, s := range []struct{ a, b []int }{
		{[]int{7, 5}, []int{3, 5}},
		{[]int{7, 5, 2}, []int{3, 5, 4}},
	} {
		h := newHarness(t)
		a, b := h.rand(-1, 1, s.a...), h.rand(-1, 1, s.b...)
		near(t, fmt.Sprint("OutProd ", s.a, s.b), reference.OutProd(a, b), h.eval(h.c.OutProd(h.in(a), h.in(b))), 1e-5, 1)
	}
}

func TestGLU(t *testing.T) {
	h := newHarness(t)
	g, u := h.rand(-6, 6, 7, 5, 3), h.rand(-2, 2, 7, 5, 3)
	gi, ui := h.in(g), h.in(u)
	sw, ge := h.c.SwigluSplit(gi, ui), h.c.GegluSplit(gi, ui)
	h.run(sw, ge)
	near(t, "SwigluSplit", reference.SwigluSplit(g, u), h.out(sw), tight, 1)
	gegluRef := reference.GegluSplitCPU
	if !onCPU {
		gegluRef = reference.GegluSplit // float32 GELU without the CPU's FP16 table
	}
	near(t, "GegluSplit", gegluRef(g, u), h.out(ge), tight, 1)
}

func TestSoftMaxExtBack(t *testing.T) {
	h := newHarness(t)
	y := reference.SoftMax(h.rand(-4, 4, 9, 5, 3))
	dy := h.rand(-1, 1, 9, 5, 3)
	near(t, "SoftMaxExtBack", reference.SoftMaxExtBack(dy, y, 0.7), h.eval(h.c.SoftMaxExtBack(h.in(dy), h.in(y), 0.7)), 1e-6, 1)
}

func TestSoftMax(t *testing.T) {
	const n0, n1, n2, n3 = 9, 5, 3, 2
	causal := reference.CausalMask(n0, n1+2, 3) // two spare mask rows: ne1 ≥ a.ne1 is enough
	soft := func(h *harness, ne ...int) ref {   // a causal mask plus random biases in [-2, 0]
		m := h.rand(-2, 0, ne...)
		for i := range m.Data {
			m.Data[i] += causal.Data[i%len(causal.Data)]
		}
		return m
	}
	t.Run("plain", func(t *testing.T) {
		h := newHarness(t)
		a := h.rand(-4, 4, n0, n1, n2, n3)
		near(t, "SoftMax", reference.SoftMax(a), h.eval(h.c.SoftMax(h.in(a))), 1e-6, 1)
	})
	for _, tc := range []struct {
		name    string
		maskNe  []int
		f16     bool
		maxBias float64
	}{
		{"mask f32", []int{n0, n1 + 2}, false, 0},
		{"mask f16", []int{n0, n1 + 2}, true, 0},
		{"mask per head", []int{n0, n1, n2}, false, 0},
		{"ALiBi", []int{n0, n1 + 2}, false, 8},
		{"ALiBi f16 mask per head", []int{n0, n1, n2, 1}, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a, mask := h.rand(-4, 4, n0, n1, n2, n3), soft(h, tc.maskNe...)
			var mi *Tensor
			if tc.f16 {
				mi, mask = h.inF16(mask), mask.Map(reference.RoundF16)
			} else {
				mi = h.in(mask)
			}
			const scale = 0.7
			got := h.eval(h.c.SoftMaxExt(h.in(a), mi, scale, float32(tc.maxBias)))
			near(t, "SoftMaxExt "+tc.name, reference.SoftMaxExt(a, &mask, scale, tc.maxBias), got, 1e-6, 1)
		})
	}
	t.Run("DiagMaskInf", func(t *testing.T) {
		h := newHarness(t)
		a := h.rand(-4, 4, 6, 5, 3)
		got := h.eval(h.c.DiagMaskInf(h.in(a), 1))
		if !onCPU {
			// CUDA masks with -FLT_MAX, which softmax treats as -Inf.
			got = got.Map(func(v float64) float64 {
				if v <= -math.MaxFloat32 {
					return math.Inf(-1)
				}
				return v
			})
		}
		near(t, "DiagMaskInf", reference.DiagMaskInf(a, 1), got, 0, 1)
	})
}

// ropeCase is a RoPE of the rope tests: its parameters and frequency factors (nil: none).
type ropeCase struct {
	name string
	r    Rope
	ff   []float64
}

// factors is c's frequency factors as an input of h, or nil.
func (c ropeCase) factors(h *harness) *Tensor {
	if c.ff == nil {
		return nil
	}
	return h.in(reference.FromData(c.ff, len(c.ff)))
}

// reference is c's RoPE as the float64 reference takes it.
func (c ropeCase) reference() reference.RopeParams {
	r := c.r
	return reference.RopeParams{NDims: r.Dims, Mode: int(r.Mode), NCtxOrig: r.OrigCtx,
		FreqBase: float64(r.FreqBase), FreqScale: float64(r.FreqScale), ExtFactor: float64(r.ExtFactor),
		AttnFactor: float64(r.AttnFactor), BetaFast: float64(r.BetaFast), BetaSlow: float64(r.BetaSlow),
		FreqFactors: c.ff}
}

// TestRopeCPU checks toy's RoPE (a table, then the rotation) against ggml's RopeExt, to the bit,
// and against the float64 reference: adjacent and NeoX pairs, whole and partial heads, a
// frequency scale and base, an attention factor, frequency factors, positions up to 100,000;
// and that what it does not do (YaRN, other modes) is refused.
func TestRopeCPU(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("toy's RoPE runs on a vectorized CPU build only")
	}
	const hd, heads, tokens = 64, 9, 7
	pos := []int32{0, 1, 17, 255, 4095, 31000, 100000}
	base := Rope{FreqBase: 10000, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 2048}
	with := func(f func(*Rope)) Rope { r := base; f(&r); return r }
	for _, tc := range []ropeCase{
		{"normal", with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNormal }), nil},
		{"neox", with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNeox }), nil},
		{"normal partial", with(func(r *Rope) { r.Dims, r.Mode = 32, RopeNormal }), nil},
		{"neox partial, scale, base, attention factor", with(func(r *Rope) {
			r.Dims, r.Mode, r.FreqScale, r.FreqBase, r.AttnFactor = 48, RopeNeox, 0.25, 500000, 1.3
		}), nil},
		{"normal freq factors", with(func(r *Rope) { r.Dims, r.Mode = 16, RopeNormal }), []float64{1, 1.5, 2, 4, 8, 16, 1.25, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.rand(-2, 2, hd, heads, tokens)
			ffT := tc.factors(h)
			x, p := h.in(a), h.inI32(pos, tokens)
			require.NoError(t, RopeCPUFits(tc.r))
			got, viaGGML := h.c.RopeApplyCPU(x, h.c.RopeTableCPU(p, ffT, tc.r), tc.r.Mode), h.c.RopeExt(x, p, ffT, tc.r)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, viaGGML)
			g := h.out(got)
			sameBits(t, "RopeApplyCPU against ggml's RopeExt", h.out(viaGGML), g)
			// float32 angles: about |p|·6e-8 rad of error, 6e-3 at position 100,000.
			near(t, "RopeApplyCPU "+tc.name, tc.reference().Apply(a, pos), g, 1e-2, 1)
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		ok := with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNormal })
		for _, c := range []struct {
			r    Rope
			want string
		}{
			{with(func(r *Rope) { r.Dims, r.Mode, r.ExtFactor = hd, RopeNormal, 1 }), "YaRN"},
			{with(func(r *Rope) { r.Dims, r.Mode = hd, RopeMode(8) }), "mode 8"},
			{with(func(r *Rope) { r.Dims, r.Mode = 7, RopeNormal }), "Dims 7"},
			{with(func(r *Rope) { r.Dims, r.Mode, r.FreqBase = hd, RopeNormal, 0 }), "base 0"},
		} {
			require.ErrorContains(t, RopeCPUFits(c.r), c.want)
		}
		x, p := h.in(h.rand(-1, 1, hd, heads, tokens)), h.inI32(pos, tokens)
		table := h.c.RopeTableCPU(p, nil, ok)
		require.NotNil(t, table)
		require.Nil(t, h.c.RopeApplyCPU(x, table, RopeMode(8)))
		require.Nil(t, h.c.RopeApplyCPU(h.in(h.rand(-1, 1, hd, heads, tokens+1)), table, RopeNormal))
		require.Nil(t, h.c.RopeTableCPU(p, h.in(h.rand(1, 2, 3)), ok), "3 freq factors for 64 dims")
	})
}

func TestRopeExt(t *testing.T) {
	const hd, heads, tokens = 10, 3, 5
	pos := []int32{3, 0, 7, 1, 12}
	base := Rope{FreqBase: 10000, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	with := func(f func(*Rope)) Rope { r := base; f(&r); return r }
	cases := []ropeCase{
		{"normal", with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNormal }), nil},
		{"neox", with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNeox }), nil},
		{"normal partial", with(func(r *Rope) { r.Dims, r.Mode = 6, RopeNormal }), nil},
		{"neox partial", with(func(r *Rope) { r.Dims, r.Mode = 6, RopeNeox }), nil},
		{"neox freq scale", with(func(r *Rope) { r.Dims, r.Mode, r.FreqScale, r.FreqBase = hd, RopeNeox, 0.25, 500 }), nil},
		{"normal YaRN", with(func(r *Rope) {
			r.Dims, r.Mode, r.FreqScale, r.ExtFactor, r.OrigCtx, r.FreqBase = hd, RopeNormal, 0.25, 1, 64, 500
		}), nil},
		{"neox YaRN partial attn", with(func(r *Rope) {
			r.Dims, r.Mode, r.FreqScale, r.ExtFactor, r.OrigCtx, r.AttnFactor = 8, RopeNeox, 0.5, 0.5, 32, 1.3
		}), nil},
		{"neox freq factors", with(func(r *Rope) { r.Dims, r.Mode = 8, RopeNeox }), []float64{1, 1.5, 2, 4, 9}},
		{"normal freq factors", with(func(r *Rope) { r.Dims, r.Mode = hd, RopeNormal }), []float64{1, 1.5, 2, 4, 8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.rand(-2, 2, hd, heads, tokens)
			ffT := tc.factors(h)
			got := h.eval(h.c.RopeExt(h.in(a), h.inI32(pos, tokens), ffT, tc.r))
			// ggml builds the angles in float32: ~|p|·i·6e-8 rad, so 1e-5 at positions ≤ 12.
			near(t, "RopeExt "+tc.name, tc.reference().Apply(a, pos), got, 1e-5, 1)
		})
	}
}

// FlashAttnExt with f32 q and f16 k/v (one set with SetF16, one converted by Cast), an f16
// causal mask and GQA (4 query heads on 2 kv heads). The CPU rounds q to f16 for the k dot
// products and accumulates v in an fp16 buffer: documented tolerance 2e-3 absolute on O(1)
// outputs (observed ~4e-4).
func TestFlashAttnExt(t *testing.T) {
	const d, nq, nkv, H, Hkv = 8, 5, 7, 4, 2
	for _, tc := range []struct {
		name             string
		cast             bool
		maxBias, softcap float64
	}{
		{"SetF16", false, 0, 0},
		{"Cast", true, 0, 0},
		{"ALiBi softcap", false, 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			q, k, v := h.rand(-1, 1, d, nq, H), h.rand(-1, 1, d, nkv, Hkv), h.rand(-1, 1, d, nkv, Hkv)
			mask := reference.CausalMask(nkv, nq, nkv-nq)
			for i := range mask.Data {
				if !math.IsInf(mask.Data[i], -1) {
					mask.Data[i] = reference.RoundF16(-h.rng.Float64())
				}
			}
			var ki, vi *Tensor
			if tc.cast {
				ki, vi = h.c.Cast(h.in(k), F16), h.c.Cast(h.in(v), F16)
			} else {
				ki, vi = h.inF16(k), h.inF16(v)
			}
			scale := 1 / math.Sqrt(d)
			got := h.eval(h.c.FlashAttnExt(h.in(q), ki, vi, h.inF16(mask), float32(scale), float32(tc.maxBias), float32(tc.softcap)))
			r16 := reference.RoundF16
			want := reference.FlashAttnExt(q.Map(r16), k.Map(r16), v.Map(r16), &mask, scale, tc.maxBias, tc.softcap)
			near(t, "FlashAttnExt "+tc.name, want, got, 2e-3, 1)
		})
	}
}

func TestConcat(t *testing.T) {
	an := []int{7, 5, 3, 2}
	for dim := 0; dim < 4; dim++ {
		t.Run(fmt.Sprint("dim", dim), func(t *testing.T) {
			h := newHarness(t)
			bn := slices.Clone(an)
			bn[dim] = []int{4, 2, 2, 1}[dim]
			a, b := h.rand(-1, 1, an...), h.rand(-1, 1, bn...)
			near(t, fmt.Sprint("Concat dim ", dim), reference.Concat(a, b, dim), h.eval(h.c.Concat(h.in(a), h.in(b), dim)), 0, 1)
		})
	}
}

func TestRepeat(t *testing.T) {
	for _, s := range []struct{ a, to []int }{
		{[]int{7, 1, 3, 1}, []int{7, 5, 3, 2}},
		{[]int{7, 5, 3}, []int{14, 5, 6, 2}},
		{[]int{1, 1}, []int{3, 5, 2}},
	} {
		h := newHarness(t)
		a := h.rand(-1, 1, s.a...)
		like := h.c.NewTensor(F32, ne64(reference.New(s.to...).Ne)...)
		near(t, fmt.Sprint("Repeat ", s.a, "→", s.to), reference.Repeat(a, s.to...), h.eval(h.c.Repeat(h.in(a), like)), 0, 1)
	}
}

func TestSorting(t *testing.T) {
	t.Run("Argmax", func(t *testing.T) {
		h := newHarness(t)
		a := h.distinct(11, 5)
		require.Equal(t, reference.Argmax(a), h.outI32(h.evalI32(h.c.Argmax(h.in(a)))))
	})
	for _, desc := range []bool{false, true} {
		t.Run(fmt.Sprint("Argsort desc=", desc), func(t *testing.T) {
			h := newHarness(t)
			a := h.distinct(9, 4, 3)
			order := reference.SortAsc
			if desc {
				order = reference.SortDesc
			}
			require.Equal(t, reference.Argsort(a, order), h.outI32(h.evalI32(h.c.Argsort(h.in(a), desc))))
		})
	}
	t.Run("TopK", func(t *testing.T) {
		h := newHarness(t)
		const n, rows, k = 13, 4, 5
		a := h.distinct(n, rows, 3)
		top := h.evalI32(h.c.TopK(h.in(a), k))
		require.Equal(t, [4]int64{k, rows, 3, 1}, top.Ne())
		got, want := h.outI32(top), reference.Argsort(a, reference.SortDesc)
		for r := 0; r < rows*3; r++ {
			g := slices.Clone(got[r*k : (r+1)*k])
			w := slices.Clone(want[r*n : r*n+k])
			slices.Sort(g)
			slices.Sort(w)
			require.Equal(t, w, g, "row %d", r)
		}
	})
}

// evalI32 runs x and returns it (for outI32).
func (h *harness) evalI32(x *Tensor) *Tensor {
	h.t.Helper()
	h.run(x)
	return x
}

func TestGetRows(t *testing.T) {
	t.Run("2-D", func(t *testing.T) {
		h := newHarness(t)
		a, rows := h.rand(-1, 1, 7, 9), []int32{3, 0, 8, 3, 5}
		near(t, "GetRows", reference.GetRows(a, rows), h.eval(h.c.GetRows(h.in(a), h.inI32(rows, 5))), 0, 1)
	})
	t.Run("f16 table", func(t *testing.T) {
		h := newHarness(t)
		a, rows := h.rand(-1, 1, 7, 9), []int32{8, 1, 1}
		want := reference.GetRows(a.Map(reference.RoundF16), rows)
		near(t, "GetRows f16", want, h.eval(h.c.GetRows(h.inF16(a), h.inI32(rows, 3))), 0, 1)
	})
	t.Run("batched", func(t *testing.T) {
		h := newHarness(t)
		a := h.rand(-1, 1, 7, 9, 3, 2)
		rows := make([]int32, 4*3*2)
		for i := range rows {
			rows[i] = int32(h.rng.IntN(9))
		}
		got := h.eval(h.c.GetRows(h.in(a), h.inI32(rows, 4, 3, 2)))
		near(t, "GetRows batched", reference.GetRows(a, rows, 4, 3, 2), got, 0, 1)
	})
}

func TestGetRowsBack(t *testing.T) {
	h := newHarness(t)
	grad, rows := h.rand(-1, 1, 7, 5), []int32{3, 0, 8, 3, 5}
	want := reference.New(7, 9)
	for i, r := range rows { // a plain scatter-add; index 3 repeats
		for e := 0; e < 7; e++ {
			want.Data[int(r)*7+e] += grad.Data[i*7+e]
		}
	}
	like := h.c.NewTensor(F32, 7, 9)
	near(t, "GetRowsBack", want, h.eval(h.c.GetRowsBack(h.in(grad), h.inI32(rows, 5), like)), 1e-6, 1)
}

func TestSetRows(t *testing.T) {
	setRows := func(dst, src ref, idx []int32) ref {
		out := dst.Clone()
		for i, r := range idx {
			copy(out.Row(int(r), 0, 0), src.Row(i, 0, 0))
		}
		return out
	}
	idx := []int32{6, 1, 3, 8}
	t.Run("f32", func(t *testing.T) {
		h := newHarness(t)
		dst, src := h.rand(-1, 1, 7, 9), h.rand(-1, 1, 7, 4)
		got := h.eval(h.c.SetRows(h.in(dst), h.in(src), h.inI32(idx, 4)))
		near(t, "SetRows f32", setRows(dst, src, idx), got, 0, 1)
	})
	t.Run("f16 i64", func(t *testing.T) {
		h := newHarness(t)
		dst, src := h.rand(-1, 1, 7, 9), h.rand(-1, 1, 7, 4)
		raw := make([]byte, 8*len(idx))
		for i, v := range idx {
			*(*int64)(unsafe.Pointer(&raw[8*i])) = int64(v)
		}
		set := h.c.SetRows(h.inF16(dst), h.in(src), h.inBytes(I64, raw, 4))
		got := h.eval(h.c.Cast(set, F32))
		want := setRows(dst, src, idx).Map(reference.RoundF16)
		near(t, "SetRows f16", want, got, 0, 1)
	})
}

// TestStoreTransposed writes tokens' values into f32 and f16 value caches stored transposed,
// at random distinct cells, and checks every cell against a direct computation: the written
// ones hold the values rounded as Go rounds them to f16 (ties, subnormals and overflow among
// them), the others what they held.
func TestStoreTransposed(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("StoreTransposed runs on a vectorized CPU build only")
	}
	for _, typ := range []Type{F32, F16} {
		for _, n := range []int{1, 7, 40} {
			t.Run(fmt.Sprintf("%s/n=%d", TypeName(typ), n), func(t *testing.T) {
				h := newHarness(t)
				const cells, C = 97, 40
				cache := h.rand(-1, 1, cells, C)
				v := h.rand(-2, 2, C, n)
				special := []float64{1 + 1.0/2048, 1 + 3.0/2048, 65504, 65520, -1e6, 3e-6, -6e-8, 1e-9, 0}
				for i, x := range special {
					v.Data[(i*7)%len(v.Data)] = x
				}
				at := h.rng.Perm(cells)[:n]
				idx := make([]int32, n)
				for i, c := range at {
					idx[i] = int32(c)
				}
				var in *Tensor
				round := func(x float64) float64 { return x }
				if typ == F16 {
					in, round = h.inF16(cache), reference.RoundF16
					cache = cache.Map(reference.RoundF16)
				} else {
					in = h.in(cache)
				}
				want := cache.Clone()
				for tok, c := range at {
					for ch := 0; ch < C; ch++ {
						want.Data[ch*cells+c] = round(float64(float32(v.Data[tok*C+ch])))
					}
				}
				got := h.eval(h.c.Cast(h.c.StoreTransposed(in, h.in(v), h.inI32(idx, int64(n))), F32))
				near(t, "StoreTransposed", want, got, 0, 1)
			})
		}
	}
	h := newHarness(t)
	cache, v := h.c.NewTensor(F16, 10, 4), h.c.NewTensor(F32, 4, 3)
	require.Error(t, StoreTransposedFits(cache, v, h.c.NewTensor(I32, 2)), "a cell for each token")
	require.Error(t, StoreTransposedFits(cache, h.c.NewTensor(F32, 5, 3), h.c.NewTensor(I32, 3)), "as many channels as the cache")
	require.Error(t, StoreTransposedFits(h.c.NewTensor(Q8_0, 32, 4), v, h.c.NewTensor(I32, 3)), "f16 or f32")
	require.NoError(t, StoreTransposedFits(cache, v, h.c.NewTensor(I32, 3)))
}

func TestCrossEntropyLoss(t *testing.T) {
	h := newHarness(t)
	logits, labels := h.rand(-3, 3, 11, 6), h.rand(0, 1, 11, 6)
	for r := 0; r < 6; r++ { // each label row is a distribution
		row := labels.Row(r, 0, 0)
		s := reference.Sum(reference.FromData(row, len(row)))
		for i := range row {
			row[i] /= s
		}
	}
	got := h.eval(h.c.CrossEntropyLoss(h.in(logits), h.in(labels)))
	near(t, "CrossEntropyLoss", reference.FromData([]float64{reference.CrossEntropyLoss(logits, labels)}, 1), got, 1e-5, 1)
}

func TestOptStepAdamW(t *testing.T) {
	h := newHarness(t)
	w, g, m, v := h.rand(-1, 1, 7, 5), h.rand(-1, 1, 7, 5), h.rand(-0.1, 0.1, 7, 5), h.rand(0, 0.01, 7, 5)
	const lr, b1, b2, eps, wd, iter = 1e-2, 0.9, 0.999, 1e-8, 0.1, 3
	b1h, b2h := reference.AdamWBiasCorrection(b1, b2, iter)
	params := reference.FromData([]float64{lr, b1, b2, eps, wd, b1h, b2h}, 7)
	wi, mi, vi := h.param(w), h.in(m), h.in(v)
	h.run(h.c.OptStepAdamW(wi, h.in(g), mi, vi, h.in(params)))
	wr, mr, vr := w.Clone(), m.Clone(), v.Clone()
	reference.AdamWStep(wr.Data, g.Data, mr.Data, vr.Data, lr, b1, b2, eps, wd, b1h, b2h)
	near(t, "OptStepAdamW w", wr, h.out(wi), 1e-6, 1)
	near(t, "OptStepAdamW m", mr, h.out(mi), 1e-6, 1)
	near(t, "OptStepAdamW v", vr, h.out(vi), 1e-6, 1)
}

func TestAcc(t *testing.T) {
	h := newHarness(t)
	a, b := h.rand(-1, 1, 7, 5, 3), h.rand(-1, 1, 3, 2, 2)
	ai := h.in(a)
	nb := ai.Nb()
	// b lands at element (2, 1, 1) of a, with rows one apart (case 1) or two apart (case 2).
	acc1 := h.c.Acc(ai, h.in(b), nb[1], nb[2], nb[3], 4*(2+7*1+35*1))
	acc2 := h.c.Acc(ai, h.in(b), 2*nb[1], nb[2], nb[3], 4*(2+7*1+35*1))
	h.run(acc1, acc2)
	for _, tc := range []struct {
		stride int
		got    *Tensor
	}{{1, acc1}, {2, acc2}} {
		want := a.Clone()
		for i2 := 0; i2 < 2; i2++ {
			for i1 := 0; i1 < 2; i1++ {
				for i0 := 0; i0 < 3; i0++ {
					want.Data[want.Index(2+i0, 1+tc.stride*i1, 1+i2)] += b.At(i0, i1, i2)
				}
			}
		}
		near(t, fmt.Sprint("Acc row stride ", tc.stride), want, h.out(tc.got), tight, 1)
	}
}

func TestLayoutOps(t *testing.T) {
	h := newHarness(t)
	a := h.rand(-1, 1, 7, 5, 3, 2)
	x := h.in(a)
	reshape := h.c.Reshape(x, 15, 14)
	flat := h.c.View(x, []int64{10}, nil, 4*5)
	nb := x.Nb()
	view := h.c.Cont(h.c.View(x, []int64{3, 2, 2}, []int{2 * nb[1], nb[2]}, 4*(1+7*1)))
	view4 := h.c.Cont(h.c.View(x, []int64{4, 3, 2, 1}, []int{nb[1], nb[3], nb[3]}, 4*(3+7*2)))
	transpose := h.c.Cont(h.c.Transpose(x))
	axes := [][4]int{{0, 2, 1, 3}, {1, 2, 0, 3}, {2, 0, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}}
	perms := make([]*Tensor, len(axes))
	for i, ax := range axes {
		perms[i] = h.c.Cont(h.c.Permute(x, ax))
	}
	dup := h.c.Dup(x)
	h.run(append([]*Tensor{reshape, flat, view, view4, transpose, dup}, perms...)...)

	near(t, "Reshape", a.Reshape(15, 14), h.out(reshape), 0, 1)
	near(t, "View 1-D", reference.FromData(a.Data[5:15], 10), h.out(flat), 0, 1)
	wantView := reference.New(3, 2, 2)
	for i2 := 0; i2 < 2; i2++ {
		for i1 := 0; i1 < 2; i1++ {
			for i0 := 0; i0 < 3; i0++ {
				wantView.Set(a.At(1+i0, 1+2*i1, i2), i0, i1, i2)
			}
		}
	}
	near(t, "View 3-D strided", wantView, h.out(view), 0, 1)
	wantView4 := reference.New(4, 3, 2, 1)
	for i1 := 0; i1 < 3; i1++ {
		for i0 := 0; i0 < 4; i0++ {
			for i2 := 0; i2 < 2; i2++ {
				// dims 2 and 3 step over whole i3 blocks of a (nb[3]), starting at (3, 2, 0, 0)
				wantView4.Set(a.At(3+i0, 2+i1, 0, i2), i0, i1, i2, 0)
			}
		}
	}
	near(t, "View 4-D", wantView4, h.out(view4), 0, 1)
	near(t, "Transpose+Cont", reference.Transpose(a), h.out(transpose), 0, 1)
	near(t, "Dup", a, h.out(dup), 0, 1)
	for i, ax := range axes {
		near(t, fmt.Sprint("Permute", ax, "+Cont"), reference.Permute(a, ax[0], ax[1], ax[2], ax[3]), h.out(perms[i]), 0, 1)
	}
}

func TestCopyAndCast(t *testing.T) {
	h := newHarness(t)
	a := h.rand(-100, 100, 7, 5, 3)
	x := h.in(a)
	f16 := h.c.Cpy(x, h.c.NewTensor(F16, 7, 5, 3))
	round := h.c.Cpy(f16, h.c.NewTensor(F32, 7, 5, 3))
	cast := h.c.Cast(h.c.Cast(x, F16), F32)
	bf := h.c.Cast(h.c.Cast(x, BF16), F32)
	into2D := h.c.Cpy(x, h.c.NewTensor(F32, 15, 7)) // a copy may reshape
	h.run(round, cast, bf, into2D)
	near(t, "Cpy f32→f16→f32", a.Map(reference.RoundF16), h.out(round), 0, 1)
	near(t, "Cast f32→f16→f32", a.Map(reference.RoundF16), h.out(cast), 0, 1)
	near(t, "Cast f32→bf16→f32", a.Map(reference.RoundBF16), h.out(bf), 0, 1)
	near(t, "Cpy reshaping", a.Reshape(15, 7), h.out(into2D), 0, 1)
}

// TestContCPU checks toy's own tiled copy against the float64 reference's permutation (and
// ggml's Cont, value for value) on odd shapes that leave partial tiles, every transposing
// permutation, a strided view, and both thread counts' splits of the rows.
func TestContCPU(t *testing.T) {
	if !onCPU {
		t.Skip("ContCPU runs on the CPU backend only")
	}
	for _, s := range []struct {
		ne   []int
		axes [4]int
	}{
		{[]int{37, 21}, [4]int{1, 0, 2, 3}},
		{[]int{16, 48}, [4]int{1, 0, 2, 3}},
		{[]int{33, 17, 3}, [4]int{1, 0, 2, 3}},
		{[]int{19, 5, 7, 2}, [4]int{2, 0, 3, 1}},
		{[]int{9, 40, 3, 2}, [4]int{0, 2, 1, 3}},
		{[]int{1, 23}, [4]int{1, 0, 2, 3}},
	} {
		t.Run(fmt.Sprint(s.ne, s.axes), func(t *testing.T) {
			h := newHarness(t)
			x := h.distinct(s.ne...)
			p := h.c.Permute(h.in(x), s.axes)
			fast, slow := h.c.ContCPU(p), h.c.Cont(p)
			h.run(fast, slow)
			want := reference.Permute(x, s.axes[0], s.axes[1], s.axes[2], s.axes[3])
			near(t, "ContCPU", want, h.out(fast), 0, 1)
			near(t, "Cont", h.out(slow), h.out(fast), 0, 1)
		})
	}
	t.Run("view", func(t *testing.T) {
		h := newHarness(t)
		x := h.distinct(29, 40)
		in := h.in(x)
		// Rows 3..38 of columns 2..22, transposed: a row stride of 29 floats, an offset.
		v := h.c.View(in, []int64{21, 36}, []int{29 * 4}, (3*29+2)*4)
		got := h.eval(h.c.ContCPU(h.c.Transpose(v)))
		for i := 0; i < 21; i++ {
			for j := 0; j < 36; j++ {
				require.Equal(t, x.Data[(3+j)*29+2+i], got.Data[i*36+j], "element (%d, %d)", j, i)
			}
		}
	})
	t.Run("f16 refused", func(t *testing.T) {
		h := newHarness(t)
		require.Nil(t, h.c.ContCPU(h.inF16(h.rand(-1, 1, 4, 4))))
		require.ErrorContains(t, h.c.Err(), "want f32")
	})
}

// TestMulMatCols checks toy's own kernel for a few columns against the float64 reference
// (f16 and bf16 weights with the columns unrounded, f32 weights), on shapes that leave a row tail
// (k not a multiple of the vector width), rows the lanes do not divide, and every column count
// up to MulMatColsMax (two passes past 8), and rows long enough (1100, 1536) that the columns
// are packed in groups of 4 (from 6 and from 5 columns on); and that a column's result is the
// same, to the bit, whatever the other columns: the kernel sums each (row, column) product
// alone. The larger
// shapes cut the rows into many chunks, which the threads claim in turn (or one thread takes
// alone), and pack more columns than the kernel's stack holds.
func TestMulMatCols(t *testing.T) {
	if !onCPU {
		t.Skip("MulMatCols runs on the CPU backend only")
	}
	for _, typ := range []Type{F16, BF16, F32, Q8_0, Q5_0} {
		// 3 threads: regions of unequal chunks; 11: more threads than the kernel's regions (8).
		for _, s := range []struct{ k, n, threads int }{{37, 23, 2}, {64, 9, 2}, {576, 130, 2}, {5, 3, 2}, {576, 1037, 2}, {1100, 301, 1}, {1536, 97, 2},
			{256, 1037, 3}, {128, 1500, 11}} {
			if s.threads > 2 && typ != F32 {
				continue // the claims do not depend on the weights' type
			}
			if (typ == Q8_0 || typ == Q5_0) && s.k%32 != 0 {
				continue // q8_0 and q5_0 rows are whole blocks of 32
			}
			t.Run(fmt.Sprintf("%s/%dx%d/threads=%d", TypeName(typ), s.k, s.n, s.threads), func(t *testing.T) {
				h := newHarness(t)
				if s.threads != testThreads {
					be, err := NewCPUBackend(s.threads)
					require.NoError(t, err)
					t.Cleanup(func() { be.Close() })
					h.be = be
				}
				a := h.rand(-1, 1, s.k, s.n)
				var w, deq *Tensor
				switch typ {
				case F16:
					a = a.Map(reference.RoundF16)
					w = h.inF16(a)
				case BF16:
					a = a.Map(reference.RoundBF16)
					raw := make([]byte, 2*len(a.Data))
					for i, v := range a.Data {
						binary.LittleEndian.PutUint16(raw[2*i:], reference.F32ToBF16(float32(v)))
					}
					w = h.inBytes(BF16, raw, int64(s.k), int64(s.n))
				case Q8_0:
					// The reference multiplies the weights as q8_0 holds them.
					raw := reference.QuantizeQ8_0(a.ToF32())
					a = reference.FromF32(reference.DequantizeQ8_0(raw), s.k, s.n)
					w = h.inBytes(Q8_0, raw, int64(s.k), int64(s.n))
				case Q5_0:
					raw, err := Quantize(Q5_0, a.ToF32(), s.k)
					require.NoError(t, err)
					w = h.inBytes(Q5_0, raw, int64(s.k), int64(s.n))
					deq = h.c.Cast(w, F32) // the weights as q5_0 holds them, by ggml's dequantizer
				default:
					w = h.in(a)
				}
				b := h.rand(-1, 1, s.k, MulMatColsMax)
				x := h.in(b)
				var outs []*Tensor
				for m := 1; m <= MulMatColsMax; m++ {
					cols := h.c.View(x, []int64{int64(s.k), int64(m)}, []int{s.k * 4}, 0)
					outs = append(outs, h.c.MulMatCols(w, cols))
				}
				if deq != nil {
					h.run(append(outs, deq)...)
					a = h.out(deq)
				} else {
					h.run(outs...)
				}
				full := h.out(outs[MulMatColsMax-1])
				// float32 sums of k terms of magnitude ≤ 1: k·u bounds their rounding.
				near(t, "MulMatCols", reference.MulMat(a, b), full, max(mulMatTol, float64(s.k)*0x1p-24), 1)
				for m, o := range outs {
					got := h.out(o)
					for i := range got.Data {
						require.Equal(t, full.Data[i], got.Data[i], "%d columns: element %d differs from the %d-column product's", m+1, i, MulMatColsMax)
					}
				}
				// The graph again, on other columns: the threads' claim counters were reset.
				b2 := h.rand(-1, 1, s.k, MulMatColsMax)
				require.NoError(t, x.SetF32(b2.ToF32()))
				require.NoError(t, h.be.Compute(h.g))
				for _, m := range []int{1, MulMatColsMax} {
					cols := reference.Tensor{Ne: [4]int{s.k, m, 1, 1}, Data: b2.Data[:s.k*m]}
					near(t, fmt.Sprintf("MulMatCols again, %d columns", m), reference.MulMat(a, cols), h.out(outs[m-1]), max(mulMatTol, float64(s.k)*0x1p-24), 1)
				}
			})
		}
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		w, x := h.in(h.rand(-1, 1, 8, 4)), h.in(h.rand(-1, 1, 8, MulMatColsMax+1))
		require.Nil(t, h.c.MulMatCols(w, x))
		require.ErrorContains(t, h.c.Err(), fmt.Sprintf("at most %d", MulMatColsMax))
	})
}

// TestAttendOne checks toy's own attention kernel for one query per sequence against a float64
// reference, on views laid out as a decoder's cache is (each sequence's region of cells from
// its own offset, grouped query heads, the values transposed), with masks that hide random
// cells (every row keeps one), f32 and f16 masks, cell counts that are and are not multiples
// of the vector width, many query heads to a key/value head, and more cells than the kernel's
// stack holds; and that ggml's own unfused attention agrees within its
// f16 rounding of the queries and probabilities.
func TestAttendOne(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("AttendOne runs on a vectorized CPU build only")
	}
	for _, s := range []struct {
		hdk, hdv, H, Hkv, S, kvLen int
		maskType                   Type
	}{{64, 64, 6, 2, 3, 37, F32}, {64, 64, 9, 3, 8, 64, F16}, {32, 48, 4, 4, 1, 130, F32}, {128, 128, 2, 1, 2, 16, F16},
		{64, 64, 10, 1, 2, 50, F32}, {16, 16, 2, 1, 1, 4200, F16}} {
		t.Run(fmt.Sprintf("hdk=%d/hdv=%d/H=%d/Hkv=%d/S=%d/kv=%d/%s", s.hdk, s.hdv, s.H, s.Hkv, s.S, s.kvLen, TypeName(s.maskType)), func(t *testing.T) {
			h := newHarness(t)
			first, stride := 3, max(150, s.kvLen) // sequence j's cells start at first + j·stride
			cells := first + s.S*stride
			q := h.rand(-1, 1, s.hdk, s.H, s.S)
			kc := h.rand(-1, 1, s.hdk*s.Hkv, cells).Map(reference.RoundF16)
			vc := h.rand(-1, 1, cells, s.hdv*s.Hkv).Map(reference.RoundF16)
			mask := make([]float64, s.kvLen*s.S)
			for j := 0; j < s.S; j++ {
				keep := h.rng.IntN(s.kvLen)
				for c := 0; c < s.kvLen; c++ {
					if c != keep && h.rng.IntN(3) == 0 {
						mask[j*s.kvLen+c] = math.Inf(-1)
					}
				}
			}
			mt := reference.Tensor{Ne: [4]int{s.kvLen, s.S, 1, 1}, Data: mask}
			var m *Tensor
			if s.maskType == F16 {
				m = h.inF16(mt)
			} else {
				m = h.in(mt)
			}
			K, V := h.inF16(kc), h.inF16(vc)
			rowK := 2 * s.hdk * s.Hkv
			kv := h.c.View(K, []int64{int64(s.hdk), int64(s.kvLen), int64(s.Hkv), int64(s.S)}, []int{rowK, 2 * s.hdk, stride * rowK}, first*rowK)
			vv := h.c.View(V, []int64{int64(s.kvLen), int64(s.hdv), int64(s.Hkv), int64(s.S)}, []int{2 * cells, 2 * s.hdv * cells, 2 * stride}, 2*first)
			qt := h.in(q)
			scale := float32(1 / math.Sqrt(float64(s.hdk)))
			got := h.c.AttendOne(qt, kv, vv, m, scale)
			require.NotNil(t, got, "%v", h.c.Err())
			// The same values a cell at a time, as flash attention's cache holds them
			// ([hdv·Hkv, cells]), read through a permuted view.
			vr := reference.Tensor{Ne: [4]int{s.hdv * s.Hkv, cells, 1, 1}, Data: make([]float64, len(vc.Data))}
			for ch := 0; ch < s.hdv*s.Hkv; ch++ {
				for c := 0; c < cells; c++ {
					vr.Data[c*s.hdv*s.Hkv+ch] = vc.Data[ch*cells+c]
				}
			}
			rowV := 2 * s.hdv * s.Hkv
			vrows := h.c.Permute(h.c.View(h.inF16(vr), []int64{int64(s.hdv), int64(s.kvLen), int64(s.Hkv), int64(s.S)}, []int{rowV, 2 * s.hdv, stride * rowV}, first*rowV), [4]int{1, 0, 2, 3})
			gotRows := h.c.AttendOne(qt, kv, vrows, m, scale)
			require.NotNil(t, gotRows, "%v", h.c.Err())
			// The first sequence alone: with fewer jobs than 2 a thread, the kernel attends one
			// query head at a time, where the S sequences' heads of one key/value head go
			// together; the outputs must be the same to the bit.
			qn, kn, vn := qt.Nb(), kv.Nb(), vv.Nb()
			alone := h.c.AttendOne(h.c.View(qt, []int64{int64(s.hdk), int64(s.H), 1}, []int{qn[1], qn[2]}, 0),
				h.c.View(K, []int64{int64(s.hdk), int64(s.kvLen), int64(s.Hkv), 1}, []int{kn[1], kn[2], kn[3]}, first*rowK),
				h.c.View(V, []int64{int64(s.kvLen), int64(s.hdv), int64(s.Hkv), 1}, []int{vn[1], vn[2], vn[3]}, 2*first),
				h.c.View(m, []int64{int64(s.kvLen), 1}, []int{m.Nb()[1]}, 0), scale)
			require.NotNil(t, alone, "%v", h.c.Err())
			// ggml's unfused attention of the same views, as kvCache.attend builds it for T = 1.
			Q := h.c.Permute(h.c.Reshape(qt, int64(s.hdk), int64(s.H), 1, int64(s.S)), [4]int{0, 2, 1, 3})
			kq := h.c.SoftMaxExt(h.c.MulMat(kv, Q), h.c.Reshape(m, int64(s.kvLen), 1, 1, int64(s.S)), scale, 0)
			viaGGML := h.c.Cont(h.c.Permute(h.c.MulMat(vv, kq), [4]int{0, 2, 1, 3}))
			h.run(got, viaGGML, alone, gotRows)
			all, one := h.out(got), h.out(alone)
			for i, v := range one.Data {
				require.Equal(t, math.Float32bits(float32(all.Data[i])), math.Float32bits(float32(v)), "sequence 0 alone, value %d", i)
			}

			want := attendOneReference(q, kc, vc, mask, s.hdv, s.Hkv, s.kvLen, first, stride, scale)
			near(t, "AttendOne", want, h.out(got), 1e-5, 1)
			near(t, "AttendOne, values a cell at a time", want, h.out(gotRows), 1e-5, 1)
			ggmlOut := h.out(viaGGML)
			ggmlOut.Ne = want.Ne
			near(t, "ggml's unfused attention", want, ggmlOut, 2e-3, 1)
		})
	}
}

// attendOneReference is AttendOne's result in float64: queries q [hdk, H, S], keys kc
// [hdk·Hkv, cells] and values vc transposed [cells, hdv·Hkv], sequence j's kvLen cells from
// first + j·stride, mask [kvLen, S].
func attendOneReference(q, kc, vc reference.Tensor, mask []float64, hdv, Hkv, kvLen, first, stride int, scale float32) reference.Tensor {
	return attendOneCappedReference(q, kc, vc, mask, hdv, Hkv, kvLen, first, stride, scale, 0)
}

// attendOneCappedReference is attendOneReference with the logits soft-capped where cap > 0:
// cap·tanh(scale·q·k/cap), then the mask, as AttendOneSoftcap computes them.
func attendOneCappedReference(q, kc, vc reference.Tensor, mask []float64, hdv, Hkv, kvLen, first, stride int, scale, cap float32) reference.Tensor {
	hdk, H, S, cells := q.Ne[0], q.Ne[1], q.Ne[2], kc.Ne[1]
	want := reference.Tensor{Ne: [4]int{hdv, H, S, 1}, Data: make([]float64, hdv*H*S)}
	for j := 0; j < S; j++ {
		for hd := 0; hd < H; hd++ {
			g := hd / (H / Hkv)
			score := make([]float64, kvLen)
			mx := math.Inf(-1)
			for c := 0; c < kvLen; c++ {
				cell := first + j*stride + c
				for d := 0; d < hdk; d++ {
					score[c] += q.Data[(j*H+hd)*hdk+d] * kc.Data[cell*hdk*Hkv+g*hdk+d]
				}
				score[c] *= float64(scale)
				if cap > 0 {
					score[c] = float64(cap) * math.Tanh(score[c]/float64(cap))
				}
				score[c] += mask[j*kvLen+c]
				mx = math.Max(mx, score[c])
			}
			sum := 0.0
			for c := range score {
				score[c] = math.Exp(score[c] - mx)
				sum += score[c]
			}
			for e := 0; e < hdv; e++ {
				o := 0.0
				for c := 0; c < kvLen; c++ {
					o += score[c] * vc.Data[(g*hdv+e)*cells+first+j*stride+c]
				}
				want.Data[(j*H+hd)*hdv+e] = o / sum
			}
		}
	}
	return want
}

// TestAttendOneQ8_0 checks AttendOne over a q8_0 cache in flash attention's layout (a cell's
// keys, and its values, of each head in whole blocks) against the float64 reference on the
// cache's dequantized values, through one node and through blocks (past AttendBlockCells).
func TestAttendOneQ8_0(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("AttendOne runs on a vectorized CPU build only")
	}
	for _, s := range []struct{ hdk, hdv, H, Hkv, S, kvLen int }{{64, 64, 9, 3, 4, 70}, {32, 64, 4, 2, 2, 1100}, {128, 32, 2, 1, 1, 33}} {
		t.Run(fmt.Sprintf("hdk=%d/hdv=%d/H=%d/Hkv=%d/S=%d/kv=%d", s.hdk, s.hdv, s.H, s.Hkv, s.S, s.kvLen), func(t *testing.T) {
			h := newHarness(t)
			first, stride := 5, s.kvLen+7
			cells := first + s.S*stride
			q := h.rand(-1, 1, s.hdk, s.H, s.S)
			kRaw := reference.QuantizeQ8_0(h.rand(-1, 1, s.hdk*s.Hkv, cells).ToF32())
			vRaw := reference.QuantizeQ8_0(h.rand(-1, 1, s.hdv*s.Hkv, cells).ToF32())
			kc := reference.FromF32(reference.DequantizeQ8_0(kRaw), s.hdk*s.Hkv, cells)
			vr := reference.FromF32(reference.DequantizeQ8_0(vRaw), s.hdv*s.Hkv, cells) // a cell's values side by side
			mask := make([]float64, s.kvLen*s.S)
			for j := range mask {
				if j%s.kvLen != 0 && h.rng.IntN(4) == 0 {
					mask[j] = math.Inf(-1)
				}
			}
			rowK, rowV, blk := s.hdk*s.Hkv/32*34, s.hdv*s.Hkv/32*34, 34
			K := h.c.View(h.inBytes(Q8_0, kRaw, int64(s.hdk*s.Hkv), int64(cells)), []int64{int64(s.hdk), int64(s.kvLen), int64(s.Hkv), int64(s.S)},
				[]int{rowK, s.hdk / 32 * blk, stride * rowK}, first*rowK)
			V := h.c.Permute(h.c.View(h.inBytes(Q8_0, vRaw, int64(s.hdv*s.Hkv), int64(cells)), []int64{int64(s.hdv), int64(s.kvLen), int64(s.Hkv), int64(s.S)},
				[]int{rowV, s.hdv / 32 * blk, stride * rowV}, first*rowV), [4]int{1, 0, 2, 3})
			scale := float32(1 / math.Sqrt(float64(s.hdk)))
			got := h.c.AttendOne(h.in(q), K, V, h.in(reference.Tensor{Ne: [4]int{s.kvLen, s.S, 1, 1}, Data: mask}), scale)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got)
			near(t, "AttendOne q8_0", attendOneReference(q, kc, reference.Transpose(vr), mask, s.hdv, s.Hkv, s.kvLen, first, stride, scale), h.out(got), 1e-5, 1)
		})
	}
}

// TestAttendOneMaskedTail: a step attends every sequence over the same cells, so a shorter
// sequence's last cells are masked; AttendOne reads a sequence's cells only up to the last one
// its mask shows (rounded up to a vector). Its keys and values past that are NaN here, which
// any read would spread; the outputs must be those of the same cells holding finite values, to
// the bit, and the float64 attention over the shown cells.
func TestAttendOneMaskedTail(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("AttendOne runs on a vectorized CPU build only")
	}
	const hd, H, Hkv, kvLen = 64, 9, 3, 128
	shown := []int{1, 17, 70, kvLen, 16} // cells each sequence's mask shows
	S := len(shown)
	for _, maskType := range []Type{F32, F16} {
		t.Run(TypeName(maskType), func(t *testing.T) {
			h := newHarness(t)
			q := h.rand(-1, 1, hd, H, S)
			kc := h.rand(-1, 1, hd, kvLen, Hkv, S).Map(reference.RoundF16)
			vc := h.rand(-1, 1, kvLen, hd, Hkv, S).Map(reference.RoundF16)
			mask := reference.New(kvLen, S)
			kp, vp := kc.Map(func(x float64) float64 { return x }), vc.Map(func(x float64) float64 { return x })
			for j, n := range shown {
				read := (n + 15) / 16 * 16 // whole vectors of 16 lanes (AVX2's 8 read no more)
				for c := n; c < kvLen; c++ {
					mask.Data[j*kvLen+c] = math.Inf(-1)
				}
				for g := 0; g < Hkv; g++ {
					for c := read; c < kvLen; c++ {
						for d := 0; d < hd; d++ {
							kp.Data[((j*Hkv+g)*kvLen+c)*hd+d] = math.NaN()
							vp.Data[((j*Hkv+g)*hd+d)*kvLen+c] = math.NaN()
						}
					}
				}
			}
			m := h.in(mask)
			if maskType == F16 {
				m = h.inF16(mask)
			}
			qt := h.in(q)
			scale := float32(0.125)
			clean := h.c.AttendOne(qt, h.inF16(kc), h.inF16(vc), m, scale)
			poisoned := h.c.AttendOne(qt, h.inF16(kp), h.inF16(vp), m, scale)
			require.NotNil(t, poisoned, "%v", h.c.Err())
			h.run(clean, poisoned)
			b := h.out(poisoned)
			sameBits(t, "AttendOne over a poisoned cache", h.out(clean), b)
			near(t, "AttendOne over the shown cells", attendShown(q, kc, vc, shown, H, Hkv, float64(scale)), b, 1e-5, 1)
		})
	}
}

// attendShown is the float64 attention of one query per sequence over the first shown[j]
// cells of sequence j: q [hd, H, S], keys kc [hd, kvLen, Hkv, S], values vc [kvLen, hd, Hkv,
// S] (as AttendOne reads the transposed value cache), query head h on key/value head
// h / (H / Hkv). The result is [hd, H, S].
func attendShown(q, kc, vc reference.Tensor, shown []int, H, Hkv int, scale float64) reference.Tensor {
	hd, kvLen, S := q.Ne[0], kc.Ne[1], len(shown)
	want := reference.New(hd, H, S)
	for j, n := range shown {
		for hh := 0; hh < H; hh++ {
			g := hh / (H / Hkv)
			score, sum, mx := make([]float64, n), 0.0, math.Inf(-1)
			for c := range score {
				for d := 0; d < hd; d++ {
					score[c] += q.Data[(j*H+hh)*hd+d] * kc.Data[((j*Hkv+g)*kvLen+c)*hd+d]
				}
				score[c] *= scale
				mx = math.Max(mx, score[c])
			}
			for c := range score {
				score[c] = math.Exp(score[c] - mx)
				sum += score[c]
			}
			for d := 0; d < hd; d++ {
				o := 0.0
				for c := range score {
					o += score[c] * vc.Data[((j*Hkv+g)*hd+d)*kvLen+c]
				}
				want.Data[(j*H+hh)*hd+d] = o / sum
			}
		}
	}
	return want
}

// TestAttendOneBlocks: over more than AttendBlockCells() cells AttendOne attends each sequence a
// block at a time and joins the blocks. Three sequences show 300, 1500 and 1025 of 1600 cells
// (the last one block of 1024 and one cell). Each must match the float64 attention over its shown
// cells, and give the same bits as a step of that sequence alone over only as many cells as it
// shows: one block (the one-node attention) for the first, several for the others; at one
// thread and at three.
func TestAttendOneBlocks(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("AttendOne runs on a vectorized CPU build only")
	}
	const hd, H, Hkv, kvLen = 64, 9, 3, 1600
	shown := []int{300, 1500, 1025}
	require.Equal(t, int64(1024), AttendBlockCells(), "the cases above are for blocks of 1024 cells")
	S := len(shown)
	h := newHarness(t)
	q := h.rand(-1, 1, hd, H, S)
	kc := h.rand(-1, 1, hd, kvLen, Hkv, S).Map(reference.RoundF16)
	vc := h.rand(-1, 1, kvLen, hd, Hkv, S).Map(reference.RoundF16)
	mask := reference.New(kvLen, S)
	for j, n := range shown {
		for c := n; c < kvLen; c++ {
			mask.Data[j*kvLen+c] = math.Inf(-1)
		}
	}
	qt, K, V, m := h.in(q), h.inF16(kc), h.inF16(vc), h.in(mask)
	scale := float32(0.125)
	all := h.c.AttendOne(qt, K, V, m, scale)
	// Sequence j alone, over its shown cells rounded up to 16 (what a pass over it reads).
	var alone []*Tensor
	for j, n := range shown {
		cells := int64((n + 15) / 16 * 16)
		qn, kn, vn, mn := qt.Nb(), K.Nb(), V.Nb(), m.Nb()
		alone = append(alone, h.c.AttendOne(
			h.c.View(qt, []int64{hd, H, 1}, []int{qn[1], qn[2]}, j*qn[2]),
			h.c.View(K, []int64{hd, cells, Hkv, 1}, []int{kn[1], kn[2], kn[3]}, j*kn[3]),
			h.c.View(V, []int64{cells, hd, Hkv, 1}, []int{vn[1], vn[2], vn[3]}, j*vn[3]),
			h.c.View(m, []int64{cells, 1}, []int{mn[1]}, j*mn[1]), scale))
	}
	require.NoError(t, h.c.Err())
	h.run(append([]*Tensor{all}, alone...)...)
	got := h.out(all)

	near(t, "AttendOne in blocks", attendShown(q, kc, vc, shown, H, Hkv, float64(scale)), got, 1e-5, 1)
	for j, a := range alone {
		one := h.out(a)
		for i, v := range one.Data {
			require.Equal(t, math.Float32bits(float32(got.Data[j*H*hd+i])), math.Float32bits(float32(v)), "sequence %d alone, value %d", j, i)
		}
	}
	for _, threads := range []int{1, 3} {
		be, err := NewCPUBackend(threads)
		require.NoError(t, err)
		require.NoError(t, be.Compute(h.g))
		be.Close()
		again := h.out(all)
		for i, v := range again.Data {
			require.Equal(t, math.Float32bits(float32(got.Data[i])), math.Float32bits(float32(v)), "%d threads, value %d", threads, i)
		}
	}
}

// TestSoftMaxCPU checks toy's own softmax kernel against a float64 reference and ggml's
// SoftMaxExt: training's shape with a causal mask, odd rows, f16 masks broadcast per sequence
// and per head, no mask, and a row the mask hides entirely.
// TestRMSNormMulCPU checks toy's fused RMS norm and scale against float64 and against ggml's
// RMSNorm then Mul, to the bit: rows of a decoding step, a per-head norm's rows of 64, a row
// length with a tail past the kernel's eight sums, rows of very different magnitudes, and rows
// read through a view with a stride longer than a row.
func TestRMSNormMulCPU(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("RMSNormMulCPU runs on a vectorized CPU build only")
	}
	const eps = 1e-5
	for _, s := range []struct {
		name   string
		ne     []int
		stride int // the input's row stride in floats (0: rows side by side)
	}{
		{"a decoding step's rows", []int{576, 8}, 0},
		{"a per-head norm", []int{64, 9, 8}, 0},
		{"odd row length, 4-D", []int{37, 5, 2, 3}, 0},
		{"long rows", []int{1100, 3}, 0},
		{"strided rows", []int{576, 5}, 600},
	} {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t)
			n := s.ne[0]
			x := h.rand(-4, 4, s.ne...)
			for r := 0; r < x.NRows(); r++ { // magnitudes from 1e-3 to 1e3
				f := math.Pow(10, float64(r%7)-3)
				for i := range n {
					x.Data[r*n+i] = reference.RoundF32(x.Data[r*n+i] * f)
				}
			}
			w := h.rand(-2, 2, n)
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
			wi := h.in(w)
			got, viaGGML := h.c.RMSNormMulCPU(xi, wi, eps), h.c.Mul(h.c.RMSNorm(xi, eps), wi)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, viaGGML)
			want := reference.Mul(reference.RMSNorm(x, eps), w)
			near(t, "RMSNormMulCPU", want, h.out(got), 1e-6, 1e-6)
			sameBits(t, "RMSNormMulCPU against ggml's RMSNorm and Mul", h.out(viaGGML), h.out(got))
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		x, w := h.in(h.rand(-1, 1, 8, 2)), h.in(h.rand(-1, 1, 8))
		require.NoError(t, RMSNormMulCPUFits(x, w, eps))
		for _, c := range []struct {
			x, w *Tensor
			eps  float32
			want string
		}{
			{x, h.in(h.rand(-1, 1, 7)), eps, "want 8 contiguous values"},
			{x, h.in(h.rand(-1, 1, 8, 2)), eps, "want 8 contiguous values"},
			{h.inF16(h.rand(-1, 1, 8, 2)), w, eps, "want f32"},
			{x, h.inF16(h.rand(-1, 1, 8)), eps, "want f32"},
			{x, w, -1, "eps -1"},
			{x, w, float32(math.NaN()), "eps NaN"},
			{x, w, float32(math.Inf(1)), "eps +Inf"},
		} {
			err := RMSNormMulCPUFits(c.x, c.w, c.eps)
			require.ErrorContains(t, err, c.want)
			require.Nil(t, h.c.RMSNormMulCPU(c.x, c.w, c.eps))
		}
	})
}

func TestSoftMaxCPU(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("SoftMaxCPU runs on a vectorized CPU build only")
	}
	for _, s := range []struct {
		name   string
		ne     [4]int // of the operand
		maskNe []int  // nil: no mask
		f16    bool
	}{
		{"training's attention", [4]int{512, 512, 9, 1}, []int{512, 512, 1, 1}, false},
		{"odd rows, f16 mask per sequence", [4]int{37, 5, 3, 2}, []int{37, 7, 1, 2}, true},
		{"mask per head", [4]int{48, 6, 4, 1}, []int{48, 6, 2, 1}, false},
		{"no mask", [4]int{21, 4, 2, 1}, nil, false},
	} {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.rand(-4, 4, s.ne[:]...)
			var mask *reference.Tensor
			var mi *Tensor
			if s.maskNe != nil {
				// A causal mask (whole vectors of hidden cells in the long rows) plus random
				// biases in [-2, 0].
				m := h.rand(-2, 0, s.maskNe...)
				causal := reference.CausalMask(s.maskNe[0], s.maskNe[1], 0)
				for i := range m.Data {
					m.Data[i] += causal.Data[i%len(causal.Data)]
				}
				if s.f16 {
					mi, m = h.inF16(m), m.Map(reference.RoundF16)
				} else {
					mi = h.in(m)
				}
				mask = &m
			}
			const scale = 0.125
			at := h.in(a)
			got, viaGGML := h.c.SoftMaxCPU(at, mi, scale), h.c.SoftMaxExt(at, mi, scale, 0)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, viaGGML)
			want := reference.SoftMaxExt(a, mask, scale, 0)
			near(t, "SoftMaxCPU", want, h.out(got), 1e-6, 1)
			near(t, "ggml's SoftMaxExt", want, h.out(viaGGML), 1e-6, 1)
		})
	}
	t.Run("hidden row", func(t *testing.T) {
		h := newHarness(t)
		a := h.rand(-4, 4, 40, 2)
		m := reference.New(40, 2)
		for i := range 40 {
			m.Data[i] = math.Inf(-1) // row 0 hidden entirely; row 1 sees every cell
		}
		got := h.c.SoftMaxCPU(h.in(a), h.in(m), 1)
		h.run(got)
		out := h.out(got)
		want := reference.SoftMaxExt(reference.FromData(a.Data[40:], 40), nil, 1, 0)
		for i := range 40 {
			require.Zero(t, out.Data[i], "cell %d of the hidden row", i)
			require.InDelta(t, want.Data[i], out.Data[40+i], 1e-6, "cell %d of the open row", i)
		}
	})
	t.Run("non-finite scores", func(t *testing.T) {
		// A row holding a NaN or a +inf score is NaN throughout, as ggml's, in the vectors and
		// in the tail; a -inf score is a hidden cell, as the causal mask's are (and ggml's and
		// the reference's); the other rows are untouched.
		h := newHarness(t)
		const n, rows = 37, 6
		a := h.rand(-4, 4, n, rows)
		a.Data[1*n+3] = math.NaN()                 // in a vector
		a.Data[2*n+n-1] = math.NaN()               // in the tail
		a.Data[3*n+20] = math.Inf(1)               // an infinite score
		a.Data[4*n+5] = math.Inf(-1)               // and a negative one
		m := reference.CausalMask(n, rows, n-rows) // every row sees its first n-rows+row cells
		got, viaGGML := h.c.SoftMaxCPU(h.in(a), h.in(m), 0.5), h.c.SoftMaxExt(h.in(a), h.in(m), 0.5, 0)
		h.run(got, viaGGML)
		out, ggmls := h.out(got), h.out(viaGGML)
		want := reference.SoftMaxExt(a, &m, 0.5, 0)
		for r := range rows {
			bad := r >= 1 && r <= 3
			for i := range n {
				v := out.Data[r*n+i]
				if bad {
					require.True(t, math.IsNaN(v), "row %d cell %d: %v, want NaN", r, i, v)
					require.True(t, math.IsNaN(ggmls.Data[r*n+i]), "ggml's row %d is NaN too", r)
				} else {
					require.InDelta(t, want.Data[r*n+i], v, 1e-6, "row %d cell %d", r, i)
				}
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		a := h.in(h.rand(-1, 1, 8, 4))
		require.Nil(t, h.c.SoftMaxCPU(a, h.in(h.rand(-1, 1, 8, 3)), 1))
		require.ErrorContains(t, h.c.Err(), "at least 4")
		h = newHarness(t)
		require.Nil(t, h.c.SoftMaxCPU(h.in(h.rand(-1, 1, 8, 4)), nil, float32(math.Inf(1))))
		require.ErrorContains(t, h.c.Err(), "finite")
	})
}

// TestMulMatPacked checks toy's packed GEMM against a float64 reference and against ggml's
// MulMat with the same broadcast of a's groups over b's heads, on shapes whose rows and columns
// do and do not fill the kernel's blocks, tiles and runs of columns, with shared dimensions
// short (attention's 64) and long (training's 576 and 1537, past the packed block's stack; 8200,
// past one pass).
// TestMulMatPackedFitsShape: the check of a b not yet built agrees with MulMatPackedFits on
// the built one, and refuses what it refuses.
func TestMulMatPackedFitsShape(t *testing.T) {
	h := newHarness(t)
	a := h.in(h.rand(-1, 1, 64, 70, 2))
	for _, ne := range [][]int64{{64, 13, 2}, {64, 13, 6}, {64, 1, 2}, {32, 13, 2}, {64, 13, 3}} {
		b := h.in(h.rand(-1, 1, int(ne[0]), int(ne[1]), int(ne[2])))
		want, got := MulMatPackedFits(a, b), MulMatPackedFitsShape(a, ne)
		require.Equal(t, want == nil, got == nil, "b %v: %v against %v", ne, want, got)
	}
	require.Error(t, MulMatPackedFitsShape(a, nil))
	require.Error(t, MulMatPackedFitsShape(a, []int64{64, 1, 1, 1, 1}))
}

func TestMulMatPacked(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("MulMatPacked runs on a vectorized CPU build only")
	}
	for _, s := range []struct{ K, M, G, N, heads int }{{64, 512, 3, 512, 9}, {37, 70, 2, 13, 2}, {128, 64, 1, 5, 4}, {16, 130, 2, 7, 6}, {1, 17, 1, 1, 1}, {576, 200, 1, 130, 1}, {1537, 70, 1, 300, 1}, {300, 64, 2, 97, 4}, {8200, 70, 1, 20, 1}} {
		t.Run(fmt.Sprintf("%dx%dx%d·%dx%d", s.K, s.M, s.G, s.N, s.heads), func(t *testing.T) {
			h := newHarness(t)
			a := h.rand(-1, 1, s.K, s.M, s.G)
			b := h.rand(-1, 1, s.K, s.N, s.heads)
			at, bt := h.in(a), h.in(b)
			got, viaGGML := h.c.MulMatPacked(at, bt), h.c.MulMat(at, bt)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, viaGGML)
			want := reference.Tensor{Ne: [4]int{s.M, s.N, s.heads, 1}, Data: make([]float64, s.M*s.N*s.heads)}
			r := s.heads / s.G
			for hd := 0; hd < s.heads; hd++ {
				for n := 0; n < s.N; n++ {
					for m := 0; m < s.M; m++ {
						sum := 0.0
						for k := 0; k < s.K; k++ {
							sum += a.Data[((hd/r)*s.M+m)*s.K+k] * b.Data[(hd*s.N+n)*s.K+k]
						}
						want.Data[(hd*s.N+n)*s.M+m] = sum
					}
				}
			}
			tol := max(mulMatTol, float64(s.K)*0x1p-24)
			near(t, "MulMatPacked", want, h.out(got), tol, 1)
			near(t, "ggml's MulMat", want, h.out(viaGGML), max(tol, 1e-4), 1)
		})
	}
	// Sequences (dim 3): each of a's own, and one of a's broadcast over two of b's.
	for _, s := range []struct{ aS, bS int }{{2, 2}, {1, 2}} {
		t.Run(fmt.Sprintf("sequences %d·%d", s.aS, s.bS), func(t *testing.T) {
			h := newHarness(t)
			a, b := h.rand(-1, 1, 64, 70, 3, s.aS), h.rand(-1, 1, 64, 13, 9, s.bS)
			at, bt := h.in(a), h.in(b)
			got := h.c.MulMatPacked(at, bt)
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got)
			near(t, "MulMatPacked", reference.MulMat(a, b), h.out(got), mulMatTol, 1)
		})
	}
	// Transposed views: a or b (or both) read with contiguous columns instead of rows, to the
	// bit as their dense copies; 8300 is past one pass of the kernel (8192).
	for _, s := range []struct {
		ta, tb bool
		K      int
	}{{true, false, 300}, {false, true, 300}, {true, true, 300}, {false, true, 8300}} {
		t.Run(fmt.Sprintf("transposed a %v b %v K %d", s.ta, s.tb, s.K), func(t *testing.T) {
			h := newHarness(t)
			const M, N = 130, 77
			a, b := h.rand(-1, 1, s.K, M, 2), h.rand(-1, 1, s.K, N, 4)
			at, bt := h.in(a), h.in(b)
			if s.ta { // a's data laid out as its transpose [M, K, 2], viewed back as [K, M, 2]
				at = h.c.Transpose(h.in(reference.Transpose(a)))
			}
			if s.tb {
				bt = h.c.Transpose(h.in(reference.Transpose(b)))
			}
			got, dense := h.c.MulMatPacked(at, bt), h.c.MulMatPacked(h.in(a), h.in(b))
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got, dense)
			g := h.out(got)
			near(t, "MulMatPacked", reference.MulMat(a, b), g, max(mulMatTol, float64(s.K)*0x1p-24), 1)
			sameBits(t, "MulMatPacked against its dense product", h.out(dense), g)
		})
	}
	t.Run("b strided both ways", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.in(h.rand(-1, 1, 64, 70)), h.in(h.rand(-1, 1, 128, 13))
		// b's values two apart along K and 128 apart along N: [64, 13, 2], strides 8, 512, 4
		strided := h.c.Permute(h.c.Reshape(b, 2, 64, 13), [4]int{2, 0, 1, 3})
		require.NotNil(t, strided, "%v", h.c.Err())
		require.Nil(t, h.c.MulMatPacked(a, strided))
		require.ErrorContains(t, h.c.Err(), "want rows or columns with contiguous elements")
	})
	t.Run("transposed f16 a", func(t *testing.T) {
		h := newHarness(t)
		const K, M, N = 8300, 70, 33 // past one pass of the kernel (8192)
		a, b := h.rand(-1, 1, K, M), h.rand(-1, 1, K, N)
		a = a.Map(reference.RoundF16)
		got := h.c.MulMatPacked(h.c.Transpose(h.inF16(reference.Transpose(a))), h.in(b))
		require.NotNil(t, got, "%v", h.c.Err())
		h.run(got)
		near(t, "MulMatPacked", reference.MulMat(a, b), h.out(got), max(mulMatTol, K*0x1p-24), 1)
	})
	// a is W [M, K] transposed: W's rows of 3 blocks, and of one, where a's first stride is one
	// block, as a matrix of rows' is (it was read as one, and gave NaN), with K more and fewer
	// than a block (4: a decoder's value cache of 4 cells).
	for _, s := range []struct{ M, K int }{{96, 70}, {32, 70}, {32, 4}} {
		t.Run(fmt.Sprintf("transposed q8_0 a, W's rows of %d, K %d", s.M, s.K), func(t *testing.T) {
			h := newHarness(t)
			M, K, N := s.M, s.K, 33
			w, b := h.rand(-1, 1, M, K), h.rand(-1, 1, K, N)
			raw := reference.QuantizeQ8_0(w.ToF32())
			wq := reference.FromF32(reference.DequantizeQ8_0(raw), M, K)
			got := h.c.MulMatPacked(h.c.Transpose(h.inBytes(Q8_0, raw, int64(M), int64(K))), h.in(b))
			require.NotNil(t, got, "%v", h.c.Err())
			h.run(got)
			near(t, "MulMatPacked", reference.MulMat(reference.Transpose(wq), b), h.out(got), max(mulMatTol, float64(K)*0x1p-24), 1)
		})
	}
	t.Run("q8_0 of one block each way refused", func(t *testing.T) {
		h := newHarness(t)
		raw := reference.QuantizeQ8_0(h.rand(-1, 1, 32, 32).ToF32())
		b := h.in(h.rand(-1, 1, 32, 5))
		for _, a := range []*Tensor{h.inBytes(Q8_0, raw, 32, 32), h.c.Transpose(h.inBytes(Q8_0, raw, 32, 32))} {
			require.ErrorContains(t, MulMatPackedFits(a, b), "reads as rows and as a transposed view alike")
		}
		require.Nil(t, h.c.MulMatPacked(h.inBytes(Q8_0, raw, 32, 32), b))
		require.ErrorContains(t, h.c.Err(), "reads as rows and as a transposed view alike")
	})
	// Weights of other types are converted to f32 as they are packed; b stays f32, so the
	// reference is the product of the weights' values as their type holds them.
	for _, typ := range []Type{F16, BF16, Q8_0} {
		// 8224: past one pass (8192); 32: rows of one q8_0 block.
		for _, s := range []struct{ K, M, N int }{{576, 200, 130}, {96, 64, 7}, {8224, 70, 13}, {32, 64, 5}} {
			t.Run(fmt.Sprintf("%s/%dx%d·%d", TypeName(typ), s.K, s.M, s.N), func(t *testing.T) {
				h := newHarness(t)
				a, b := h.rand(-1, 1, s.K, s.M), h.rand(-1, 1, s.K, s.N)
				var at *Tensor
				switch typ {
				case F16:
					at, a = h.inF16(a), a.Map(reference.RoundF16)
				case BF16:
					raw, err := Quantize(BF16, a.ToF32(), s.K)
					require.NoError(t, err)
					at = h.inBytes(BF16, raw, int64(s.K), int64(s.M))
					a = a.Map(func(v float64) float64 { return float64(reference.BF16ToF32(reference.F32ToBF16(float32(v)))) })
				case Q8_0:
					raw := reference.QuantizeQ8_0(a.ToF32())
					at, a = h.inBytes(Q8_0, raw, int64(s.K), int64(s.M)), reference.FromF32(reference.DequantizeQ8_0(raw), s.K, s.M)
				}
				got := h.c.MulMatPacked(at, h.in(b))
				require.NotNil(t, got, "%v", h.c.Err())
				h.run(got)
				near(t, "MulMatPacked "+TypeName(typ), reference.MulMat(a, b), h.out(got), max(mulMatTol, float64(s.K)*0x1p-24), 1)
			})
		}
	}
}

// TestMulMatPackedCausal checks each Causality of the packed GEMM on operands that hold its
// zeros: the values it computes equal MulMatPacked's to the bit (and float64's), and a masked
// causal score is 0 where it skips it.
func TestMulMatPackedCausal(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("MulMatPacked runs on a vectorized CPU build only")
	}
	// zero sets x's value (i, j) of each head to 0 where zeroAt(i, j) (i along ne0, j along ne1).
	zero := func(x reference.Tensor, zeroAt func(i, j int) bool) reference.Tensor {
		ne := x.Ne
		for h := 0; h < ne[2]*max(ne[3], 1); h++ {
			for j := 0; j < ne[1]; j++ {
				for i := 0; i < ne[0]; i++ {
					if zeroAt(i, j) {
						x.Data[(h*ne[1]+j)*ne[0]+i] = 0
					}
				}
			}
		}
		return x
	}
	// check returns how many masked scores are 0 (skipped), and how many are masked.
	check := func(t *testing.T, h *harness, mode Causality, a, b reference.Tensor, at, bt *Tensor, unread func(m, n int) bool) (skipped, masked int) {
		got, dense := h.c.MulMatPackedCausal(at, bt, mode), h.c.MulMatPacked(at, bt)
		require.NotNil(t, got, "%v", h.c.Err())
		h.run(got, dense)
		g, d, want := h.out(got), h.out(dense), reference.MulMat(a, b)
		M, N := g.Ne[0], g.Ne[1]
		bad := 0
		for i := range g.Data {
			m, n := i%M, i/M%N
			switch {
			case unread != nil && unread(m, n) && g.Data[i] == 0:
				want.Data[i] = 0
				skipped++
			case math.Float32bits(float32(g.Data[i])) != math.Float32bits(float32(d.Data[i])):
				bad++
			}
		}
		require.Zero(t, bad, "%d of %d values differ from MulMatPacked's (a masked score: and are not 0)", bad, len(g.Data))
		near(t, "MulMatPackedCausal", want, g, max(mulMatTol, float64(a.Ne[0])*0x1p-24), 1)
		if unread != nil {
			for i := range g.Data {
				if unread(i%M, i/M%N) {
					masked++
				}
			}
		}
		return skipped, masked
	}
	// Scores k·q [keys, queries]: a key after its query is masked, 0 where skipped; more than
	// a third of them are (tiles of 64 keys by 6 queries on AVX-512, 16 by 4 on AVX2).
	for _, s := range []struct{ T, G, heads int }{{512, 3, 9}, {70, 1, 2}, {13, 2, 2}, {130, 1, 1}, {65, 1, 1}} { // 65: a tile ends on the diagonal
		t.Run(fmt.Sprintf("scores/%d·%d", s.T, s.heads), func(t *testing.T) {
			h := newHarness(t)
			a, b := h.rand(-1, 1, 64, s.T, s.G), h.rand(-1, 1, 64, s.T, s.heads)
			skipped, masked := check(t, h, CausalScores, a, b, h.in(a), h.in(b), func(m, n int) bool { return m > n })
			if s.T >= 512 {
				require.Greater(t, skipped, masked/3, "masked scores skipped")
			}
		})
	}
	// Probabilities p [keys, queries] as b (v·p, kᵀ·dp), zero for a key after its query.
	for _, s := range []struct{ T, M, G, heads int }{{512, 64, 3, 9}, {70, 70, 1, 2}, {13, 64, 2, 2}, {200, 17, 1, 1}} {
		t.Run(fmt.Sprintf("probs/%d·%dx%d", s.T, s.M, s.heads), func(t *testing.T) {
			h := newHarness(t)
			a := h.rand(-1, 1, s.T, s.M, s.G)
			b := zero(h.rand(0, 1, s.T, s.T, s.heads), func(d, n int) bool { return d > n })
			_, _ = check(t, h, CausalProbs, a, b, h.in(a), h.in(b), nil)
		})
	}
	// Probabilities transposed by groups [queries·r, keys] as a (the gradients of v and k), zero
	// for a query before its key, read in place (a transposed view) or contiguous; 1100·8 is past
	// one pass of the kernel (8192), in the middle of a run.
	for _, s := range []struct {
		T, r, N, G int
		view       bool
	}{{512, 3, 64, 3, true}, {70, 2, 64, 1, false}, {130, 1, 7, 2, true}, {1100, 8, 13, 1, true}} {
		t.Run(fmt.Sprintf("probsT/%d·%dx%d view %v", s.T, s.r, s.N, s.view), func(t *testing.T) {
			h := newHarness(t)
			a := zero(h.rand(0, 1, s.T*s.r, s.T, s.G), func(d, m int) bool { return d%s.T < m })
			b := h.rand(-1, 1, s.T*s.r, s.N, s.G)
			at := h.in(a)
			if s.view {
				at = h.c.Transpose(h.in(reference.Transpose(a)))
			}
			_, _ = check(t, h, CausalProbsT, a, b, at, h.in(b), nil)
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.in(h.rand(-1, 1, 64, 70)), h.in(h.rand(-1, 1, 64, 71))
		require.Nil(t, h.c.MulMatPackedCausal(a, b, CausalScores))
		require.ErrorContains(t, h.c.Err(), "causal scores of 70 keys and 71 queries")
		h = newHarness(t)
		a, b = h.in(h.rand(-1, 1, 100, 70)), h.in(h.rand(-1, 1, 100, 7))
		require.Nil(t, h.c.MulMatPackedCausal(a, b, CausalProbsT))
		require.ErrorContains(t, h.c.Err(), "want a multiple")
	})
}

// TestSwigluBackCPU checks toy's SwiGLU backward against the float64 derivative of silu(g)·u,
// over gates from -30 to 30 (both branches of its logistic, and its saturation), on rows of a
// vector's width and of a ragged one.
func TestSwigluBackCPU(t *testing.T) {
	if !onCPU || !CPUKernelsFast() {
		t.Skip("SwigluBackCPU runs on a vectorized CPU build only")
	}
	for _, n := range []int{96, 37} {
		h := newHarness(t)
		g, u, dh := h.rand(-30, 30, n, 7), h.rand(-2, 2, n, 7), h.rand(-1, 1, n, 7)
		got := h.c.SwigluBackCPU(h.in(g), h.in(u), h.in(dh))
		require.NotNil(t, got, "%v", h.c.Err())
		h.run(got)
		want := reference.Tensor{Ne: [4]int{n, 7, 2, 1}, Data: make([]float64, 2*n*7)}
		for i, x := range g.Data {
			s := 1 / (1 + math.Exp(-x))
			want.Data[i] = dh.Data[i] * u.Data[i] * s * (1 + x*(1-s))
			want.Data[n*7+i] = dh.Data[i] * x * s
		}
		near(t, "SwigluBackCPU", want, h.out(got), 1e-5, 1)
	}
	h := newHarness(t)
	a, b := h.in(h.rand(-1, 1, 8, 3)), h.in(h.rand(-1, 1, 8, 4))
	require.Nil(t, h.c.SwigluBackCPU(a, a, b))
	require.ErrorContains(t, h.c.Err(), "want three matrices of one shape")
}
