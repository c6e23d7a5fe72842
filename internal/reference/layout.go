package reference

// Concat is ggml_concat(a, b, dim): a and b agree in every extent except dim,
// and the result has ne[dim] = a.ne[dim] + b.ne[dim], holding a first, then b.
func Concat(a, b Tensor, dim int) Tensor {
	a.check("Concat")
	b.check("Concat")
	assertf(dim >= 0 && dim < MaxDims, "Concat", "dim %d out of range", dim)
	ne := a.Ne
	for d := 0; d < MaxDims; d++ {
		if d == dim {
			ne[d] = a.Ne[d] + b.Ne[d]
			continue
		}
		assertf(a.Ne[d] == b.Ne[d], "Concat", "a %v and b %v differ in dim %d", a.Ne, b.Ne, d)
	}
	out := New(ne[:]...)
	var o [MaxDims]int
	o[dim] = a.Ne[dim]
	for i3 := 0; i3 < ne[3]; i3++ {
		for i2 := 0; i2 < ne[2]; i2++ {
			for i1 := 0; i1 < ne[1]; i1++ {
				for i0 := 0; i0 < ne[0]; i0++ {
					var v float64
					if i0 < a.Ne[0] && i1 < a.Ne[1] && i2 < a.Ne[2] && i3 < a.Ne[3] {
						v = a.at4(i0, i1, i2, i3)
					} else {
						v = b.at4(i0-o[0], i1-o[1], i2-o[2], i3-o[3])
					}
					out.set4(v, i0, i1, i2, i3)
				}
			}
		}
	}
	return out
}

// GetRows is ggml_get_rows(a, b) with b's I32 data given as rows and its
// extents as rowsNe (at most 3; omitted means the 1-D form [len(rows)]).
//
//   - 2-D form: a [ne0, n], b [r] → [ne0, r]; out row i = a row rows[i].
//   - batched form: a [ne0, n, ne2, ne3], b [r, ne2, ne3] → [ne0, r, ne2, ne3];
//     out[:, i, j, k] = a[:, rows[i + r*(j + ne2*k)], j, k].
//
// ggml requires a.ne2 == b.ne1 and a.ne3 == b.ne2; every index must be in
// [0, a.ne1).
func GetRows(a Tensor, rows []int32, rowsNe ...int) Tensor {
	a.check("GetRows")
	if len(rowsNe) == 0 {
		rowsNe = []int{len(rows)}
	}
	assertf(len(rowsNe) <= 3, "GetRows", "rows tensor must have at most 3 dims, got %v", rowsNe)
	bne := shape("GetRows", rowsNe)
	assertf(len(rows) == nelements(bne), "GetRows", "%d indices for shape %v", len(rows), rowsNe)
	assertf(a.Ne[2] == bne[1] && a.Ne[3] == bne[2], "GetRows", "a %v and rows %v disagree (need a.ne2 == b.ne1, a.ne3 == b.ne2)", a.Ne, bne)
	out := New(a.Ne[0], bne[0], bne[1], bne[2])
	for k := 0; k < bne[2]; k++ {
		for j := 0; j < bne[1]; j++ {
			for i := 0; i < bne[0]; i++ {
				r := int(rows[i+bne[0]*(j+bne[1]*k)])
				assertf(r >= 0 && r < a.Ne[1], "GetRows", "row index %d out of range [0,%d)", r, a.Ne[1])
				copy(out.Row(i, j, k), a.Row(r, j, k))
			}
		}
	}
	return out
}

// GetRowsBack is ggml_get_rows_back(grad, rows, c) for the 2-D form: grad
// [ne0, len(rows)] is scattered into a zero [ne0, n] tensor (n = c.ne1) with
// out row rows[i] += grad row i (repeated indices accumulate).
func GetRowsBack(grad Tensor, rows []int32, n int) Tensor {
	grad.check("GetRowsBack")
	assertf(grad.Ne[2] == 1 && grad.Ne[3] == 1 && grad.Ne[1] == len(rows), "GetRowsBack",
		"grad %v must be [ne0, %d]", grad.Ne, len(rows))
	out := New(grad.Ne[0], n)
	for i, r := range rows {
		assertf(r >= 0 && int(r) < n, "GetRowsBack", "row index %d out of range [0,%d)", r, n)
		dst := out.Row(int(r), 0, 0)
		for i0, v := range grad.Row(i, 0, 0) {
			dst[i0] += v
		}
	}
	return out
}

// Permute is ggml_cont(ggml_permute(a, axis0, axis1, axis2, axis3)). ggml's
// convention: source dimension i moves to result dimension axis_i, i.e.
// result.ne[axis_i] = a.ne[i], and
//
//	out[j0,j1,j2,j3] = a[j[axis0], j[axis1], j[axis2], j[axis3]].
//
// (So ggml_permute(a, 0, 2, 1, 3) swaps dims 1 and 2, and
// ggml_permute(a, 1, 2, 0, 3) maps a [A,B,C] to [C,A,B].) The axes must be a
// permutation of 0..3.
func Permute(a Tensor, axis0, axis1, axis2, axis3 int) Tensor {
	a.check("Permute")
	axes := [MaxDims]int{axis0, axis1, axis2, axis3}
	var seen [MaxDims]bool
	for _, ax := range axes {
		assertf(ax >= 0 && ax < MaxDims && !seen[ax], "Permute", "axes %v are not a permutation of 0..3", axes)
		seen[ax] = true
	}
	var ne [MaxDims]int
	for i, ax := range axes {
		ne[ax] = a.Ne[i]
	}
	out := New(ne[:]...)
	var j [MaxDims]int
	for j[3] = 0; j[3] < ne[3]; j[3]++ {
		for j[2] = 0; j[2] < ne[2]; j[2]++ {
			for j[1] = 0; j[1] < ne[1]; j[1]++ {
				for j[0] = 0; j[0] < ne[0]; j[0]++ {
					out.set4(a.at4(j[axes[0]], j[axes[1]], j[axes[2]], j[axes[3]]), j[0], j[1], j[2], j[3])
				}
			}
		}
	}
	return out
}

// Transpose is ggml_cont(ggml_transpose(a)): dims 0 and 1 swapped,
// [ne0, ne1, ne2, ne3] → [ne1, ne0, ne2, ne3].
func Transpose(a Tensor) Tensor { return Permute(a, 1, 0, 2, 3) }

// Cont is ggml_cont(a). Reference tensors are always contiguous, so it is a
// copy; combine with Permute/Transpose, which already return ggml_cont's
// result of the corresponding view.
func Cont(a Tensor) Tensor {
	a.check("Cont")
	return a.Clone()
}
