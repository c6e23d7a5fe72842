package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoftMaxKnown(t *testing.T) {
	a := FromData([]float64{1, 2, 3}, 3)
	near(t, []float64{0.09003057317038046, 0.24472847105479764, 0.6652409557748219}, SoftMax(a).Data, 1e-15)
	// Shift invariance and overflow safety.
	big := FromData([]float64{1001, 1002, 1003}, 3)
	near(t, SoftMax(a).Data, SoftMax(big).Data, 1e-15)
	// scale: softmax(2x).
	near(t, SoftMax(Scale(a, 2)).Data, SoftMaxExt(a, nil, 2, 0).Data, 1e-15)
}

func TestSoftMaxRowsSumToOne(t *testing.T) {
	a := Rand(newRNG(60), -10, 10, 13, 4, 3, 2)
	y := SoftMaxExt(a, nil, 0.7, 0)
	for r := 0; r < y.NRows(); r++ {
		s := 0.0
		for _, v := range y.Data[r*13 : (r+1)*13] {
			require.Greater(t, v, 0.0)
			s += v
		}
		assert.InDelta(t, 1, s, 1e-14)
	}
}

func TestSoftMaxMask(t *testing.T) {
	// Causal mask for 3 queries over 3 keys: row i sees keys 0..i.
	mask := CausalMask(3, 3, 0)
	inf := math.Inf(-1)
	assert.Equal(t, []float64{0, inf, inf, 0, 0, inf, 0, 0, 0}, mask.Data)

	a := FromData([]float64{5, 1, 1, 1, 2, 7, 3, 3, 3}, 3, 3)
	y := SoftMaxExt(a, &mask, 1, 0)
	near(t, []float64{1, 0, 0}, y.Row(0, 0, 0), 1e-15)
	near(t, []float64{1 / (1 + math.E), math.E / (1 + math.E), 0}, y.Row(1, 0, 0), 1e-15)
	near(t, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, y.Row(2, 0, 0), 1e-15)

	// The mask may have extra rows and is broadcast over heads (dim 2).
	rng := newRNG(61)
	m := Rand(rng, -2, 0, 5, 6, 1) // 6 >= 4 rows
	x := Rand(rng, -2, 2, 5, 4, 3)
	got := SoftMaxExt(x, &m, 0.5, 0)
	for h := 0; h < 3; h++ {
		for i := 0; i < 4; i++ {
			w := make([]float64, 5)
			for j := range w {
				w[j] = 0.5*x.At(j, i, h) + m.At(j, i)
			}
			want := SoftMax(FromData(w, 5))
			near(t, want.Data, got.Row(i, h, 0), 1e-15)
		}
	}
	short := New(5, 3)
	assert.Panics(t, func() { SoftMaxExt(x, &short, 1, 0) }, "mask with fewer rows than a")
	assert.Panics(t, func() { SoftMaxExt(x, nil, 1, 8) }, "ALiBi needs a mask")

	// A fully masked row is NaN, as in ggml's soft_max.
	full := FromData([]float64{inf, inf}, 2)
	assert.True(t, math.IsNaN(SoftMaxExt(New(2), &full, 1, 0).Data[0]))
}

func TestAlibi(t *testing.T) {
	assert.Equal(t, 1.0, AlibiSlope(3, 8, 0))
	// 8 heads, maxBias 8: slopes 2^-(h+1).
	for h := 0; h < 8; h++ {
		assert.InDelta(t, math.Pow(2, -float64(h+1)), AlibiSlope(h, 8, 8), 1e-15)
	}
	// 6 heads: n = 4, m0 = 2^-2, m1 = 2^-1; heads 4, 5 use odd powers of m1.
	want := []float64{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}
	for h, w := range want {
		assert.InDelta(t, w, AlibiSlope(h, 6, 8), 1e-15, "head %d", h)
	}
	// soft_max_ext with ALiBi adds slope*mask.
	rng := newRNG(62)
	x := Rand(rng, -1, 1, 4, 2, 6)
	m := Rand(rng, -3, 0, 4, 2)
	got := SoftMaxExt(x, &m, 1, 8)
	for h := 0; h < 6; h++ {
		w := make([]float64, 4)
		for j := range w {
			w[j] = x.At(j, 1, h) + want[h]*m.At(j, 1)
		}
		near(t, SoftMax(FromData(w, 4)).Data, got.Row(1, h, 0), 1e-15)
	}
}

func TestSoftMaxSinks(t *testing.T) {
	a := FromData([]float64{0, 0, 1, 2}, 2, 1, 2)
	got := SoftMaxExtSinks(a, nil, []float64{0, math.Log(3)}, 1, 0)
	// head 0: exp(0), exp(0), sink exp(0) → 1/3 each column.
	near(t, []float64{1.0 / 3, 1.0 / 3}, got.Row(0, 0, 0), 1e-15)
	// head 1: e, e^2 and sink 3.
	d := math.E + math.E*math.E + 3
	near(t, []float64{math.E / d, math.E * math.E / d}, got.Row(0, 1, 0), 1e-15)
}

func TestSoftMaxExtBackIsGradient(t *testing.T) {
	rng := newRNG(63)
	x := Rand(rng, -2, 2, 5, 3)
	dy := Rand(rng, -1, 1, 5, 3)
	const scale = 0.8
	y := SoftMaxExt(x, nil, scale, 0)
	got := SoftMaxExtBack(dy, y, scale)
	f := func(v []float64) float64 { return dot(SoftMaxExt(FromData(v, 5, 3), nil, scale, 0).Data, dy.Data) }
	num := NumericGrad(f, append([]float64(nil), x.Data...), 1e-5)
	require.Less(t, MaxRelErr(num, got.Data, 1e-6), 1e-7)
}

func TestDiagMask(t *testing.T) {
	inf := math.Inf(-1)
	a := Rand(newRNG(64), -1, 1, 4, 3, 2)
	m := DiagMaskInf(a, 1)
	for z := 0; z < 2; z++ {
		for j := 0; j < 3; j++ {
			for i := 0; i < 4; i++ {
				if i > 1+j {
					assert.Equal(t, inf, m.At(i, j, z))
				} else {
					assert.Equal(t, a.At(i, j, z), m.At(i, j, z))
				}
			}
		}
	}
	assert.Equal(t, []float64{1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0}, Exp(DiagMaskInf(New(4, 3), 0)).Data)
	z := DiagMaskZero(FromData([]float64{1, 2, 3, 4}, 2, 2), 0)
	assert.Equal(t, []float64{1, 0, 3, 4}, z.Data)
}
