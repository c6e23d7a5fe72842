package reference

import "math"

// AlibiSlope is the ALiBi slope ggml uses for head h of nHead heads
// (ggml_soft_max_ext and ggml_flash_attn_ext): 1 when maxBias == 0, otherwise
// with n = 2^floor(log2(nHead)), m0 = 2^(-maxBias/n), m1 = 2^(-maxBias/2/n):
// m0^(h+1) for h < n, else m1^(2(h-n)+1).
func AlibiSlope(h, nHead int, maxBias float64) float64 {
	if maxBias <= 0 {
		return 1
	}
	nLog2 := 1 << uint(math.Floor(math.Log2(float64(nHead))))
	m0 := math.Pow(2, -maxBias/float64(nLog2))
	m1 := math.Pow(2, -(maxBias/2)/float64(nLog2))
	if h < nLog2 {
		return math.Pow(m0, float64(h+1))
	}
	return math.Pow(m1, float64(2*(h-nLog2)+1))
}

// SoftMax is ggml_soft_max(a): SoftMaxExt(a, nil, 1, 0).
func SoftMax(a Tensor) Tensor { return SoftMaxExt(a, nil, 1, 0) }

// SoftMaxExt is ggml_soft_max_ext(a, mask, scale, maxBias): per row of a,
//
//	w = x*scale + slope*mask_row;  y = exp(w - max w) / Σ exp(w - max w)
//
// where slope = AlibiSlope(i2, a.ne2, maxBias) (1 when maxBias == 0) and head
// i2 is a's dim-2 index. mask may be nil; otherwise mask [a.ne0, m1, m2, m3]
// with m1 >= a.ne1, a.ne2 % m2 == 0, a.ne3 % m3 == 0, and row (i1,i2,i3) of a
// uses mask row (i1, i2 % m2, i3 % m3) (the mask's rows are NOT broadcast over
// dim 1: each row of a has its own mask row, as for a causal mask [nkv, nq]).
// A row that is entirely -Inf gives NaN, as in ggml. maxBias > 0 requires a
// mask, as in ggml. Shape of a.
func SoftMaxExt(a Tensor, mask *Tensor, scale, maxBias float64) Tensor {
	return SoftMaxExtSinks(a, mask, nil, scale, maxBias)
}

// SoftMaxExtSinks is SoftMaxExt followed by ggml_soft_max_add_sinks(sinks):
// head i2 gets an extra logit sinks[i2] that joins the max and the
// denominator but has no output column. nil sinks is plain SoftMaxExt.
func SoftMaxExtSinks(a Tensor, mask *Tensor, sinks []float64, scale, maxBias float64) Tensor {
	a.check("SoftMaxExt")
	if mask != nil {
		mask.check("SoftMaxExt")
		assertf(mask.Ne[0] == a.Ne[0], "SoftMaxExt", "mask.ne0=%d != a.ne0=%d", mask.Ne[0], a.Ne[0])
		assertf(mask.Ne[1] >= a.Ne[1], "SoftMaxExt", "mask.ne1=%d < a.ne1=%d", mask.Ne[1], a.Ne[1])
		assertf(a.Ne[2]%mask.Ne[2] == 0 && a.Ne[3]%mask.Ne[3] == 0, "SoftMaxExt",
			"mask %v cannot be broadcast over a %v in dims 2, 3", mask.Ne, a.Ne)
	}
	assertf(maxBias <= 0 || mask != nil, "SoftMaxExt", "maxBias > 0 needs a mask")
	assertf(sinks == nil || len(sinks) == a.Ne[2], "SoftMaxExt", "len(sinks)=%d != a.ne2=%d", len(sinks), a.Ne[2])
	n := a.Ne[0]
	out := New(a.Ne[:]...)
	w := make([]float64, n)
	for i3 := 0; i3 < a.Ne[3]; i3++ {
		for i2 := 0; i2 < a.Ne[2]; i2++ {
			slope := AlibiSlope(i2, a.Ne[2], maxBias)
			for i1 := 0; i1 < a.Ne[1]; i1++ {
				x := a.Row(i1, i2, i3)
				var m []float64
				if mask != nil {
					m = mask.Row(i1, i2%mask.Ne[2], i3%mask.Ne[3])
				}
				maxv := math.Inf(-1)
				for i, v := range x {
					w[i] = v * scale
					if m != nil {
						w[i] += slope * m[i]
					}
					maxv = cmax(maxv, w[i])
				}
				if sinks != nil {
					maxv = cmax(maxv, sinks[i2])
				}
				y := out.Row(i1, i2, i3)
				sum := 0.0
				for i := range y {
					y[i] = math.Exp(w[i] - maxv)
					sum += y[i]
				}
				if sinks != nil {
					sum += math.Exp(sinks[i2] - maxv)
				}
				for i := range y {
					y[i] /= sum
				}
			}
		}
	}
	return out
}

// SoftMaxExtBack is ggml_soft_max_ext_back(dy, y, scale, maxBias=0): given the
// softmax output y and the output gradient dy (same shape), the gradient with
// respect to the softmax input a, per row: dx = scale * y * (dy - Σ(y·dy)).
// ggml's CPU kernel supports only maxBias == 0, so there is no maxBias here.
func SoftMaxExtBack(dy, y Tensor, scale float64) Tensor {
	dy.check("SoftMaxExtBack")
	y.check("SoftMaxExtBack")
	assertf(SameShape(dy, y), "SoftMaxExtBack", "shapes %v and %v differ", dy.Ne, y.Ne)
	n := y.Ne[0]
	out := New(y.Ne[:]...)
	for r := 0; r < y.NRows(); r++ {
		yr, dr := y.Data[r*n:(r+1)*n], dy.Data[r*n:(r+1)*n]
		dot := 0.0
		for i := range yr {
			dot += yr[i] * dr[i]
		}
		o := out.Data[r*n : (r+1)*n]
		for i := range o {
			o[i] = scale * yr[i] * (dr[i] - dot)
		}
	}
	return out
}

func diagMask(fn string, a Tensor, nPast int, value float64) Tensor {
	a.check(fn)
	assertf(nPast >= 0, fn, "nPast %d < 0", nPast)
	out := a.Clone()
	nc, nr := a.Ne[0], a.Ne[1]
	for z := 0; z < a.Ne[2]*a.Ne[3]; z++ {
		for j := 0; j < nr; j++ {
			for i := nPast; i < nc; i++ {
				if i > nPast+j {
					out.Data[i+nc*(j+nr*z)] = value
				}
			}
		}
	}
	return out
}

// DiagMaskInf is ggml_diag_mask_inf(a, nPast): every element (i0, i1, ...)
// with i0 > nPast + i1 becomes -Inf (a causal mask in which row i1 may see
// columns 0..nPast+i1), in every ne0×ne1 slice. Shape of a.
func DiagMaskInf(a Tensor, nPast int) Tensor {
	return diagMask("DiagMaskInf", a, nPast, math.Inf(-1))
}

// DiagMaskZero is ggml_diag_mask_zero(a, nPast): like DiagMaskInf but the
// masked elements become 0.
func DiagMaskZero(a Tensor, nPast int) Tensor { return diagMask("DiagMaskZero", a, nPast, 0) }

// CausalMask returns the additive mask [nKV, nQ] that lets query row q see key
// columns 0..nPast+q: 0 there, -Inf elsewhere. It is DiagMaskInf of a zero
// tensor, the usual mask for SoftMaxExt and FlashAttnExt.
func CausalMask(nKV, nQ, nPast int) Tensor { return DiagMaskInf(New(nKV, nQ), nPast) }
