#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_claims.h"
#include "toy_cpu.h"
#include "toy_vec.h"

/*
 * The attention of one query per sequence (a generation step) over the key/value cache, the
 * query heads of one key/value head together: the scores of LANES cells at once (their dot
 * products summed together, vsums), the softmax, and the values' weighted sum LANES channels at
 * once. ggml's
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

/* The most query heads (of one key/value head) one pass attends together. */
enum { MAX_GROUP = 4 };

/*
 * scores writes to p[i] the dot products of query q[i] (hdk floats), for i < R, with the keys of
 * kvLen cells at kb (cell c's hdk f16 values at kb + c·ks), LANES cells at a time, four cells'
 * dot products side by side (each a chain of dependent FMAs), their sums taken together
 * (vsums); p[i] holds kvLen rounded up to LANES, the cells past kvLen zero. The R queries of a
 * pass share each key's loads and conversions; each query's arithmetic is the same whatever R.
 */
static inline __attribute__((always_inline)) void scores(const float * const * q, const int R, int64_t hdk, const char * kb,
		size_t ks, int64_t kvLen, float * const * p) {
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	const int64_t qn = hdk / LANES;
	for (int64_t c0 = 0; c0 < cells; c0 += LANES) {
		vec acc[MAX_GROUP][LANES];
		for (int i = 0; i < LANES; i += 4) {
			const int64_t c = c0 + i;
			const int64_t n = kvLen - c < 4 ? (kvLen - c > 0 ? kvLen - c : 0) : 4;
			const uint16_t * k0 = (const uint16_t *) (kb + (n > 0 ? c : 0) * ks);
			const uint16_t * k1 = (const uint16_t *) (kb + (n > 1 ? c + 1 : 0) * ks);
			const uint16_t * k2 = (const uint16_t *) (kb + (n > 2 ? c + 2 : 0) * ks);
			const uint16_t * k3 = (const uint16_t *) (kb + (n > 3 ? c + 3 : 0) * ks);
			vec a[MAX_GROUP][4];
			for (int r = 0; r < R; r++) {
				for (int x = 0; x < 4; x++) {
					a[r][x] = VZERO();
				}
			}
			for (int64_t j = 0; j < qn; j++) {
				const vec kv0 = VLOADH(k0 + j * LANES), kv1 = VLOADH(k1 + j * LANES);
				const vec kv2 = VLOADH(k2 + j * LANES), kv3 = VLOADH(k3 + j * LANES);
				for (int r = 0; r < R; r++) {
					const vec qj = VLOAD(q[r] + j * LANES);
					a[r][0] = VFMA(kv0, qj, a[r][0]);
					a[r][1] = VFMA(kv1, qj, a[r][1]);
					a[r][2] = VFMA(kv2, qj, a[r][2]);
					a[r][3] = VFMA(kv3, qj, a[r][3]);
				}
			}
			/* A cell past kvLen read cell 0 instead; it scores nothing. */
			for (int r = 0; r < R; r++) {
				acc[r][i] = n > 0 ? a[r][0] : VZERO();
				acc[r][i + 1] = n > 1 ? a[r][1] : VZERO();
				acc[r][i + 2] = n > 2 ? a[r][2] : VZERO();
				acc[r][i + 3] = n > 3 ? a[r][3] : VZERO();
			}
		}
		for (int r = 0; r < R; r++) {
			vsums(acc[r], p[r] + c0);
		}
	}
}

/*
 * softmax scales the scores p of kvLen cells, adds the mask's row of sequence s and turns them
 * into exponentials relative to their largest (p holds kvLen rounded up to LANES; the cells
 * past kvLen become 0), and returns the reciprocal of their sum; 0 when the mask hides every
 * cell, with p all zeros.
 */
