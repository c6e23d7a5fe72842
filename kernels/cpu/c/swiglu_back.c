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
// toy:kernel swiglu_back

/*
 * The backward of SwiGLU, h = silu(g)·u, in one pass: from h's gradient dh, dg = dh·u·σ(g)·(1 +
 * g·(1 − σ(g))) and du = dh·g·σ(g), σ the logistic function. ggml's autodiff takes four
 * operations for it (two products, a scalar SILU_BACK and SILU) over the feed-forward's widest
 * activations. dst is [n, rows, 2]: dg, then du.
 */

/* sigmoid_scalar is σ(x) without overflow. */
static inline float sigmoid_scalar(float x) {
	if (x >= 0) {
		return 1.0f / (1.0f + expf(-x));
	}
	const float e = expf(x);
	return e / (1.0f + e);
}

void toy_swiglu_back(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * g = dst->src[0];
	const struct ggml_tensor * u = dst->src[1];
	const struct ggml_tensor * dh = dst->src[2];
	const int64_t n = g->ne[0], rows = g->ne[1];
	int64_t r0, r1;
	toy_row_share(rows, ith, nth, &r0, &r1);
	for (int64_t r = r0; r < r1; r++) {
		const float * gr = (const float *) ((const char *) g->data + r * g->nb[1]);
		const float * ur = (const float *) ((const char *) u->data + r * u->nb[1]);
		const float * hr = (const float *) ((const char *) dh->data + r * dh->nb[1]);
		float * dg = (float *) ((char *) dst->data + r * dst->nb[1]);
		float * du = (float *) ((char *) dst->data + r * dst->nb[1] + dst->nb[2]);
		int64_t i = 0;
#if TOY_VECTOR
		const vec one = VSET(1.0f);
		for (; i + LANES <= n; i += LANES) {
			const vec x = VLOAD(gr + i), d = VLOAD(hr + i);
			/* σ(x) from e = e^−|x| ≤ 1: 1/(1 + e) for x ≥ 0, e/(1 + e) below. */
			const vec e = vexp(VMIN(x, VNEG(x)));
			const vec t = VDIV(one, VADD(one, e));
			const vec s = VSELECT_GE0(x, t, VMUL(e, t));
			VSTORE(dg + i, VMUL(VMUL(d, VLOAD(ur + i)), VMUL(s, VFMA(x, VSUB(one, s), one))));
			VSTORE(du + i, VMUL(d, VMUL(x, s)));
		}
#endif
		for (; i < n; i++) {
			const float x = gr[i], s = sigmoid_scalar(x);
			dg[i] = hr[i] * ur[i] * (s * (1.0f + x * (1.0f - s)));
			du[i] = hr[i] * (x * s);
		}
	}
}
