package reference

// MulMat is ggml_mul_mat(a, b): a [k, m, a2, a3], b [k, n, b2, b3] → [m, n, b2, b3]
// with
//
//	out[i, j, i2, i3] = Σ_l a[l, i, i2/(b2/a2), i3/(b3/a3)] * b[l, j, i2, i3]
//
// i.e. each row of a is dotted with each row of b (out = a^T·b in column
// terms, or b·a^T in row-major terms). a is broadcast over dims 2 and 3:
// ggml_can_mul_mat requires a.ne0 == b.ne0, b2 % a2 == 0 and b3 % a3 == 0, and
// the CPU kernel maps b's index i2 to a's index i2/(b2/a2) (division, not
// modulo, so consecutive b heads share one a head as in GQA).
//
// On the CPU an F16/BF16/quantized a converts b to a's vec_dot type first
// (F16 for F16 a, Q8_0/Q8_K for most quantized a); model that by rounding b
// (e.g. b.Map(RoundF16)) before calling MulMat.
func MulMat(a, b Tensor) Tensor {
	a.check("MulMat")
	b.check("MulMat")
	assertf(a.Ne[0] == b.Ne[0], "MulMat", "a.ne0=%d != b.ne0=%d", a.Ne[0], b.Ne[0])
	assertf(a.Ne[2] > 0 && a.Ne[3] > 0 && b.Ne[2]%a.Ne[2] == 0 && b.Ne[3]%a.Ne[3] == 0,
		"MulMat", "a %v cannot be broadcast to b %v", a.Ne, b.Ne)
	k, m, n := a.Ne[0], a.Ne[1], b.Ne[1]
	r2, r3 := b.Ne[2]/a.Ne[2], b.Ne[3]/a.Ne[3]
	out := New(m, n, b.Ne[2], b.Ne[3])
	for i3 := 0; i3 < b.Ne[3]; i3++ {
		for i2 := 0; i2 < b.Ne[2]; i2++ {
			for j := 0; j < n; j++ {
				brow := b.Row(j, i2, i3)
				for i := 0; i < m; i++ {
					arow := a.Row(i, i2/r2, i3/r3)
					s := 0.0
					for l := 0; l < k; l++ {
						s += arow[l] * brow[l]
					}
					out.set4(s, i, j, i2, i3)
				}
			}
		}
	}
	return out
}

// MulMatID is ggml_mul_mat_id(as, b, ids), the mixture-of-experts matmul:
//
//	as  [k, m, nExpert]            (one matrix per expert, as.ne3 == 1)
//	b   [k, nb1, nTokens]          (nb1 == nUsed, or a divisor of it, e.g. 1)
//	ids [nUsed, nTokens] int32     (expert chosen for slot e of token t)
//	out [m, nUsed, nTokens]
//
// with out[:, e, t] = as[:, :, ids[e, t]] · b[:, e % nb1, t], each output
// element being the dot product of a row of that expert's matrix with the b
// row. ids is given in storage order (ids[e + nUsed*t]).
func MulMatID(as, b Tensor, ids []int32, nUsed, nTokens int) Tensor {
	as.check("MulMatID")
	b.check("MulMatID")
	assertf(as.Ne[3] == 1, "MulMatID", "as must be 3-D, got %v", as.Ne)
	assertf(b.Ne[3] == 1, "MulMatID", "b must be 3-D, got %v", b.Ne)
	assertf(len(ids) == nUsed*nTokens, "MulMatID", "len(ids)=%d != nUsed*nTokens=%d", len(ids), nUsed*nTokens)
	assertf(nTokens == b.Ne[2], "MulMatID", "ids.ne1=%d != b.ne2=%d", nTokens, b.Ne[2])
	assertf(as.Ne[0] == b.Ne[0], "MulMatID", "as.ne0=%d != b.ne0=%d", as.Ne[0], b.Ne[0])
	assertf(b.Ne[1] > 0 && nUsed%b.Ne[1] == 0, "MulMatID", "ids.ne0=%d not a multiple of b.ne1=%d", nUsed, b.Ne[1])
	k, m := as.Ne[0], as.Ne[1]
	out := New(m, nUsed, nTokens)
	for t := 0; t < nTokens; t++ {
		for e := 0; e < nUsed; e++ {
			x := int(ids[e+nUsed*t])
			assertf(x >= 0 && x < as.Ne[2], "MulMatID", "ids[%d,%d]=%d out of range [0,%d)", e, t, x, as.Ne[2])
			brow := b.Row(e%b.Ne[1], t, 0)
			for i := 0; i < m; i++ {
				arow := as.Row(i, x, 0)
				s := 0.0
				for l := 0; l < k; l++ {
					s += arow[l] * brow[l]
				}
				out.set4(s, i, e, t, 0)
			}
		}
	}
	return out
}

// OutProd is ggml_out_prod(a, b): a [m, k, a2, a3], b [n, k, b2, b3] → [m, n, b2, b3]
// with
//
//	out[i, j, i2, i3] = Σ_l a[i, l, i2/(b2/a2), i3/(b3/a3)] * b[j, l, i2, i3]
//
// (a sum of outer products of the columns; it is the gradient kernel of
// MulMat). ggml_can_out_prod requires a.ne1 == b.ne1, b2 % a2 == 0 and
// b3 % a3 == 0; a is broadcast over dims 2 and 3 by division as in MulMat.
func OutProd(a, b Tensor) Tensor {
	a.check("OutProd")
	b.check("OutProd")
	assertf(a.Ne[1] == b.Ne[1], "OutProd", "a.ne1=%d != b.ne1=%d", a.Ne[1], b.Ne[1])
	assertf(a.Ne[2] > 0 && a.Ne[3] > 0 && b.Ne[2]%a.Ne[2] == 0 && b.Ne[3]%a.Ne[3] == 0,
		"OutProd", "a %v cannot be broadcast to b %v", a.Ne, b.Ne)
	m, k, n := a.Ne[0], a.Ne[1], b.Ne[0]
	r2, r3 := b.Ne[2]/a.Ne[2], b.Ne[3]/a.Ne[3]
	out := New(m, n, b.Ne[2], b.Ne[3])
	for i3 := 0; i3 < b.Ne[3]; i3++ {
		for i2 := 0; i2 < b.Ne[2]; i2++ {
			for j := 0; j < n; j++ {
				for i := 0; i < m; i++ {
					s := 0.0
					for l := 0; l < k; l++ {
						s += a.at4(i, l, i2/r2, i3/r3) * b.at4(j, l, i2, i3)
					}
					out.set4(s, i, j, i2, i3)
				}
			}
		}
	}
	return out
}