static float softmax(float * p, int64_t kvLen, float scale, const struct ggml_tensor * mask, int64_t s) {
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	/* The mask, and the largest score, a vector at a time (the cells past kvLen are -inf). */
	const char * mrow = (const char *) mask->data + s * mask->nb[1];
	const int64_t kv = kvLen - kvLen % LANES;
	vec mxv = VSET(-INFINITY);
	const vec sc = VSET(scale);
	for (int64_t c = 0; c < kv; c += LANES) {
		const vec m = mask->type == GGML_TYPE_F16 ? VLOADH((const uint16_t *) mrow + c) : VLOAD((const float *) mrow + c);
		const vec x = VADD(VMUL(VLOAD(p + c), sc), m);
		VSTORE(p + c, x);
		mxv = VMAX(mxv, x);
	}
	float mx = VREDUCE_MAX(mxv);
	for (int64_t c = kv; c < cells; c++) {
		p[c] = c < kvLen ? p[c] * scale + mask_at(mask, c, s) : -INFINITY;
		mx = p[c] > mx ? p[c] : mx;
	}
	if (mx == -INFINITY) { /* every cell masked: nothing to attend (ggml would give NaN) */
		for (int64_t c = 0; c < cells; c++) {
			p[c] = 0;
		}
		return 0;
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
	return 1.0f / sums[0];
}

/*
 * values writes to out[i] (hdv floats) the values at vb (channel d's kvLen f16 values, one per
 * cell, at vb + d·vs) weighted by p[i] and scaled by inv[i], for the R queries i of a pass:
 * each channel's dot product with the probabilities, LANES channels at a time, the R queries
 * sharing each value's loads and conversions. A query whose mask hides every cell (inv 0)
 * gets zeros.
 */
static inline __attribute__((always_inline)) void values(const char * vb, size_t vs, int64_t hdv, int64_t kvLen,
		float * const * p, const float * inv, const int R, float * const * out) {
	const int64_t kv = kvLen - kvLen % LANES;
	for (int64_t d0 = 0; d0 < hdv; d0 += LANES) {
		vec acc[MAX_GROUP][LANES];
		for (int i = 0; i < LANES; i += 4) {
			const uint16_t * v0 = (const uint16_t *) (vb + (d0 + i) * vs);
			const uint16_t * v1 = (const uint16_t *) (vb + (d0 + i + 1) * vs);
			const uint16_t * v2 = (const uint16_t *) (vb + (d0 + i + 2) * vs);
			const uint16_t * v3 = (const uint16_t *) (vb + (d0 + i + 3) * vs);
			vec a[MAX_GROUP][4];
			for (int r = 0; r < R; r++) {
				for (int x = 0; x < 4; x++) {
					a[r][x] = VZERO();
				}
			}
			for (int64_t c = 0; c < kv; c += LANES) {
				const vec w0 = VLOADH(v0 + c), w1 = VLOADH(v1 + c), w2 = VLOADH(v2 + c), w3 = VLOADH(v3 + c);
				for (int r = 0; r < R; r++) {
					const vec pc = VLOAD(p[r] + c);
					a[r][0] = VFMA(w0, pc, a[r][0]);
					a[r][1] = VFMA(w1, pc, a[r][1]);
					a[r][2] = VFMA(w2, pc, a[r][2]);
					a[r][3] = VFMA(w3, pc, a[r][3]);
				}
			}
			for (int r = 0; r < R; r++) {
				for (int x = 0; x < 4; x++) {
					acc[r][i + x] = a[r][x];
				}
			}
		}
		for (int r = 0; r < R; r++) {
			float o[LANES];
			vsums(acc[r], o);
			if (kv < kvLen) { /* the cells past the last whole vector */
				for (int i = 0; i < LANES; i++) {
					const uint16_t * vr = (const uint16_t *) (vb + (d0 + i) * vs);
					for (int64_t c = kv; c < kvLen; c++) {
						o[i] += half_to_float(vr[c]) * p[r][c];
					}
				}
			}
			/* A vector load of the sums (scalar loads of a vector just stored would wait for
			 * it); a query with every cell masked gets zeros, not 0·sums. */
			VSTORE(out[r] + d0, inv[r] == 0 ? VZERO() : VMUL(VLOAD(o), VSET(inv[r])));
		}
	}
}

/*
 * attend computes the outputs out[i] (hdv floats) of R queries q[i] (hdk floats) that share one
 * key/value head over kvLen cells: keys at kb, values at vb (as scores and values read them),
 * the mask's row of sequence s; p[i] is scratch for the scores, kvLen rounded up to LANES.
 */
static inline __attribute__((always_inline)) void attend(const float * const * q, const int R, int64_t hdk, const char * kb,
		size_t ks, const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, const struct ggml_tensor * mask,
		int64_t s, float * const * p, float * const * out) {
	scores(q, R, hdk, kb, ks, kvLen, p);
	float inv[MAX_GROUP];
	for (int r = 0; r < R; r++) {
		inv[r] = softmax(p[r], kvLen, scale, mask, s);
	}
	values(vb, vs, hdv, kvLen, p, inv, R, out);
}

/* ATTEND(R) defines attend_R, attend for R queries: a function of its own, so that gcc
 * allocates the registers of each R alone. */
#define ATTEND(R) \
	static __attribute__((noinline)) void attend_##R(const float * const * q, int64_t hdk, const char * kb, size_t ks, \
			const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, const struct ggml_tensor * mask, int64_t s, \
			float * const * p, float * const * out) { \
		attend(q, R, hdk, kb, ks, vb, vs, hdv, kvLen, scale, mask, s, p, out); \
	}
ATTEND(1)
ATTEND(2)
ATTEND(3)
ATTEND(4)

/*
 * visible_cells is how many of sequence s's kvLen cells a pass reads: up to the last one the
 * mask does not hide, rounded up to whole vectors. A step attends every sequence over the same
 * kvLen (the longest one's, rounded up to a bucket), so a shorter sequence's last cells are
 * masked; their probabilities are 0, so leaving them out changes no output, to the bit (as
 * long as the cells hold finite values, which a cache's never-written cells do too: zeros).
 */
