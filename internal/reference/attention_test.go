package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFlashAttnByHand(t *testing.T) {
	q := FromData([]float64{1}, 1, 1, 1)
	k := FromData([]float64{0, 1}, 1, 2, 1)
	v := FromData([]float64{10, 20}, 1, 2, 1)
	got := FlashAttnExt(q, k, v, nil, 1, 0, 0)
	assert.Equal(t, [4]int{1, 1, 1, 1}, got.Ne)
	w := math.E / (1 + math.E)
	assert.InDelta(t, 10*(1-w)+20*w, got.Data[0], 1e-14)

	// Softcap: s = c*tanh(s/c) with s = scale*q·k.
	got = FlashAttnExt(q, k, v, nil, 3, 0, 0.5)
	s1 := 0.5 * math.Tanh(3/0.5)
	w = math.Exp(s1) / (1 + math.Exp(s1))
	assert.InDelta(t, 10*(1-w)+20*w, got.Data[0], 1e-14)

	// Masked key is skipped; a fully masked query gives 0, not NaN.
	inf := math.Inf(-1)
	m := FromData([]float64{inf, 0}, 2, 1)
	assert.InDelta(t, 20, FlashAttnExt(q, k, v, &m, 1, 0, 0).Data[0], 1e-14)
	full := FromData([]float64{inf, inf}, 2, 1)
	assert.Equal(t, 0.0, FlashAttnExt(q, k, v, &full, 1, 0, 0).Data[0])
}

// attnComposite is the unfused attention built from other reference ops:
// softmax(scale * K^T Q + mask) then V, permuted to FlashAttnExt's layout.
func attnComposite(q, k, v Tensor, mask *Tensor, scale, maxBias float64) Tensor {
	kq := MulMat(k, q)                        // [nkv, nq, H]
	p := SoftMaxExt(kq, mask, scale, maxBias) // [nkv, nq, H]
	o := MulMat(Transpose(v), p)              // [dv, nq, H]
	return Permute(o, 0, 2, 1, 3)             // [dv, H, nq]
}

func TestFlashAttnMatchesComposite(t *testing.T) {
	rng := newRNG(80)
	const dk, dv, nq, nkv, H, Hkv = 8, 6, 5, 7, 4, 2
	q := Rand(rng, -1, 1, dk, nq, H)
	k := Rand(rng, -1, 1, dk, nkv, Hkv)
	v := Rand(rng, -1, 1, dv, nkv, Hkv)
	mask := CausalMask(nkv, nq, nkv-nq)
	scale := 1 / math.Sqrt(dk)

	got := FlashAttnExt(q, k, v, &mask, scale, 0, 0)
	assert.Equal(t, [4]int{dv, H, nq, 1}, got.Ne)
	nearT(t, attnComposite(q, k, v, &mask, scale, 0), got, 1e-14)
	nearT(t, attnComposite(q, k, v, nil, scale, 0), FlashAttnExt(q, k, v, nil, scale, 0, 0), 1e-14)

	// ALiBi.
	bias := Rand(rng, -2, 0, nkv, nq)
	nearT(t, attnComposite(q, k, v, &bias, scale, 8), FlashAttnExt(q, k, v, &bias, scale, 8, 0), 1e-14)

	// GQA explicitly: head h reads kv head h/2.
	for h := 0; h < H; h++ {
		qh := FromData(append([]float64(nil), slice2(q, h, 0).Data...), dk, nq, 1)
		one := FlashAttnExt(qh, slice2(k, h/2, 0), slice2(v, h/2, 0), &mask, scale, 0, 0)
		for i := 0; i < nq; i++ {
			near(t, one.Row(0, i, 0), got.Row(h, i, 0), 1e-15)
		}
	}

	// Batch dim 3.
	q4 := Rand(rng, -1, 1, dk, nq, H, 2)
	k4 := Rand(rng, -1, 1, dk, nkv, Hkv, 2)
	v4 := Rand(rng, -1, 1, dv, nkv, Hkv, 2)
	got4 := FlashAttnExt(q4, k4, v4, &mask, scale, 0, 0)
	assert.Equal(t, [4]int{dv, H, nq, 2}, got4.Ne)
	for b := 0; b < 2; b++ {
		qb := FromData(append([]float64(nil), q4.Data[b*dk*nq*H:(b+1)*dk*nq*H]...), dk, nq, H)
		kb := FromData(append([]float64(nil), k4.Data[b*dk*nkv*Hkv:(b+1)*dk*nkv*Hkv]...), dk, nkv, Hkv)
		vb := FromData(append([]float64(nil), v4.Data[b*dv*nkv*Hkv:(b+1)*dv*nkv*Hkv]...), dv, nkv, Hkv)
		want := FlashAttnExt(qb, kb, vb, &mask, scale, 0, 0)
		near(t, want.Data, got4.Data[b*dv*H*nq:(b+1)*dv*H*nq], 0)
	}

	assert.Panics(t, func() { FlashAttnExt(q, Rand(rng, 0, 1, dk, nkv, 3), v, nil, 1, 0, 0) }, "4 % 3 heads")
	assert.Panics(t, func() { FlashAttnExt(q, k, Rand(rng, 0, 1, dv, nkv+1, Hkv), nil, 1, 0, 0) })
}

func TestFlashAttnSinks(t *testing.T) {
	q := FromData([]float64{1}, 1, 1, 1)
	k := FromData([]float64{0, 1}, 1, 2, 1)
	v := FromData([]float64{10, 20}, 1, 2, 1)
	got := FlashAttnExtSinks(q, k, v, nil, []float64{2}, 1, 0, 0)
	d := 1 + math.E + math.Exp(2)
	assert.InDelta(t, (10+20*math.E)/d, got.Data[0], 1e-14)
}
