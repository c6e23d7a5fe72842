package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNumericGradOfSquares(t *testing.T) {
	x := []float64{-1.5, 0, 2, 3.25}
	orig := append([]float64(nil), x...)
	f := func(v []float64) float64 {
		s := 0.0
		for _, e := range v {
			s += e * e
		}
		return s
	}
	g := NumericGrad(f, x, 1e-4)
	assert.Equal(t, orig, x, "x restored")
	near(t, []float64{-3, 0, 4, 6.5}, g, 1e-9)

	// Central differences are exact for quadratics but not for cubics: error eps^2.
	cube := func(v []float64) float64 { return v[0] * v[0] * v[0] }
	assert.InDelta(t, 12+1e-2, NumericGrad(cube, []float64{2}, 0.1)[0], 1e-12)
	assert.Panics(t, func() { NumericGrad(f, x, 0) })
}

func TestRelErr(t *testing.T) {
	assert.Equal(t, 0.0, RelErr(3, 3, 1e-6))
	assert.InDelta(t, 0.1/1.1, RelErr(1, 1.1, 1e-6), 1e-15)
	assert.InDelta(t, 0.1/1.1, RelErr(-1.1, -1, 1e-6), 1e-15)
	// Below the floor it is an absolute error divided by the floor.
	assert.InDelta(t, 1e-3, RelErr(1e-9, 2e-9, 1e-6), 1e-15)
	assert.Equal(t, 0.0, RelErr(math.NaN(), math.NaN(), 1))
	assert.True(t, math.IsInf(RelErr(math.NaN(), 1, 1), 1))
	assert.True(t, math.IsInf(RelErr(math.Inf(1), 1, 1), 1))
	assert.Equal(t, 0.0, RelErr(math.Inf(-1), math.Inf(-1), 1))

	e, i := WorstRelErr([]float64{1, 2, 3}, []float64{1, 2.2, 3.1}, 1e-6)
	assert.Equal(t, 1, i)
	assert.InDelta(t, 0.2/2.2, e, 1e-15)
	assert.Equal(t, e, MaxRelErr([]float64{1, 2, 3}, []float64{1, 2.2, 3.1}, 1e-6))
	assert.Equal(t, 0.0, MaxRelErr(nil, nil, 1))
	assert.Panics(t, func() { MaxRelErr([]float64{1}, nil, 1) })

	assert.InDelta(t, 0.25, MaxAbsDiff([]float64{1, 2, math.Inf(1)}, []float64{1.25, 2, math.Inf(1)}), 1e-15)
}