static int64_t visible_cells(const struct ggml_tensor * mask, int64_t s, int64_t kvLen) {
	int64_t n = kvLen;
	while (n > 0 && mask_at(mask, n - 1, s) == -INFINITY) {
		n--;
	}
	n = (n + LANES - 1) / LANES * LANES;
	return n < kvLen ? n : kvLen;
}

typedef void (*attend_fn)(const float * const * q, int64_t hdk, const char * kb, size_t ks, const char * vb, size_t vs,
		int64_t hdv, int64_t kvLen, float scale, const struct ggml_tensor * mask, int64_t s, float * const * p,
		float * const * out);
static const attend_fn attend_fns[MAX_GROUP] = { attend_1, attend_2, attend_3, attend_4 };

/* A sequence and the cells a pass over it reads. */
struct seq_cells {
	int64_t s, cells;
};

/* longer_first orders sequences by the cells they read, most first, then by index. */
static int longer_first(const void * a, const void * b) {
	const struct seq_cells * x = a, * y = b;
	if (x->cells != y->cells) {
		return x->cells > y->cells ? -1 : 1;
	}
	return x->s < y->s ? -1 : x->s > y->s;
}

/* Sequences whose order is kept on the stack; more go on the heap. */
enum { STACK_SEQS = 64 };

void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const float scale = userdata != NULL ? *(const float *) userdata : 1.0f;
	const struct ggml_tensor * q = dst->src[0];
	const struct ggml_tensor * k = dst->src[1];
	const struct ggml_tensor * v = dst->src[2];
	const struct ggml_tensor * mask = dst->src[3];
	const int64_t hdk = q->ne[0], H = q->ne[1], S = q->ne[2];
	const int64_t kvLen = k->ne[1], Hkv = k->ne[2], hdv = v->ne[1];
	const int64_t group = H / Hkv;
	/* Jobs are (sequence, run of up to MAX_GROUP query heads of one key/value head), where
	 * there are enough of them for every thread: the heads of a run share their keys' and
	 * values' loads. Otherwise (sequence, head) pairs, so that one sequence's few key/value
	 * heads keep the threads equally busy. The outputs are the same either way, to the bit. */
	const int64_t runs = (group + MAX_GROUP - 1) / MAX_GROUP;
	const int64_t per_run = S * Hkv * runs >= 2 * (int64_t) nth ? (group + runs - 1) / runs : 1;
	const int64_t runs_per_head = (group + per_run - 1) / per_run;
	const int64_t jobs = S * Hkv * runs_per_head;
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	/* A job costs about its sequence's cells, which differ between the sequences of a server's
	 * step by as much as their lengths. The threads claim the jobs from a counter, the longest
	 * sequences' first, so that the last jobs, which leave a thread waiting at the barrier for
	 * the others, are the shortest (dealt out in turn, a thread could take the long sequences
	 * and the other wait for it). */
	struct seq_cells order_stack[STACK_SEQS];
	float stack[STACK_CELLS] __attribute__((aligned(64)));
	struct seq_cells * order = S <= STACK_SEQS ? order_stack : (struct seq_cells *) malloc((size_t) S * sizeof(*order));
	float * scratch = per_run * cells <= STACK_CELLS ? stack : (float *) malloc((size_t) (per_run * cells) * sizeof(float));
	if (order == NULL || scratch == NULL) {
		fprintf(stderr, "toy_attend_one: out of memory for %lld sequences of %lld cells\n", (long long) S, (long long) kvLen);
		abort();
	}
	for (int64_t s = 0; s < S; s++) {
		order[s] = (struct seq_cells) { s, visible_cells(mask, s, kvLen) };
	}
	qsort(order, (size_t) S, sizeof(*order), longer_first);
	for (int64_t next = 0;; next++) {
		const int64_t job = nth > 1 ? toy_claim(dst) : next;
		if (job >= jobs) {
			break;
		}
		const int64_t run = job % runs_per_head, g = job / runs_per_head % Hkv;
		const struct seq_cells seq = order[job / (runs_per_head * Hkv)];
		const int64_t s = seq.s, h0 = g * group + run * per_run;
		const int64_t R = h0 + per_run <= (g + 1) * group ? per_run : (g + 1) * group - h0;
		const float * qr[MAX_GROUP];
		float * out[MAX_GROUP];
		float * p[MAX_GROUP];
		for (int64_t r = 0; r < R; r++) {
			qr[r] = (const float *) ((const char *) q->data + (h0 + r) * q->nb[1] + s * q->nb[2]);
			out[r] = (float *) ((char *) dst->data + (h0 + r) * dst->nb[1] + s * dst->nb[2]);
			p[r] = scratch + r * cells;
		}
		const char * kb = (const char *) k->data + g * k->nb[2] + s * k->nb[3];
		const char * vb = (const char *) v->data + g * v->nb[2] + s * v->nb[3];
		attend_fns[R - 1](qr, hdk, kb, k->nb[1], vb, v->nb[1], hdv, seq.cells, scale, mask, s, p, out);
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	if (order != order_stack) {
		free(order);
	}
	if (scratch != stack) {
		free(scratch);
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
