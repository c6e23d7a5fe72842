package reference

import "math"

// FlashAttnExt is ggml_flash_attn_ext(q, k, v, mask, scale, maxBias, softcap)
// on the CPU:
//
//	q    [dk, nq, H, B]
//	k    [dk, nkv, Hkv, B]      H % Hkv == 0; head h reads kv head h / (H/Hkv)
//	v    [dv, nkv, Hv, B]       (not transposed); H % Hv == 0, likewise
//	mask [>= nkv, >= nq, m2, m3] or nil; H % m2 == 0, B % m3 == 0
//	out  [dv, H, nq, B]         note the permuted layout: out[:, h, i, b]
//
// For query i of head h (batch b) and key j:
//
//	s_j = scale * q·k_j
//	s_j = softcap * tanh(s_j / softcap)               if softcap != 0
//	s_j += slope_h * mask[j, i, h % m2, b % m3]        slope_h = AlibiSlope(h, H, maxBias)
//	out = Σ_j exp(s_j - M) v_j / Σ_j exp(s_j - M),    M = max_j s_j
//
// Keys whose mask term is -Inf are skipped; if every key is skipped the output
// row is 0 (not NaN as in SoftMaxExt). On the CPU, q is first rounded to k's
// vec_dot type (fp16 for an F16 k) and ggml requires an F16 mask: model
// those by rounding (Map(RoundF16)) the inputs before calling. With an F16 v
// the CPU also accumulates the weighted sum of values in an fp16 buffer, so
// expect absolute errors of a few 1e-4 for O(1) outputs (F32 k and v agree to
// float32 rounding).
func FlashAttnExt(q, k, v Tensor, mask *Tensor, scale, maxBias, softcap float64) Tensor {
	return FlashAttnExtSinks(q, k, v, mask, nil, scale, maxBias, softcap)
}

// FlashAttnExtSinks is FlashAttnExt with ggml_flash_attn_ext_add_sinks(sinks):
// head h gets an extra logit sinks[h] (no value vector) in the softmax
// denominator. nil sinks is plain FlashAttnExt.
func FlashAttnExtSinks(q, k, v Tensor, mask *Tensor, sinks []float64, scale, maxBias, softcap float64) Tensor {
	const fn = "FlashAttnExt"
	q.check(fn)
	k.check(fn)
	v.check(fn)
	dk, nq, nh, nb := q.Ne[0], q.Ne[1], q.Ne[2], q.Ne[3]
	nkv, dv := k.Ne[1], v.Ne[0]
	assertf(k.Ne[0] == dk, fn, "k.ne0=%d != q.ne0=%d", k.Ne[0], dk)
	assertf(v.Ne[1] == nkv, fn, "v.ne1=%d != k.ne1=%d", v.Ne[1], nkv)
	assertf(k.Ne[3] == nb && v.Ne[3] == nb, fn, "q, k, v must agree in ne3 (%d, %d, %d)", nb, k.Ne[3], v.Ne[3])
	assertf(k.Ne[2] > 0 && v.Ne[2] > 0 && nh%k.Ne[2] == 0 && nh%v.Ne[2] == 0, fn,
		"heads %d not a multiple of kv heads (k %d, v %d)", nh, k.Ne[2], v.Ne[2])
	if mask != nil {
		mask.check(fn)
		assertf(mask.Ne[0] >= nkv && mask.Ne[1] >= nq, fn, "mask %v smaller than [nkv=%d, nq=%d]", mask.Ne, nkv, nq)
		assertf(nh%mask.Ne[2] == 0 && nb%mask.Ne[3] == 0, fn, "mask %v cannot be broadcast over q %v", mask.Ne, q.Ne)
	}
	assertf(maxBias <= 0 || mask != nil, fn, "maxBias > 0 needs a mask")
	assertf(sinks == nil || len(sinks) == nh, fn, "len(sinks)=%d != heads %d", len(sinks), nh)
	rk, rv := nh/k.Ne[2], nh/v.Ne[2]

	out := New(dv, nh, nq, nb)
	s := make([]float64, nkv)
	keep := make([]bool, nkv)
	for b := 0; b < nb; b++ {
		for h := 0; h < nh; h++ {
			slope := AlibiSlope(h, nh, maxBias)
			for i := 0; i < nq; i++ {
				qrow := q.Row(i, h, b)
				var mrow []float64
				if mask != nil {
					mrow = mask.Row(i, h%mask.Ne[2], b%mask.Ne[3])
				}
				maxv := math.Inf(-1)
				for j := 0; j < nkv; j++ {
					mv := 0.0
					if mrow != nil {
						mv = slope * mrow[j]
					}
					keep[j] = mv != math.Inf(-1)
					if !keep[j] {
						continue
					}
					krow := k.Row(j, h/rk, b)
					d := 0.0
					for l := 0; l < dk; l++ {
						d += qrow[l] * krow[l]
					}
					d *= scale
					if softcap != 0 {
						d = softcap * math.Tanh(d/softcap)
					}
					s[j] = d + mv
					maxv = cmax(maxv, s[j])
				}
				if sinks != nil {
					maxv = cmax(maxv, sinks[h])
				}
				orow := out.Row(h, i, b)
				sum := 0.0
				for j := 0; j < nkv; j++ {
					if !keep[j] {
						continue
					}
					w := math.Exp(s[j] - maxv)
					sum += w
					for l, x := range v.Row(j, h/rv, b) {
						orow[l] += w * x
					}
				}
				if sinks != nil {
					sum += math.Exp(sinks[h] - maxv)
				}
				if sum == 0 {
					continue // fully masked: ggml writes zeros
				}
				for l := range orow {
					orow[l] /= sum
				}
			}
		}
	}
	return out
}
