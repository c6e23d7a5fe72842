#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_vec.h"

/*
 * The attention of one query per sequence (a generation step) over the key/value cache, one
 * (sequence, head) at a time: the scores of LANES cells at once (their dot products summed
 * together, vsums), the softmax, and the values' weighted sum LANES channels at once. ggml's
 * unfused attention for the same step is five operations (two products, the softmax, a
 * permutation and its copy) that call a dot product per cell and per channel, and round the
 * queries and the probabilities to f16; this kernel keeps both in f32.
 */

/* Scores of at most this many cells are kept on the stack, more on the heap. */
enum { STACK_CELLS = 4096 };

static inline float mask_at(const struct ggml_tensor * mask, int64_t c, int64_t s) {
	const char * row = (const char *) mask->data + s * mask->nb[1];
	return mask->type == GGML_TYPE_F16 ? half_to_float(((const uint16_t *) row)[c]) : ((const float *) row)[c];
}

#if TOY_VECTOR

/*
 * attend_head computes the output of one query q (hdk floats) over kvLen cells: keys at kb
 * (cell c's hdk f16 values at kb + c·ks), values at vb (channel d's kvLen f16 values, one per
 * cell, at vb + d·vs), the mask's row (added to the scores) of sequence s; p is scratch for
 * the scores, kvLen rounded up to LANES. out gets hdv floats.
 */
static void attend_head(const float * q, int64_t hdk, const char * kb, size_t ks, const char * vb, size_t vs, int64_t hdv,
		int64_t kvLen, const struct ggml_tensor * mask, int64_t s, float * p, float * out) {
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	vec qv[64];
	const int64_t qn = hdk / LANES;
	for (int64_t i = 0; i < qn; i++) {
		qv[i] = VLOAD(q + i * LANES);
	}
	/* Scores, LANES cells at a time, four cells' dot products side by side (each a chain of
	 * dependent FMAs); the cells past kvLen score nothing (zero vectors). */
	for (int64_t c0 = 0; c0 < cells; c0 += LANES) {
		vec acc[LANES];
		for (int i = 0; i < LANES; i += 4) {
			const int64_t c = c0 + i;
			const int64_t n = kvLen - c < 4 ? (kvLen - c > 0 ? kvLen - c : 0) : 4;
			const uint16_t * k0 = (const uint16_t *) (kb + (n > 0 ? c : 0) * ks);
			const uint16_t * k1 = (const uint16_t *) (kb + (n > 1 ? c + 1 : 0) * ks);
			const uint16_t * k2 = (const uint16_t *) (kb + (n > 2 ? c + 2 : 0) * ks);
			const uint16_t * k3 = (const uint16_t *) (kb + (n > 3 ? c + 3 : 0) * ks);
			vec a0 = VZERO(), a1 = VZERO(), a2 = VZERO(), a3 = VZERO();
			for (int64_t j = 0; j < qn; j++) {
				const vec qj = qv[j];
				a0 = VFMA(VLOADH(k0 + j * LANES), qj, a0);
				a1 = VFMA(VLOADH(k1 + j * LANES), qj, a1);
				a2 = VFMA(VLOADH(k2 + j * LANES), qj, a2);
				a3 = VFMA(VLOADH(k3 + j * LANES), qj, a3);
			}
			/* A cell past kvLen read cell 0 instead; it scores nothing. */
			acc[i] = n > 0 ? a0 : VZERO();
			acc[i + 1] = n > 1 ? a1 : VZERO();
			acc[i + 2] = n > 2 ? a2 : VZERO();
			acc[i + 3] = n > 3 ? a3 : VZERO();
		}
		vsums(acc, p + c0);
	}
	/* The mask, and the largest score, a vector at a time (the cells past kvLen are -inf). */
	const char * mrow = (const char *) mask->data + s * mask->nb[1];
	const int64_t kv = kvLen - kvLen % LANES;
	vec mxv = VSET(-INFINITY);
	for (int64_t c = 0; c < kv; c += LANES) {
		const vec m = mask->type == GGML_TYPE_F16 ? VLOADH((const uint16_t *) mrow + c) : VLOAD((const float *) mrow + c);
		const vec x = VADD(VLOAD(p + c), m);
		VSTORE(p + c, x);
		mxv = VMAX(mxv, x);
	}
	float mx = VREDUCE_MAX(mxv);
	for (int64_t c = kv; c < cells; c++) {
		p[c] = c < kvLen ? p[c] + mask_at(mask, c, s) : -INFINITY;
		mx = p[c] > mx ? p[c] : mx;
	}
	if (mx == -INFINITY) { /* every cell masked: nothing to attend (ggml would give NaN) */
		for (int64_t d = 0; d < hdv; d++) {
			out[d] = 0;
		}
		return;
	}
	vec sum = VZERO();
	const vec neg = VSET(-mx);
	for (int64_t c = 0; c < cells; c += LANES) {
		const vec e = vexp(VADD(VLOAD(p + c), neg));
		VSTORE(p + c, e);
		sum = VADD(sum, e);
	}
	float sums[LANES];
	{
		vec v[LANES];
		v[0] = sum;
		for (int i = 1; i < LANES; i++) {
			v[i] = VZERO();
		}
		vsums(v, sums);
	}
	const float inv = 1.0f / sums[0];
	/* Values: each channel's dot product with the probabilities, LANES channels at a time. */
	for (int64_t d0 = 0; d0 < hdv; d0 += LANES) {
		vec acc[LANES];
		for (int i = 0; i < LANES; i += 4) {
			const uint16_t * v0 = (const uint16_t *) (vb + (d0 + i) * vs);
			const uint16_t * v1 = (const uint16_t *) (vb + (d0 + i + 1) * vs);
			const uint16_t * v2 = (const uint16_t *) (vb + (d0 + i + 2) * vs);
			const uint16_t * v3 = (const uint16_t *) (vb + (d0 + i + 3) * vs);
			vec a0 = VZERO(), a1 = VZERO(), a2 = VZERO(), a3 = VZERO();
			for (int64_t c = 0; c < kv; c += LANES) {
				const vec pc = VLOAD(p + c);
				a0 = VFMA(VLOADH(v0 + c), pc, a0);
				a1 = VFMA(VLOADH(v1 + c), pc, a1);
				a2 = VFMA(VLOADH(v2 + c), pc, a2);
				a3 = VFMA(VLOADH(v3 + c), pc, a3);
			}
			acc[i] = a0;
			acc[i + 1] = a1;
			acc[i + 2] = a2;
			acc[i + 3] = a3;
		}
		float o[LANES];
		vsums(acc, o);
		if (kv < kvLen) { /* the cells past the last whole vector */
			for (int i = 0; i < LANES; i++) {
				const uint16_t * vr = (const uint16_t *) (vb + (d0 + i) * vs);
				for (int64_t c = kv; c < kvLen; c++) {
					o[i] += half_to_float(vr[c]) * p[c];
				}
			}
		}
		/* A vector load of the sums (scalar loads of a vector just stored would wait for it). */
		VSTORE(out + d0, VMUL(VLOAD(o), VSET(inv)));
	}
}

