package reference

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConcat(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4}, 2, 2)
	b := FromData([]float64{5, 6}, 1, 2)
	c := Concat(a, b, 0)
	assert.Equal(t, [4]int{3, 2, 1, 1}, c.Ne)
	assert.Equal(t, []float64{1, 2, 5, 3, 4, 6}, c.Data)

	d := Concat(a, FromData([]float64{7, 8}, 2, 1), 1)
	assert.Equal(t, [4]int{2, 3, 1, 1}, d.Ne)
	assert.Equal(t, []float64{1, 2, 3, 4, 7, 8}, d.Data)

	e := Concat(a, a, 2)
	assert.Equal(t, [4]int{2, 2, 2, 1}, e.Ne)
	assert.Equal(t, []float64{1, 2, 3, 4, 1, 2, 3, 4}, e.Data)

	assert.Panics(t, func() { Concat(a, b, 1) }, "ne0 differs")
	assert.Panics(t, func() { Concat(a, a, 4) })
}

func TestGetRows(t *testing.T) {
	a := FromData([]float64{0, 1, 10, 11, 20, 21}, 2, 3)
	got := GetRows(a, []int32{2, 0, 2})
	assert.Equal(t, [4]int{2, 3, 1, 1}, got.Ne)
	assert.Equal(t, []float64{20, 21, 0, 1, 20, 21}, got.Data)
	assert.Panics(t, func() { GetRows(a, []int32{3}) })

	// Batched: a [2, 3, 2], rows [2, 2]: batch j picks from a's slice j.
	ab := FromData([]float64{0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121}, 2, 3, 2)
	gb := GetRows(ab, []int32{1, 2, 0, 0}, 2, 2)
	assert.Equal(t, [4]int{2, 2, 2, 1}, gb.Ne)
	assert.Equal(t, []float64{10, 11, 20, 21, 100, 101, 100, 101}, gb.Data)
	assert.Panics(t, func() { GetRows(ab, []int32{1, 2}, 2, 1) }, "a.ne2 != b.ne1")

	// GetRowsBack is the adjoint of GetRows (repeated indices accumulate).
	rng := newRNG(40)
	x := Rand(rng, -1, 1, 3, 5)
	rows := []int32{4, 0, 4, 2}
	y := Rand(rng, -1, 1, 3, 4)
	assert.InDelta(t, dot(GetRows(x, rows).Data, y.Data), dot(x.Data, GetRowsBack(y, rows, 5).Data), 1e-12)
	gr := GetRowsBack(FromData([]float64{1, 2, 3, 4}, 1, 4), []int32{1, 0, 1, 1}, 3)
	assert.Equal(t, []float64{2, 8, 0}, gr.Data)
}

func TestTransposeAndPermute(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	tr := Transpose(a)
	assert.Equal(t, [4]int{2, 3, 1, 1}, tr.Ne)
	assert.Equal(t, []float64{1, 4, 2, 5, 3, 6}, tr.Data)
	assert.Equal(t, a, Transpose(tr))

	// b[i0,i1,i2] = 100*i0 + 10*i1 + i2 with ne = [2, 3, 4].
	b := New(2, 3, 4)
	for i2 := 0; i2 < 4; i2++ {
		for i1 := 0; i1 < 3; i1++ {
			for i0 := 0; i0 < 2; i0++ {
				b.Set(float64(100*i0+10*i1+i2), i0, i1, i2)
			}
		}
	}
	// ggml_permute(b, 1, 2, 0, 3): source dim 0 → result dim 1, 1 → 2, 2 → 0.
	p := Permute(b, 1, 2, 0, 3)
	assert.Equal(t, [4]int{4, 2, 3, 1}, p.Ne)
	assert.Equal(t, 123.0, p.At(3, 1, 2)) // = b[1, 2, 3]
	assert.Equal(t, 12.0, p.At(2, 0, 1))  // = b[0, 1, 2]
	assert.Equal(t, []float64{0, 1, 2, 3}, p.Row(0, 0, 0))

	// ggml_permute(b, 0, 2, 1, 3) swaps dims 1 and 2.
	q := Permute(b, 0, 2, 1, 3)
	assert.Equal(t, [4]int{2, 4, 3, 1}, q.Ne)
	assert.Equal(t, 113.0, q.At(1, 3, 1))

	// Inverse permutation restores the tensor.
	assert.Equal(t, b, Permute(p, 2, 0, 1, 3))
	assert.Equal(t, b, Permute(b, 0, 1, 2, 3))
	assert.Panics(t, func() { Permute(b, 0, 0, 1, 2) })

	c := Cont(b)
	c.Data[0] = -1
	assert.Equal(t, 0.0, b.Data[0])
}
