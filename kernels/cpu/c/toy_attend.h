#ifndef TOY_ATTEND_H
#define TOY_ATTEND_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_claims.h"
#include "toy_cpu.h"
#include "toy_vec.h"

// The attention of one query per sequence, shared by the modules that define its kernels: the
// common attend.c (toy_attend_one, toy_attend_blocks, toy_attend_merge) and the gemma family's
// gemma/attend.c (the same with soft-capped logits). attend_jobs(dst, ith, nth, scale, cap,
// blocked) is a kernel's body: cap 0 leaves the logits uncapped; attend_merge joins blocks.

/*
 * The attention of one query per sequence (a generation step) over the key/value cache, the
 * query heads of one key/value head together: the scores of LANES cells at once (their dot
 * products summed together, vsums), the softmax, and the values' weighted sum LANES channels at
 * once, from a value cache stored transposed or a cell at a time (flash attention's). ggml's
 * unfused attention for the same step is five operations (two products, the softmax, a
 * permutation and its copy) that call a dot product per cell and per channel, and round the
 * queries and the probabilities to f16; this kernel keeps both in f32.
 */

/* Scores of at most this many cells are kept on the stack, more on the heap. */
enum { STACK_CELLS = 4096 };

/*
 * The cells of a block: toy_attend_blocks attends a sequence's cells a block at a time, each
 * block a job of its own, and toy_attend_merge joins the blocks' results. A multiple of every
 * LANES, so that blocks start on whole vectors; a sequence's blocks depend on its own cells
 * alone, not on the other sequences of the step nor on the threads, and so do its outputs.
 */
enum { BLOCK_CELLS = 1024 };

/* A row of the mask, from the first cell a pass reads: f32 or f16 values. */
struct mask_row {
	const char * data;
	int f16;
};

/* mask_row_of is sequence s's row of mask from cell c0 (the mask's elements are contiguous). */
static inline struct mask_row mask_row_of(const struct ggml_tensor * mask, int64_t s, int64_t c0) {
	return (struct mask_row) { (const char *) mask->data + s * mask->nb[1] + c0 * mask->nb[0], mask->type == GGML_TYPE_F16 };
}

static inline float mask_value(struct mask_row m, int64_t c) {
	return m.f16 ? half_to_float(((const uint16_t *) m.data)[c]) : ((const float *) m.data)[c];
}

#if TOY_VECTOR

/* The most query heads (of one key/value head) one pass attends together. */
enum { MAX_GROUP = 4 };

/* The cache's types: f16, or q8_0 (a cell's values of a head in whole blocks). */
enum { CACHE_F16, CACHE_Q8_0 };

/* load_cache is LANES values of a cache row of type T (a cell's keys or values of one head, at
 * row) from value i (a multiple of LANES). */
static inline __attribute__((always_inline)) vec load_cache(const char * row, const int T, int64_t i) {
	return T == CACHE_Q8_0 ? vload_q8_0(row, i) : VLOADH((const uint16_t *) row + i);
}

/*
 * scores writes to p[i] the dot products of query q[i] (hdk floats), for i < R, with the keys of
 * kvLen cells at kb (cell c's hdk values of type T at kb + c·ks), LANES cells at a time, four cells'
 * dot products side by side (each a chain of dependent FMAs), their sums taken together
 * (vsums); p[i] holds kvLen rounded up to LANES, the cells past kvLen zero. The R queries of a
 * pass share each key's loads and conversions; each query's arithmetic is the same whatever R.
 */
