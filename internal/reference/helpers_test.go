package reference

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// near asserts that got and want agree elementwise to within tol (absolute,
// or relative for values larger than 1).
func near(t *testing.T, want, got []float64, tol float64, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	e, i := WorstRelErr(want, got, 1)
	if e > tol {
		require.Failf(t, "values differ", "worst at %d: want %v, got %v (err %g > %g); want=%v got=%v %v",
			i, want[i], got[i], e, tol, want, got, msgAndArgs)
	}
}

func nearT(t *testing.T, want, got Tensor, tol float64, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.Ne, got.Ne, msgAndArgs...)
	near(t, want.Data, got.Data, tol, msgAndArgs...)
}

// slice2 returns the [ne0, ne1] matrix at (i2, i3) of t as its own tensor.
func slice2(t Tensor, i2, i3 int) Tensor {
	n := t.Ne[0] * t.Ne[1]
	off := n * (i2 + t.Ne[2]*i3)
	return FromData(append([]float64(nil), t.Data[off:off+n]...), t.Ne[0], t.Ne[1])
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func isNegInf(x float64) bool { return math.IsInf(x, -1) }
