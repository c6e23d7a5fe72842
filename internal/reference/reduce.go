package reference

import (
	"math"
	"sort"
)

// Sum is ggml_sum(a): the sum of all elements (ggml returns a 1-element tensor).
func Sum(a Tensor) float64 {
	a.check("Sum")
	s := 0.0
	for _, v := range a.Data {
		s += v
	}
	return s
}

// SumRows is ggml_sum_rows(a): [ne0, ne1, ne2, ne3] → [1, ne1, ne2, ne3], each
// row replaced by its sum.
func SumRows(a Tensor) Tensor {
	a.check("SumRows")
	out := New(1, a.Ne[1], a.Ne[2], a.Ne[3])
	for r := range out.Data {
		s := 0.0
		for _, v := range a.Data[r*a.Ne[0] : (r+1)*a.Ne[0]] {
			s += v
		}
		out.Data[r] = s
	}
	return out
}

// Mean is ggml_mean(a): [ne0, ne1, ne2, ne3] → [1, ne1, ne2, ne3], each row
// replaced by its mean (row sum / ne0).
func Mean(a Tensor) Tensor {
	out := SumRows(a)
	for i := range out.Data {
		out.Data[i] /= float64(a.Ne[0])
	}
	return out
}

// Argmax is ggml_argmax(a) for a matrix a [ne0, ne1] (ne2 == ne3 == 1): the
// I32 result [ne1] holds, per row, the index of the maximum. Ties go to the
// LAST maximal element, as in the CPU kernel (ggml_vec_argmax_f32 updates the
// index whenever x[i] equals the running max); NaNs reset the running max as
// C's MAX macro does. (Other backends may break ties differently: use distinct
// values in tests.)
func Argmax(a Tensor) []int32 {
	a.check("Argmax")
	assertf(a.Ne[2] == 1 && a.Ne[3] == 1, "Argmax", "a must be a matrix, got %v", a.Ne)
	out := make([]int32, a.Ne[1])
	for r := range out {
		maxv, idx := math.Inf(-1), 0
		for i, v := range a.Row(r, 0, 0) {
			maxv = cmax(maxv, v)
			if maxv == v {
				idx = i
			}
		}
		out[r] = int32(idx)
	}
	return out
}

// SortOrder is ggml_sort_order.
type SortOrder int

// ggml_sort_order values.
const (
	SortAsc  SortOrder = 0 // GGML_SORT_ORDER_ASC
	SortDesc SortOrder = 1 // GGML_SORT_ORDER_DESC
)

// Argsort is ggml_argsort(a, order): an I32 tensor of a's shape whose every
// row holds the permutation of 0..ne0-1 that sorts that row of a. Ties keep
// index order here (a stable sort); ggml's CPU kernel uses std::sort, which
// does not guarantee any order among equal values, so tests should use
// distinct values. Returned in storage order (row r at [r*ne0, (r+1)*ne0)).
func Argsort(a Tensor, order SortOrder) []int32 {
	a.check("Argsort")
	assertf(order == SortAsc || order == SortDesc, "Argsort", "invalid order %d", order)
	n := a.Ne[0]
	out := make([]int32, a.Len())
	for r := 0; r < a.NRows(); r++ {
		row := a.Data[r*n : (r+1)*n]
		idx := out[r*n : (r+1)*n]
		for i := range idx {
			idx[i] = int32(i)
		}
		sort.SliceStable(idx, func(x, y int) bool {
			if order == SortAsc {
				return row[idx[x]] < row[idx[y]]
			}
			return row[idx[x]] > row[idx[y]]
		})
	}
	return out
}

// Repeat is ggml_repeat(a, b) / ggml_repeat_4d(a, ne...): the result has
// extents ne (b's shape) and element i is a[i0 % a.ne0, i1 % a.ne1, ...].
// Every extent of ne must be a multiple of a's (ggml_can_repeat).
func Repeat(a Tensor, ne ...int) Tensor {
	a.check("Repeat")
	out := New(ne...)
	assertf(CanRepeat(a, out), "Repeat", "a %v cannot be repeated to %v", a.Ne, out.Ne)
	for i3 := 0; i3 < out.Ne[3]; i3++ {
		for i2 := 0; i2 < out.Ne[2]; i2++ {
			for i1 := 0; i1 < out.Ne[1]; i1++ {
				src := a.Row(i1%a.Ne[1], i2%a.Ne[2], i3%a.Ne[3])
				dst := out.Row(i1, i2, i3)
				for i0 := range dst {
					dst[i0] = src[i0%a.Ne[0]]
				}
			}
		}
	}
	return out
}

// RepeatBack is ggml_repeat_back(a, b) with b's extents given as ne: the
// adjoint of Repeat. Every extent of a must be a multiple of ne's; the result
// [ne] sums all elements of a that Repeat would have copied from it.
func RepeatBack(a Tensor, ne ...int) Tensor {
	a.check("RepeatBack")
	out := New(ne...)
	assertf(CanRepeat(out, a), "RepeatBack", "%v cannot be repeated to a %v", out.Ne, a.Ne)
	for i3 := 0; i3 < a.Ne[3]; i3++ {
		for i2 := 0; i2 < a.Ne[2]; i2++ {
			for i1 := 0; i1 < a.Ne[1]; i1++ {
				src := a.Row(i1, i2, i3)
				dst := out.Row(i1%out.Ne[1], i2%out.Ne[2], i3%out.Ne[3])
				for i0, v := range src {
					dst[i0%out.Ne[0]] += v
				}
			}
		}
	}
	return out
}