void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * q = dst->src[0];
	const struct ggml_tensor * k = dst->src[1];
	const struct ggml_tensor * v = dst->src[2];
	const struct ggml_tensor * mask = dst->src[3];
	const int64_t hdk = q->ne[0], H = q->ne[1], S = q->ne[2];
	const int64_t kvLen = k->ne[1], Hkv = k->ne[2], hdv = v->ne[1];
	const int64_t group = H / Hkv;
	float stack[STACK_CELLS] __attribute__((aligned(64)));
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	float * p = cells <= STACK_CELLS ? stack : (float *) malloc((size_t) cells * sizeof(float));
	if (p == NULL) {
		fprintf(stderr, "toy_attend_one: out of memory for the scores of %lld cells\n", (long long) kvLen);
		abort();
	}
	/* Jobs are (sequence, head) pairs, dealt out to the threads in turn. */
	for (int64_t job = ith; job < H * S; job += nth) {
		const int64_t h = job % H, s = job / H, g = h / group;
		const float * qr = (const float *) ((const char *) q->data + h * q->nb[1] + s * q->nb[2]);
		const char * kb = (const char *) k->data + g * k->nb[2] + s * k->nb[3];
		const char * vb = (const char *) v->data + g * v->nb[2] + s * v->nb[3];
		float * out = (float *) ((char *) dst->data + h * dst->nb[1] + s * dst->nb[2]);
		attend_head(qr, hdk, kb, k->nb[1], vb, v->nb[1], hdv, kvLen, mask, s, p, out);
	}
	if (p != stack) {
		free(p);
	}
}

#else

/* No vector unit this file knows: the Go layer asks toy_vectorized and leaves the
 * attention to ggml, so this is never called. */
void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
	fprintf(stderr, "toy_attend_one: built without a vector unit\n");
	abort();
}

#endif
