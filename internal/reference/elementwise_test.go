package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinaryBroadcast(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	row := FromData([]float64{10, 20, 30}, 3, 1)
	col := FromData([]float64{100, 200}, 1, 2)
	one := FromData([]float64{2}, 1)

	assert.Equal(t, []float64{11, 22, 33, 14, 25, 36}, Add(a, row).Data)
	assert.Equal(t, []float64{101, 102, 103, 204, 205, 206}, Add(a, col).Data)
	assert.Equal(t, []float64{-1, 0, 1, 2, 3, 4}, Sub(a, one).Data)
	assert.Equal(t, []float64{10, 40, 90, 40, 100, 180}, Mul(a, row).Data)
	assert.Equal(t, []float64{0.5, 1, 1.5, 2, 2.5, 3}, Div(a, one).Data)
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, Sub(a, a).Data)

	// b repeats with period 2 along dim 0 (ne0=4, b.ne0=2).
	c := FromData([]float64{1, 1, 1, 1}, 4)
	assert.Equal(t, []float64{2, 3, 2, 3}, Add(c, FromData([]float64{1, 2}, 2)).Data)

	assert.Panics(t, func() { Add(a, FromData([]float64{1, 2}, 2)) }, "3 % 2 != 0")
	assert.Panics(t, func() { Add(row, a) }, "b larger than a")
	assert.True(t, CanRepeat(row, a))
	assert.False(t, CanRepeat(a, row))
}

func TestScalarOps(t *testing.T) {
	a := FromData([]float64{-1, 0, 2}, 3)
	assert.Equal(t, []float64{1.5, 2.5, 4.5}, Add1(a, 2.5).Data)
	assert.Equal(t, []float64{3, 0, -6}, Scale(a, -3).Data)
	assert.Equal(t, []float64{-1, 1, 5}, ScaleBias(a, 2, 1).Data)
}

func TestUnaryKnownValues(t *testing.T) {
	x := FromData([]float64{-2, 0.5, 3}, 3)
	assert.Equal(t, []float64{4, 0.25, 9}, Sqr(x).Data)
	assert.Equal(t, []float64{2, -0.5, -3}, Neg(x).Data)
	assert.Equal(t, []float64{2, 0.5, 3}, Abs(x).Data)
	assert.Equal(t, []float64{-1, 1, 1}, Sgn(x).Data)
	assert.Equal(t, []float64{0, 1, 1}, Step(x).Data)
	assert.Equal(t, []float64{0, 0.5, 3}, Relu(x).Data)

	near(t, []float64{2, 3}, Sqrt(FromData([]float64{4, 9}, 2)).Data, 1e-15)
	assert.True(t, math.IsNaN(Sqrt(FromData([]float64{-1}, 1)).Data[0]))
	near(t, []float64{1, 0}, Log(FromData([]float64{math.E, 1}, 2)).Data, 1e-15)
	assert.True(t, isNegInf(Log(New(1)).Data[0]))
	near(t, []float64{1, math.E}, Exp(FromData([]float64{0, 1}, 2)).Data, 1e-15)
	near(t, []float64{0, math.E - 1}, Expm1(FromData([]float64{0, 1}, 2)).Data, 1e-15)
	near(t, []float64{0, 1}, Sin(FromData([]float64{0, math.Pi / 2}, 2)).Data, 1e-15)
	near(t, []float64{1, 0}, Cos(FromData([]float64{0, math.Pi / 2}, 2)).Data, 1e-15)

	c := Clamp(FromData([]float64{-2, 0.5, 3, math.NaN()}, 4), -1, 1)
	assert.Equal(t, []float64{-1, 0.5, 1, 1}, c.Data, "NaN becomes max as with C's MIN/MAX macros")
}

