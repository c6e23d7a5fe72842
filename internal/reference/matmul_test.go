package reference

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMulMatByHand(t *testing.T) {
	// a: two rows of length k=3; b: three rows of length 3.
	a := FromData([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	b := FromData([]float64{1, 0, -1, 2, 1, 0, 0, 1, 1}, 3, 3)
	got := MulMat(a, b)
	// out[i, j] = a_i · b_j, stored [m=2, n=3].
	want := FromData([]float64{-2, -2, 4, 13, 5, 11}, 2, 3)
	nearT(t, want, got, 1e-15)
}

func TestMulMatIsTransposeSymmetric(t *testing.T) {
	rng := newRNG(10)
	a := Rand(rng, -1, 1, 5, 3)
	b := Rand(rng, -1, 1, 5, 4)
	ab := MulMat(a, b) // [3, 4]
	ba := MulMat(b, a) // [4, 3]
	nearT(t, ab, Transpose(ba), 1e-14)
}

func TestMulMatBroadcast(t *testing.T) {
	rng := newRNG(11)
	a := Rand(rng, -1, 1, 4, 3, 2, 1) // 2 "kv heads"
	b := Rand(rng, -1, 1, 4, 5, 6, 2) // 6 heads, 2 batches
	got := MulMat(a, b)
	assert.Equal(t, [4]int{3, 5, 6, 2}, got.Ne)
	for i3 := 0; i3 < 2; i3++ {
		for i2 := 0; i2 < 6; i2++ {
			// b head i2 uses a head i2/(6/2) = i2/3 (division, not modulo).
			want := MulMat(slice2(a, i2/3, 0), slice2(b, i2, i3))
			nearT(t, want, slice2(got, i2, i3), 1e-14, "head %d batch %d", i2, i3)
		}
	}
	assert.Panics(t, func() { MulMat(New(4, 3), New(5, 3)) }, "k mismatch")
	assert.Panics(t, func() { MulMat(New(4, 3, 4), New(4, 3, 6)) }, "6 % 4 != 0")
	assert.Panics(t, func() { MulMat(New(4, 3, 2), New(4, 3, 1)) }, "a cannot be larger")
}

func TestMulMatIDByHand(t *testing.T) {
	as := FromData([]float64{
		1, 0, 0, 1, // expert 0: identity
		2, 0, 0, 2, // expert 1: 2*identity
		0, 1, 1, 0, // expert 2: swap
	}, 2, 2, 3)
	b := FromData([]float64{1, 2, 3, 4}, 2, 1, 2) // one row per token, broadcast over slots
	ids := []int32{2, 0, 1, 2}                    // token 0: experts 2, 0; token 1: experts 1, 2
	got := MulMatID(as, b, ids, 2, 2)
	want := FromData([]float64{2, 1, 1, 2, 6, 8, 4, 3}, 2, 2, 2)
	nearT(t, want, got, 0)
}

func TestMulMatIDMatchesMulMat(t *testing.T) {
	rng := newRNG(12)
	const k, m, nExp, nUsed, nTok = 6, 5, 4, 2, 3
	as := Rand(rng, -1, 1, k, m, nExp)
	b := Rand(rng, -1, 1, k, nUsed, nTok)
	ids := []int32{3, 1, 0, 3, 2, 2}
	got := MulMatID(as, b, ids, nUsed, nTok)
	assert.Equal(t, [4]int{m, nUsed, nTok, 1}, got.Ne)
	for tk := 0; tk < nTok; tk++ {
		for e := 0; e < nUsed; e++ {
			x := int(ids[e+nUsed*tk])
			want := MulMat(slice2(as, x, 0), FromData(b.Row(e, tk, 0), k, 1))
			near(t, want.Data, got.Row(e, tk, 0), 1e-14)
		}
	}
	assert.Panics(t, func() { MulMatID(as, b, []int32{0, 1, 2, 3, 4, 5}, nUsed, nTok) }, "expert 4 out of range")
	assert.Panics(t, func() { MulMatID(as, b, ids, 3, 2) }, "shape mismatch")
}

func TestOutProdByHand(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4}, 2, 2)       // columns [1,2] and [3,4]
	b := FromData([]float64{1, 0, 2, 0, 1, 1}, 3, 2) // columns [1,0,2] and [0,1,1]
	got := OutProd(a, b)
	want := FromData([]float64{1, 2, 3, 4, 5, 8}, 2, 3)
	nearT(t, want, got, 0)
}

func TestOutProdIsMulMatOfTransposes(t *testing.T) {
	rng := newRNG(13)
	a := Rand(rng, -1, 1, 3, 7, 2)
	b := Rand(rng, -1, 1, 4, 7, 4)
	got := OutProd(a, b)
	assert.Equal(t, [4]int{3, 4, 4, 1}, got.Ne)
	want := MulMat(Transpose(a), Transpose(b))
	nearT(t, want, got, 1e-14)
	assert.Panics(t, func() { OutProd(New(3, 7), New(4, 6)) })
}
