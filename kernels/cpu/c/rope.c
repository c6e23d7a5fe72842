#include <math.h>
#include <stdint.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_rows.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel rope_table
// toy:kernel rope_apply

/*
 * RoPE in two operations: a table of each token's cosines and sines, made once a graph for
 * every layer that rotates alike, and the rotation of a layer's queries or keys by it. ggml's
 * ROPE makes the table itself in every node, on every thread and for every token, whichever
 * rows the thread rotates: 32 sines and cosines a token for a head of 64 values, 60 times a
 * step of a 30-layer model. Both follow ggml's arithmetic (ggml_rope_cache_init, rope_yarn
 * without YaRN's extrapolation, rotate_pairs), so the results are its own.
 */

/* The parameters of a table (toy_rope_table's userdata). */
struct rope_params {
	int32_t dims;
	float freq_base, freq_scale, attn_factor;
};

void toy_rope_table(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct ggml_tensor * pos = dst->src[0];
	const struct ggml_tensor * ff = dst->src[1];
	const struct rope_params * p = (const struct rope_params *) userdata;
	const int64_t n = dst->ne[1];
	const float theta_scale = powf(p->freq_base, -2.0f / (float) p->dims);
	const int32_t * at = (const int32_t *) pos->data;
	const float * factors = ff != NULL ? (const float *) ff->data : NULL;
	int64_t first, last;
	toy_row_share(n, ith, nth, &first, &last);
	for (int64_t t = first; t < last; t++) {
		float * cache = (float *) toy_row_at(dst, t);
		float theta = (float) at[t];
		for (int64_t i0 = 0; i0 < p->dims; i0 += 2) {
			const float f = factors != NULL ? factors[i0 / 2] : 1.0f;
			const float interp = p->freq_scale * (theta / f);
			cache[i0] = cosf(interp) * p->attn_factor;
			cache[i0 + 1] = sinf(interp) * p->attn_factor;
			theta *= theta_scale;
		}
	}
}

void toy_rope_apply(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct ggml_tensor * x = dst->src[0];
	const struct ggml_tensor * table = dst->src[1];
	const int32_t neox = *(const int32_t *) userdata;
	const int64_t ne0 = x->ne[0], heads = x->ne[1], dims = table->ne[0];
	const int64_t off = neox ? dims / 2 : 1, scale = neox ? 2 : 1;
	int64_t first, last;
	toy_row_share(toy_rows(x), ith, nth, &first, &last);
	for (int64_t r = first; r < last; r++) {
		const float * src = (const float *) toy_row_at(x, r);
		float * out = (float *) toy_row_at(dst, r);
		const float * cache = (const float *) toy_row_at(table, r / heads % x->ne[2]);
		for (int64_t i0 = 0; i0 < dims; i0 += 2) {
			const int64_t ic = i0 / scale;
			const float cos_theta = cache[i0 + 0];
			const float sin_theta = cache[i0 + 1];
			const float x0 = src[ic];
			const float x1 = src[ic + off];
			out[ic] = x0 * cos_theta - x1 * sin_theta;
			out[ic + off] = x0 * sin_theta + x1 * cos_theta;
		}
		for (int64_t i = dims; i < ne0; i++) {
			out[i] = src[i];
		}
	}
}
