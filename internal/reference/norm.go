package reference

import "math"

// Norm is ggml_norm(a, eps), layer normalization without affine parameters,
// over each row: y = (x - mean) / sqrt(var + eps) with the population
// variance var = mean((x - mean)^2). Shape of a.
func Norm(a Tensor, eps float64) Tensor {
	a.check("Norm")
	assertf(eps >= 0, "Norm", "eps %g < 0", eps)
	n := a.Ne[0]
	out := New(a.Ne[:]...)
	for r := 0; r < a.NRows(); r++ {
		x := a.Data[r*n : (r+1)*n]
		y := out.Data[r*n : (r+1)*n]
		mean := 0.0
		for _, v := range x {
			mean += v
		}
		mean /= float64(n)
		variance := 0.0
		for i, v := range x {
			y[i] = v - mean
			variance += y[i] * y[i]
		}
		variance /= float64(n)
		s := 1 / math.Sqrt(variance+eps)
		for i := range y {
			y[i] *= s
		}
	}
	return out
}

// RMSNorm is ggml_rms_norm(a, eps) over each row: y = x / sqrt(mean(x^2) + eps).
// Shape of a.
func RMSNorm(a Tensor, eps float64) Tensor {
	a.check("RMSNorm")
	assertf(eps >= 0, "RMSNorm", "eps %g < 0", eps)
	n := a.Ne[0]
	out := New(a.Ne[:]...)
	for r := 0; r < a.NRows(); r++ {
		x := a.Data[r*n : (r+1)*n]
		ss := 0.0
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(n)+eps)
		y := out.Data[r*n : (r+1)*n]
		for i, v := range x {
			y[i] = v * s
		}
	}
	return out
}

// RMSNormBack is ggml_rms_norm_back(dz, x, eps): the gradient of
// sum(dz * RMSNorm(x, eps)) with respect to x, row by row:
//
//	dx = r * (dz - x * Σ(x·dz) / (Σx² + n·eps)),  r = 1/sqrt(Σx²/n + eps).
//
// dz and x have the same shape.
func RMSNormBack(dz, x Tensor, eps float64) Tensor {
	dz.check("RMSNormBack")
	x.check("RMSNormBack")
	assertf(SameShape(dz, x), "RMSNormBack", "shapes %v and %v differ", dz.Ne, x.Ne)
	n := x.Ne[0]
	out := New(x.Ne[:]...)
	for r := 0; r < x.NRows(); r++ {
		xr := x.Data[r*n : (r+1)*n]
		dr := dz.Data[r*n : (r+1)*n]
		sxx, sxd := 0.0, 0.0
		for i, v := range xr {
			sxx += v * v
			sxd += v * dr[i]
		}
		rrms := 1 / math.Sqrt(sxx/float64(n)+eps)
		k := sxd / (sxx + eps*float64(n))
		y := out.Data[r*n : (r+1)*n]
		for i, v := range xr {
			y[i] = rrms * (dr[i] - v*k)
		}
	}
	return out
}