func TestActivationsKnownValues(t *testing.T) {
	one := FromData([]float64{1}, 1)
	cases := []struct {
		name string
		f    func(Tensor) Tensor
		want float64
	}{
		{"Tanh", Tanh, 0.7615941559557649},
		{"Sigmoid", Sigmoid, 0.7310585786300049},
		{"Silu", Silu, 0.7310585786300049},
		{"Softplus", Softplus, 1.3132616875182228},
		{"Elu", Elu, 1},
		{"GeluTanh", GeluTanh, 0.8411919906082768},
		{"GeluErf", GeluErf, 0.8413447460685429},
		{"GeluQuick", GeluQuick, 0.8457957659328212},
		{"Hardsigmoid", Hardsigmoid, 2.0 / 3},
		{"Hardswish", Hardswish, 2.0 / 3},
	}
	for _, c := range cases {
		// ggml's float32 constants (0.044715f, 1.702f, ...) shift results by ~1e-8.
		assert.InDelta(t, c.want, c.f(one).Data[0], 1e-7, c.name)
	}

	x := FromData([]float64{-1, 0, 2, 25, -3}, 5)
	near(t, []float64{-0.2689414213699951, 0, 1.7615941559557649, 25 / (1 + math.Exp(-25)), -0.14227761953270035}, Silu(x).Data, 1e-12)
	near(t, []float64{0.5, 0.11920292202211755}, Sigmoid(FromData([]float64{0, -2}, 2)).Data, 1e-15)
	near(t, []float64{math.Ln2, 25, 0.04858735157374206}, Softplus(FromData([]float64{0, 25, -3}, 3)).Data, 1e-12)
	near(t, []float64{math.Expm1(-1), 0, 2}, Elu(FromData([]float64{-1, 0, 2}, 3)).Data, 1e-15)
	near(t, []float64{0, 0, 0.5, 1, 1}, Hardsigmoid(FromData([]float64{-4, -3, 0, 3, 9}, 5)).Data, 1e-15)
	// Odd/even structure: gelu(x) - gelu(-x) = x for every GELU variant.
	for _, f := range []func(Tensor) Tensor{GeluTanh, GeluErf, GeluQuick} {
		y := Rand(newRNG(20), -5, 5, 50)
		d := Sub(f(y), f(Neg(y)))
		near(t, y.Data, d.Data, 1e-12)
	}
}

func TestGeluCPUModels(t *testing.T) {
	x := Rand(newRNG(21), -12, 12, 2000)
	exact := GeluTanh(x)
	cpu := GeluTanhCPU(x)
	for i, v := range x.Data {
		y := cpu.Data[i]
		switch {
		case v <= -10:
			assert.Equal(t, 0.0, y)
		case v >= 10:
			assert.Equal(t, v, y)
		default:
			assert.Equal(t, RoundF16(y), y, "table output is an fp16 value")
			// f16 input rounding (2^-11 relative, gelu' <= 1.13) plus f16 output rounding.
			assert.InDelta(t, exact.Data[i], y, 1.2e-3*math.Abs(v)+1e-3*math.Abs(exact.Data[i])+1e-7, "x=%v", v)
		}
	}
	q := GeluQuickCPU(x)
	qe := GeluQuick(x)
	for i := range x.Data {
		assert.Equal(t, RoundF16(q.Data[i]), q.Data[i])
		assert.InDelta(t, qe.Data[i], q.Data[i], 1.5e-3*math.Abs(x.Data[i])+1e-7)
	}
	// The table is coarse: for x = 1.0003, f16(x) = 1, so the CPU value is f16(gelu(1)).
	assert.Equal(t, RoundF16(0.8411919906082768), GeluTanhCPU(FromData([]float64{1.0003}, 1)).Data[0])
}

func TestGLU(t *testing.T) {
	g := FromData([]float64{1, -1}, 2)
	u := FromData([]float64{2, 3}, 2)
	near(t, []float64{1.4621171572600098, -0.8068242641099853}, SwigluSplit(g, u).Data, 1e-12)
	near(t, []float64{2 * 0.8411919906082768, 3 * (0.8411919906082768 - 1)}, GegluSplit(g, u).Data, 1e-7)
	near(t, []float64{2 * 0.8413447460685429, 3 * (0.8413447460685429 - 1)}, GegluErfSplit(g, u).Data, 1e-7)
	near(t, []float64{2 * 0.8457957659328212, 3 * (0.8457957659328212 - 1)}, GegluQuickSplit(g, u).Data, 1e-7)
	near(t, []float64{2, 0}, ReluSplit(g, u).Data, 0)
	assert.Panics(t, func() { SwigluSplit(g, New(3)) })

	// Fused form: each row [g | u].
	rng := newRNG(22)
	gg := Rand(rng, -3, 3, 4, 3)
	uu := Rand(rng, -3, 3, 4, 3)
	fused := Concat(gg, uu, 0) // [8, 3]
	nearT(t, SwigluSplit(gg, uu), Swiglu(fused, false), 0)
	nearT(t, SwigluSplit(uu, gg), Swiglu(fused, true), 0)
	nearT(t, GegluSplit(gg, uu), Geglu(fused, false), 0)
	nearT(t, GegluSplitCPU(gg, uu), Mul(GeluTanhCPU(gg), uu), 0)
}

func TestSiluBackIsDerivative(t *testing.T) {
	x := Rand(newRNG(23), -4, 4, 7)
	dy := Rand(newRNG(24), -1, 1, 7)
	got := SiluBack(dy, x)
	f := func(v []float64) float64 { return dot(Silu(FromData(v, 7)).Data, dy.Data) }
	num := NumericGrad(f, append([]float64(nil), x.Data...), 1e-5)
	require.Less(t, MaxRelErr(num, got.Data, 1e-6), 1e-7)
}