static inline __attribute__((always_inline)) void scores(const float * const * q, const int R, int64_t hdk, const char * kb,
		size_t ks, int64_t kvLen, float * const * p, const int T) {
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	const int64_t qn = hdk / LANES;
	for (int64_t c0 = 0; c0 < cells; c0 += LANES) {
		vec acc[MAX_GROUP][LANES];
		for (int i = 0; i < LANES; i += 4) {
			const int64_t c = c0 + i;
			const int64_t n = kvLen - c < 4 ? (kvLen - c > 0 ? kvLen - c : 0) : 4;
			const char * k0 = kb + (n > 0 ? c : 0) * ks;
			const char * k1 = kb + (n > 1 ? c + 1 : 0) * ks;
			const char * k2 = kb + (n > 2 ? c + 2 : 0) * ks;
			const char * k3 = kb + (n > 3 ? c + 3 : 0) * ks;
			vec a[MAX_GROUP][4];
			for (int r = 0; r < R; r++) {
				for (int x = 0; x < 4; x++) {
					a[r][x] = VZERO();
				}
			}
			for (int64_t j = 0; j < qn; j++) {
				const vec kv0 = load_cache(k0, T, j * LANES), kv1 = load_cache(k1, T, j * LANES);
				const vec kv2 = load_cache(k2, T, j * LANES), kv3 = load_cache(k3, T, j * LANES);
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
 * softmax scales the scores p of kvLen cells, adds the mask's row m and turns them into
 * exponentials relative to their largest, which it writes to *max (p holds kvLen rounded up to
 * LANES; the cells past kvLen become 0), and returns their sum; 0 when the mask hides every
 * cell, with p all zeros and *max -inf.
 */
static float softmax(float * p, int64_t kvLen, float scale, struct mask_row mrow, float * max) {
	const int64_t cells = (kvLen + LANES - 1) / LANES * LANES;
	/* The mask, and the largest score, a vector at a time (the cells past kvLen are -inf). */
	const int64_t kv = kvLen - kvLen % LANES;
	vec mxv = VSET(-INFINITY);
	const vec sc = VSET(scale);
	for (int64_t c = 0; c < kv; c += LANES) {
		const vec m = mrow.f16 ? VLOADH((const uint16_t *) mrow.data + c) : VLOAD((const float *) mrow.data + c);
		const vec x = VADD(VMUL(VLOAD(p + c), sc), m);
		VSTORE(p + c, x);
		mxv = VMAX(mxv, x);
	}
	float mx = VREDUCE_MAX(mxv);
	for (int64_t c = kv; c < cells; c++) {
		p[c] = c < kvLen ? p[c] * scale + mask_value(mrow, c) : -INFINITY;
		mx = p[c] > mx ? p[c] : mx;
	}
	*max = mx;
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
	return sums[0];
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

/* values_rows_pass is values_rows for the ND·LANES channels from d0 (ND 1 to 4). */
static inline __attribute__((always_inline)) void values_rows_pass(const char * vb, size_t vs, int64_t d0, int64_t kvLen,
		float * const * p, const float * inv, const int R, const int ND, float * const * out, const int T) {
	vec acc[MAX_GROUP][4];
	for (int r = 0; r < R; r++) {
		for (int x = 0; x < ND; x++) {
			acc[r][x] = VZERO();
		}
	}
	for (int64_t c = 0; c < kvLen; c++) {
		const char * row = vb + c * vs;
		vec w[4];
		for (int x = 0; x < ND; x++) {
			w[x] = load_cache(row, T, d0 + x * LANES);
		}
		for (int r = 0; r < R; r++) {
			const vec pc = VSET(p[r][c]);
			for (int x = 0; x < ND; x++) {
				acc[r][x] = VFMA(w[x], pc, acc[r][x]);
			}
		}
	}
	for (int r = 0; r < R; r++) {
		for (int x = 0; x < ND; x++) {
			VSTORE(out[r] + d0 + x * LANES, inv[r] == 0 ? VZERO() : VMUL(acc[r][x], VSET(inv[r])));
		}
	}
}

/*
 * values_rows is values for values laid out a cell at a time (cell c's hdv values of type T at
 * vb + c·vs: the cache of flash attention's layout, read without a transposed copy): each
 * cell's values, LANES channels at a time, weighted by its probability and added in, 4·LANES
 * channels a pass (then LANES), with no sums across lanes.
 */
static inline __attribute__((always_inline)) void values_rows(const char * vb, size_t vs, int64_t hdv, int64_t kvLen,
		float * const * p, const float * inv, const int R, float * const * out, const int T) {
	int64_t d0 = 0;
	for (; d0 + 4 * LANES <= hdv; d0 += 4 * LANES) {
		values_rows_pass(vb, vs, d0, kvLen, p, inv, R, 4, out, T);
	}
	for (; d0 < hdv; d0 += LANES) {
		values_rows_pass(vb, vs, d0, kvLen, p, inv, R, 1, out, T);
	}
}

/*
 * attend computes the outputs out[i] (hdv floats) of R queries q[i] (hdk floats) that share one
 * key/value head over kvLen cells: keys at kb, values at vb (as scores and values read them, or
 * values_rows where VROWS is set), both of type T (q8_0 only a cell at a time), the mask's row
 * mrow; p[i] is scratch for the scores, kvLen rounded up to LANES. With part
 * NULL the outputs are the attention's; otherwise they are the values' sums weighted by the
 * unnormalised exponentials, and part[i] gets their largest score and their sum: a block's
 * share, which toy_attend_merge joins.
 */
static inline __attribute__((always_inline)) void attend(const float * const * q, const int R, int64_t hdk, const char * kb,
		size_t ks, const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, float cap, struct mask_row mrow,
		float * const * p, float * const * out, float * const * part, const int VROWS, const int T) {
	scores(q, R, hdk, kb, ks, kvLen, p, T);
	float inv[MAX_GROUP], max[MAX_GROUP], sum[MAX_GROUP];
	for (int r = 0; r < R; r++) {
		if (cap > 0) {
			/* Soft-capped logits (gemma2): cap·tanh(scale·score/cap), as ggml's unfused
			 * attention computes them (Scale, Tanh, Scale), then the softmax unscaled. */
			const float s = scale / cap;
			for (int64_t c = 0; c < kvLen; c++) {
				p[r][c] = cap * tanhf(p[r][c] * s);
			}
		}
		sum[r] = softmax(p[r], kvLen, cap > 0 ? 1.0f : scale, mrow, &max[r]);
		inv[r] = sum[r] == 0 ? 0 : part != NULL ? 1.0f : 1.0f / sum[r];
	}
	if (VROWS) {
		values_rows(vb, vs, hdv, kvLen, p, inv, R, out, T);
	} else {
		values(vb, vs, hdv, kvLen, p, inv, R, out);
	}
	if (part != NULL) {
		for (int r = 0; r < R; r++) {
			part[r][0] = max[r];
			part[r][1] = sum[r];
		}
	}
}

/* ATTEND(R) defines attend_R, attend_rows_R and attend_q8_0_R: attend for R queries over
 * transposed f16 values, over f16 values a cell at a time, and over a q8_0 cache (its values a
 * cell at a time): each a function of its own, so that gcc allocates the registers of each
 * alone. */
#define ATTEND(R) \
	static __attribute__((noinline)) void attend_##R(const float * const * q, int64_t hdk, const char * kb, size_t ks, \
			const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, float cap, struct mask_row mrow, \
			float * const * p, float * const * out, float * const * part) { \
		attend(q, R, hdk, kb, ks, vb, vs, hdv, kvLen, scale, cap, mrow, p, out, part, 0, CACHE_F16); \
	} \
	static __attribute__((noinline)) void attend_rows_##R(const float * const * q, int64_t hdk, const char * kb, size_t ks, \
			const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, float cap, struct mask_row mrow, \
			float * const * p, float * const * out, float * const * part) { \
		attend(q, R, hdk, kb, ks, vb, vs, hdv, kvLen, scale, cap, mrow, p, out, part, 1, CACHE_F16); \
	} \
	static __attribute__((noinline)) void attend_q8_0_##R(const float * const * q, int64_t hdk, const char * kb, \
			size_t ks, const char * vb, size_t vs, int64_t hdv, int64_t kvLen, float scale, float cap, struct mask_row mrow, \
			float * const * p, float * const * out, float * const * part) { \
		attend(q, R, hdk, kb, ks, vb, vs, hdv, kvLen, scale, cap, mrow, p, out, part, 1, CACHE_Q8_0); \
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
	const struct mask_row row = mask_row_of(mask, s, 0);
	int64_t n = kvLen;
	/* Whole vectors of masked cells from the end (lanes below -FLT_MAX are -inf), then single
	 * cells. */
	const vec lowest = VSET(-FLT_MAX);
	while (n >= LANES) {
		const vec m = row.f16 ? VLOADH((const uint16_t *) row.data + n - LANES) : VLOAD((const float *) row.data + n - LANES);
		if (!VALL_LT(m, lowest)) {
			break;
		}
		n -= LANES;
	}
	while (n > 0 && mask_value(row, n - 1) == -INFINITY) {
		n--;
	}
	n = (n + LANES - 1) / LANES * LANES;
	return n < kvLen ? n : kvLen;
}

typedef void (*attend_fn)(const float * const * q, int64_t hdk, const char * kb, size_t ks, const char * vb, size_t vs,
		int64_t hdv, int64_t kvLen, float scale, float cap, struct mask_row mrow, float * const * p, float * const * out,
		float * const * part);
/* The layouts attend_fns[layout][R-1] reads: transposed f16 values, f16 values a cell at a
 * time, a q8_0 cache. */
enum { LAYOUT_F16_T, LAYOUT_F16_ROWS, LAYOUT_Q8_0, LAYOUTS };
static const attend_fn attend_fns[LAYOUTS][MAX_GROUP] = { { attend_1, attend_2, attend_3, attend_4 },
	{ attend_rows_1, attend_rows_2, attend_rows_3, attend_rows_4 },
	{ attend_q8_0_1, attend_q8_0_2, attend_q8_0_3, attend_q8_0_4 } };

/* A sequence, the cells a pass over it reads, and the first of its jobs. */
struct seq_cells {
	int64_t s, cells, first;
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

/* blocks_of is the number of blocks of a sequence that reads cells cells (one when it reads
 * none). */
static int64_t blocks_of(int64_t cells) {
	return cells <= BLOCK_CELLS ? 1 : (cells + BLOCK_CELLS - 1) / BLOCK_CELLS;
}

/*
 * attend_jobs computes toy_attend_one's outputs (blocked 0) or toy_attend_blocks' (blocked 1)
 * into dst. Jobs are (sequence, run of up to MAX_GROUP query heads of one key/value head, and
 * with blocked a block of cells); the heads of a run share their keys' and values' loads.
 * Unblocked, with fewer such jobs than half the threads (one sequence on many cores), runs are
 * single heads instead, so that more threads have work. A job's time goes mostly to reading
 * its keys and values, which a run reads once for all its heads and single heads once each:
 * one sequence of SmolLM2-135M's 3 key/value heads on 2 threads attended 27-30 % faster in 3
 * jobs than in 9 (256 and 1,000 cells, BenchmarkAttendOneLayers, 2026-12-03). The outputs are
 * the same either way, to the bit.
 */
static void attend_jobs(struct ggml_tensor * dst, int ith, int nth, float scale, float cap, int blocked) {
	const struct ggml_tensor * q = dst->src[0];
	const struct ggml_tensor * k = dst->src[1];
	const struct ggml_tensor * v = dst->src[2];
	const struct ggml_tensor * mask = dst->src[3];
	const int64_t hdk = q->ne[0], H = q->ne[1], S = q->ne[2];
	const int64_t kvLen = k->ne[1], Hkv = k->ne[2], hdv = v->ne[1];
	const int64_t group = H / Hkv;
	/* v is [kvLen, hdv, Hkv, S]: a view of the transposed f16 value cache (a channel's cells side
	 * by side), or of flash attention's, a cell's channels side by side (f16 or q8_0, as the keys). */
	const int vrows = v->type == GGML_TYPE_Q8_0 || v->nb[0] != sizeof(uint16_t);
	const int layout = v->type == GGML_TYPE_Q8_0 ? LAYOUT_Q8_0 : vrows ? LAYOUT_F16_ROWS : LAYOUT_F16_T;
	const int64_t runs = (group + MAX_GROUP - 1) / MAX_GROUP;
	const int64_t per_run = blocked || 2 * S * Hkv * runs >= (int64_t) nth ? (group + runs - 1) / runs : 1;
	const int64_t runs_per_head = (group + per_run - 1) / per_run;
	/* A job costs about its cells, which differ between the sequences of a server's step by as
	 * much as their lengths. The threads claim the jobs from a counter, the longest sequences'
	 * first, so that the last jobs, which leave a thread waiting at the barrier for the
	 * others, are the shortest (dealt out in turn, a thread could take the long sequences and
	 * the other wait for it). */
	struct seq_cells order_stack[STACK_SEQS];
	struct seq_cells * order = S <= STACK_SEQS ? order_stack : (struct seq_cells *) malloc((size_t) S * sizeof(*order));
	const int64_t span = blocked ? BLOCK_CELLS : (kvLen + LANES - 1) / LANES * LANES; /* a job's most cells */
	float stack[STACK_CELLS] __attribute__((aligned(64)));
	float * scratch = per_run * span <= STACK_CELLS ? stack : (float *) malloc((size_t) (per_run * span) * sizeof(float));
	if (order == NULL || scratch == NULL) {
		fprintf(stderr, "toy_attend_one: out of memory for %lld sequences of %lld cells\n", (long long) S, (long long) kvLen);
		abort();
	}
	for (int64_t s = 0; s < S; s++) {
		order[s] = (struct seq_cells) { s, visible_cells(mask, s, kvLen), 0 };
	}
	qsort(order, (size_t) S, sizeof(*order), longer_first);
	int64_t jobs = 0;
	for (int64_t i = 0; i < S; i++) {
		order[i].first = jobs;
		jobs += Hkv * runs_per_head * (blocked ? blocks_of(order[i].cells) : 1);
	}
	int64_t i = 0; /* the sequence of the last job, in order: claims only grow */
	for (int64_t next = 0;; next++) {
		const int64_t job = nth > 1 ? toy_claim(dst) : next;
		if (job >= jobs) {
			break;
		}
		while (i + 1 < S && order[i + 1].first <= job) {
			i++;
		}
		const struct seq_cells seq = order[i];
		/* A sequence's jobs go block by block, the last (shortest) block's last. */
		const int64_t local = job - seq.first, b = local / (Hkv * runs_per_head), run = local % runs_per_head;
		const int64_t g = local / runs_per_head % Hkv;
		const int64_t s = seq.s, h0 = g * group + run * per_run;
		const int64_t R = h0 + per_run <= (g + 1) * group ? per_run : (g + 1) * group - h0;
		const int64_t c0 = b * BLOCK_CELLS, cells = blocked && seq.cells - c0 > BLOCK_CELLS ? BLOCK_CELLS : seq.cells - c0;
		const float * qr[MAX_GROUP];
		float * out[MAX_GROUP];
		float * part[MAX_GROUP];
		float * p[MAX_GROUP];
		for (int64_t r = 0; r < R; r++) {
			qr[r] = (const float *) ((const char *) q->data + (h0 + r) * q->nb[1] + s * q->nb[2]);
			out[r] = (float *) ((char *) dst->data + (h0 + r) * dst->nb[1] + s * dst->nb[2] + b * dst->nb[3]);
			part[r] = out[r] + hdv;
			p[r] = scratch + r * span;
		}
		const char * kb = (const char *) k->data + g * k->nb[2] + s * k->nb[3] + c0 * k->nb[1];
		const char * vb = (const char *) v->data + g * v->nb[2] + s * v->nb[3] + c0 * v->nb[0];
		attend_fns[layout][R - 1](qr, hdk, kb, k->nb[1], vb, vrows ? v->nb[0] : v->nb[1], hdv, cells, scale, cap,
			mask_row_of(mask, s, c0), p, out, blocked ? part : NULL);
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

/* part_row is toy_attend_blocks' row (h, s, b) in parts: hdv weighted values, the block's
 * largest score, its exponentials' sum. */
static inline const float * part_row(const struct ggml_tensor * parts, int64_t h, int64_t s, int64_t b) {
	return (const float *) ((const char *) parts->data + h * parts->nb[1] + s * parts->nb[2] + b * parts->nb[3]);
}

/* attend_merge joins attend_jobs' blocks (dst->src[0], under the mask dst->src[1]): the body of
 * toy_attend_merge and its namesakes. */
static void attend_merge(struct ggml_tensor * dst, int ith, int nth) {
	const struct ggml_tensor * parts = dst->src[0];
	const struct ggml_tensor * mask = dst->src[1];
	const int64_t hdv = dst->ne[0], H = dst->ne[1], S = dst->ne[2], kvLen = mask->ne[0];
	/* Each (sequence, head) row: its blocks' sums weighted by e^(block's largest - largest),
	 * the first block's alone when it is the only one, so that a sequence of one block gets
	 * the bits toy_attend_one gives it. */
	int64_t last = -1, blocks = 0;
	for (int64_t row = ith; row < H * S; row += nth) {
		const int64_t s = row / H, h = row % H;
		if (s != last) {
			blocks = blocks_of(visible_cells(mask, s, kvLen));
			last = s;
		}
		float * o = (float *) ((char *) dst->data + h * dst->nb[1] + s * dst->nb[2]);
		float max = -INFINITY;
		for (int64_t b = 0; b < blocks; b++) {
			const float * pb = part_row(parts, h, s, b);
			max = pb[hdv] > max ? pb[hdv] : max;
		}
		float sum = 0;
		int first = 1;
		for (int64_t b = 0; b < blocks; b++) {
			const float * pb = part_row(parts, h, s, b);
			if (pb[hdv + 1] == 0) {
				continue; /* every cell of the block masked */
			}
			const float w = expf(pb[hdv] - max);
			for (int64_t d = 0; d < hdv; d++) {
				o[d] = first ? pb[d] * w : o[d] + pb[d] * w;
			}
			sum = first ? pb[hdv + 1] * w : sum + pb[hdv + 1] * w;
			first = 0;
		}
		const float inv = first ? 0 : 1.0f / sum;
		for (int64_t d = 0; d < hdv; d++) {
			o[d] = first ? 0 : o[d] * inv;
		}
	}
}

#endif /* TOY_VECTOR */

#endif /* TOY_ATTEND_H */
