package reference

import "math"

// NumericGrad returns the central-difference gradient of f at x,
// (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) for every i. x is perturbed in
// place and restored exactly before NumericGrad returns.
func NumericGrad(f func([]float64) float64, x []float64, eps float64) []float64 {
	assertf(eps > 0, "NumericGrad", "eps %g <= 0", eps)
	g := make([]float64, len(x))
	for i := range x {
		orig := x[i]
		x[i] = orig + eps
		fp := f(x)
		x[i] = orig - eps
		fm := f(x)
		x[i] = orig
		g[i] = (fp - fm) / (2 * eps)
	}
	return g
}

// RelErr is |a - b| / max(|a|, |b|, floor): a relative error that becomes an
// absolute error scaled by 1/floor when both values are smaller than floor.
// It is 0 when a == b (including equal infinities), and +Inf when exactly one
// of them is NaN or they are different infinities; two NaNs count as equal.
func RelErr(a, b, floor float64) float64 {
	switch {
	case a == b:
		return 0
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0):
		return math.Inf(1)
	}
	den := math.Max(math.Max(math.Abs(a), math.Abs(b)), floor)
	return math.Abs(a-b) / den
}

// MaxRelErr is the largest RelErr(a[i], b[i], floor); 0 for empty slices. It
// panics if the lengths differ.
func MaxRelErr(a, b []float64, floor float64) float64 {
	e, _ := WorstRelErr(a, b, floor)
	return e
}

// WorstRelErr is MaxRelErr that also returns the index of the worst element
// (-1 for empty slices).
func WorstRelErr(a, b []float64, floor float64) (float64, int) {
	assertf(len(a) == len(b), "MaxRelErr", "lengths differ: %d and %d", len(a), len(b))
	worst, at := 0.0, -1
	for i := range a {
		if e := RelErr(a[i], b[i], floor); at < 0 || e > worst {
			worst, at = e, i
		}
	}
	return worst, at
}

// MaxAbsDiff is max |a[i] - b[i]| (NaN if any difference is NaN). It panics
// if the lengths differ.
func MaxAbsDiff(a, b []float64) float64 {
	assertf(len(a) == len(b), "MaxAbsDiff", "lengths differ: %d and %d", len(a), len(b))
	m := 0.0
	for i := range a {
		if a[i] == b[i] {
			continue // also equal infinities
		}
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.NaN()
		}
		m = math.Max(m, d)
	}
	return m
}
