#include <math.h>
#include <stdint.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_rows.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel rms_norm_mul

/*
 * RMS normalisation times a learned scale, w ⊙ x / √(mean(x²) + eps), of each row: ggml's
 * RMS_NORM and the MUL after it in one operation. ggml's kernel sums a row's squares one
 * after the other in double, a chain of dependent additions (about 2,300 cycles for a row of
 * 576), then copies and scales the row, and the multiplication is a node of its own, with a
 * barrier of the threads between them. Here the squares go into eight double sums side by
 * side, and one pass scales and multiplies. Every float operation is ggml's (each square
 * rounded to float before it is added in double, the mean rounded to float, 1/√(mean + eps),
 * the row times that, then times the scale), so the results are ggml's to the bit unless the
 * other order of the double additions moves the mean across a float rounding boundary.
 */

void toy_rms_norm_mul(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct ggml_tensor * x = dst->src[0];
	const struct ggml_tensor * w = dst->src[1];
	const float eps = *(const float *) userdata;
	const int64_t n = x->ne[0];
	const float * wr = (const float *) w->data;
	int64_t first, last;
	toy_row_share(toy_rows(x), ith, nth, &first, &last);
	for (int64_t r = first; r < last; r++) {
		const float * xr = (const float *) toy_row_at(x, r);
		float * yr = (float *) toy_row_at(dst, r);
		double s[8] = { 0 };
		int64_t i = 0;
		for (; i + 8 <= n; i += 8) {
			for (int j = 0; j < 8; j++) {
				s[j] += (double) (xr[i + j] * xr[i + j]);
			}
		}
		for (; i < n; i++) {
			s[0] += (double) (xr[i] * xr[i]);
		}
		const double sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
		const float mean = (float) (sum / (double) n);
		const float scale = 1.0f / sqrtf(mean + eps);
		for (int64_t k = 0; k < n; k++) {
			yr[k] = xr[k] * scale * wr[k];
		}
	}
}
