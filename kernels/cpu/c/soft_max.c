#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_rows.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel soft_max

/*
 * softmax(scale·x + mask) of each row, as ggml_soft_max_ext computes it without ALiBi: in two
 * passes over a row held in the core's cache (the scaled and masked row and its largest value,
 * then the exponentials and their sum) and a third that divides. ggml's kernel for the same
 * rows makes six passes, two of them scalar, and spends 4–5 ms on each of training's
 * [512, 512, 9] attention probabilities; a vector of cells that the mask hides entirely (the
 * causal mask's upper half) skips its exponentials here.
 */

#if TOY_VECTOR

/* softmax_row writes softmax(scale·x + m) of the n floats at x to y; m is the mask's row, f16
 * when f16 is set, or NULL. A row the mask hides entirely becomes zeros. A row with a NaN or
 * an infinite score becomes NaN, as ggml's: the vector maximum and exponential would otherwise
 * pass over a NaN (the comparisons are false) and give it a probability of 0, so a model with a
 * NaN weight would train on with a finite loss. A score of -inf is a hidden cell, as in ggml's.
 * The check is the sum of max(-FLT_MAX, x)·0, NaN exactly when some x is NaN or +inf: the
 * vector maximum returns its second operand, x, when either is NaN. Three operations a vector. */
static void softmax_row(const float * x, const void * m, int f16, float scale, int64_t n, float * y) {
	const int64_t nv = n - n % LANES;
	const vec sv = VSET(scale), zero = VZERO(), lowest = VSET(-FLT_MAX);
	vec mxv = VSET(-INFINITY), bad = VZERO();
	for (int64_t i = 0; i < nv; i += LANES) {
		const vec xv = VLOAD(x + i);
		bad = VADD(bad, VMUL(VMAX(lowest, xv), zero));
		vec v = VMUL(xv, sv);
		if (m != NULL) {
			v = VADD(v, f16 ? VLOADH((const uint16_t *) m + i) : VLOAD((const float *) m + i));
		}
		VSTORE(y + i, v);
		mxv = VMAX(mxv, v);
	}
	float mx = VREDUCE_MAX(mxv), bads = VREDUCE_ADD(bad);
	for (int64_t i = nv; i < n; i++) {
		if (x[i] != x[i] || x[i] == INFINITY) {
			bads = NAN;
		}
		float v = x[i] * scale;
		if (m != NULL) {
			v += f16 ? half_to_float(((const uint16_t *) m)[i]) : ((const float *) m)[i];
		}
		y[i] = v;
		mx = v > mx ? v : mx;
	}
	if (bads != bads) {
		for (int64_t i = 0; i < n; i++) {
			y[i] = NAN;
		}
		return;
	}
	if (mx == -INFINITY) {
		for (int64_t i = 0; i < n; i++) {
			y[i] = 0;
		}
		return;
	}
	const vec neg = VSET(-mx), lo = VSET(mx - 87.0f);
	vec sum = VZERO();
	for (int64_t i = 0; i < nv; i += LANES) {
		const vec v = VLOAD(y + i);
		if (VALL_LT(v, lo)) { /* every cell's exponential is 0 (a hidden vector) */
			VSTORE(y + i, VZERO());
			continue;
		}
		const vec e = vexp(VADD(v, neg));
		VSTORE(y + i, e);
		sum = VADD(sum, e);
	}
	float s = VREDUCE_ADD(sum);
	for (int64_t i = nv; i < n; i++) {
		y[i] = expf(y[i] - mx);
		s += y[i];
	}
	const vec inv = VSET(1.0f / s);
	for (int64_t i = 0; i < nv; i += LANES) {
		VSTORE(y + i, VMUL(VLOAD(y + i), inv));
	}
	for (int64_t i = nv; i < n; i++) {
		y[i] *= 1.0f / s;
	}
}

void toy_soft_max(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct ggml_tensor * x = dst->src[0];
	const struct ggml_tensor * mask = dst->src[1];
	const float scale = *(const float *) userdata;
	const int64_t n = x->ne[0], r1 = x->ne[1], r2 = x->ne[2];
	int64_t first, last;
	toy_row_share(toy_rows(x), ith, nth, &first, &last);
	for (int64_t r = first; r < last; r++) {
		const int64_t i1 = r % r1, i2 = r / r1 % r2, i3 = r / (r1 * r2);
		const float * xr = (const float *) toy_row_at(x, r);
		float * yr = (float *) toy_row_at(dst, r);
		const void * mr = NULL;
		if (mask != NULL) {
			mr = (const char *) mask->data + i1 * mask->nb[1] + (i2 % mask->ne[2]) * mask->nb[2] + (i3 % mask->ne[3]) * mask->nb[3];
		}
		softmax_row(xr, mr, mask != NULL && mask->type == GGML_TYPE_F16, scale, n, yr);
	}
}

#else

/* No vector unit this file knows: the Go layer asks toy_vectorized and leaves the softmax to
 * ggml, so this is never called. */
void toy_soft_max(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
	fprintf(stderr, "toy_soft_max: built without a vector unit\n");
	abort();
}

#endif
