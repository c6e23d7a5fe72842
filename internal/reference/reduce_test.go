package reference

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSumAndRows(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	assert.Equal(t, 21.0, Sum(a))
	s := SumRows(a)
	assert.Equal(t, [4]int{1, 2, 1, 1}, s.Ne)
	assert.Equal(t, []float64{6, 15}, s.Data)
	m := Mean(a)
	assert.Equal(t, [4]int{1, 2, 1, 1}, m.Ne)
	assert.Equal(t, []float64{2, 5}, m.Data)

	b := Rand(newRNG(30), -1, 1, 4, 3, 2, 2)
	sb := SumRows(b)
	assert.Equal(t, [4]int{1, 3, 2, 2}, sb.Ne)
	assert.InDelta(t, Sum(b), Sum(sb), 1e-13)
	assert.InDelta(t, b.At(0, 2, 1, 1)+b.At(1, 2, 1, 1)+b.At(2, 2, 1, 1)+b.At(3, 2, 1, 1), sb.At(0, 2, 1, 1), 1e-15)
}

func TestArgmax(t *testing.T) {
	a := FromData([]float64{1, 3, 2, 5, 1, 5, -1, -2, -3}, 3, 3)
	// Ties go to the last maximal element, like ggml_vec_argmax_f32.
	assert.Equal(t, []int32{1, 2, 0}, Argmax(a))
	assert.Panics(t, func() { Argmax(New(3, 2, 2)) })
}

func TestArgsort(t *testing.T) {
	a := FromData([]float64{3, 1, 2, -1, 5, 0}, 3, 2)
	assert.Equal(t, []int32{1, 2, 0, 0, 2, 1}, Argsort(a, SortAsc))
	assert.Equal(t, []int32{0, 2, 1, 1, 2, 0}, Argsort(a, SortDesc))

	b := Rand(newRNG(31), -1, 1, 17, 4)
	idx := Argsort(b, SortDesc)
	for r := 0; r < 4; r++ {
		row := b.Row(r, 0, 0)
		seen := map[int32]bool{}
		for i := 0; i < 17; i++ {
			seen[idx[r*17+i]] = true
			if i > 0 {
				assert.GreaterOrEqual(t, row[idx[r*17+i-1]], row[idx[r*17+i]])
			}
		}
		assert.Len(t, seen, 17, "a permutation")
	}
}

func TestRepeat(t *testing.T) {
	a := FromData([]float64{1, 2}, 2)
	got := Repeat(a, 4, 2)
	assert.Equal(t, [4]int{4, 2, 1, 1}, got.Ne)
	assert.Equal(t, []float64{1, 2, 1, 2, 1, 2, 1, 2}, got.Data)

	col := FromData([]float64{1, 2}, 1, 2)
	assert.Equal(t, []float64{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}, Repeat(col, 3, 2, 2).Data)
	assert.Panics(t, func() { Repeat(a, 3) })

	// RepeatBack is the adjoint of Repeat: <Repeat(x), y> == <x, RepeatBack(y)>.
	rng := newRNG(32)
	x := Rand(rng, -1, 1, 2, 1, 3)
	y := Rand(rng, -1, 1, 4, 3, 6, 2)
	assert.InDelta(t, dot(Repeat(x, 4, 3, 6, 2).Data, y.Data), dot(x.Data, RepeatBack(y, 2, 1, 3).Data), 1e-12)
	rb := RepeatBack(FromData([]float64{1, 2, 3, 4}, 4), 2)
	assert.Equal(t, []float64{4, 6}, rb.Data)
}
