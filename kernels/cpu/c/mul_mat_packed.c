#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_claims.h"
#include "toy_cpu.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel mul_mat_packed types=f32,f16,bf16,q8_0

/*
 * ggml_mul_mat(a, b) as a packed GEMM: a block of 64 rows of a (the result's rows) is packed
 * transposed, in f32 (an f16, bf16 or q8_0 weight is converted as it is packed), and each tile
 * of the result keeps 64 rows by 6 columns in 24 vector accumulators, every value of the shared
 * dimension one FMA per accumulator with a broadcast of b's value: no horizontal sums at all.
 * ggml's tinyBLAS sums each output as a dot product along the shared dimension and then adds
 * its vector's lanes: with attention's 64 values of a head that costs about as much as the
 * FMAs, and on training's longer products its tiles read both operands from the L2 cache where
 * this kernel reads the packed block there and b's few columns from L1 (1.3–1.7× ggml's f32
 * GEMM on SmolLM2-135M's training shapes, BenchmarkMulMatPacked).
 */

#if TOY_VECTOR

/* The register tile: MR vectors of the result's rows by NR of its columns (macros: the
 * preprocessor picks the cases below). */
#if defined(__AVX512F__)
#define VBCAST(p) _mm512_set1_ps(*(p))
#define MR 4
#define NR 6
#else
#define VBCAST(p) _mm256_broadcast_ss(p)
#define MR 2
#define NR 4
#endif

/* The rows of a (the result's rows) one job packs and computes, a multiple of MR·LANES; the
 * longest shared dimension whose packed block (32 KiB) is kept on the stack (a longer one's is
 * on the heap); and the most values of the shared dimension one pass packs (2 MiB; a multiple
 * of q8_0's block): a longer one takes more passes, each adding to the result the last left. */
enum { BLOCK = 64, MAX_K = 128, KC = 8192 };

/*
 * tile computes the NC (≤ NR) columns of the result from column n0 for the MR·LANES rows at
 * ap (the packed a: the block's rows for shared index d at ap + d·BLOCK), over d < K, into c
 * (column j at c + j·cs floats), or adds them to c's when ACC is set; b's value (d, n) is at
 * b + n·bs + d, or, where BT is set (b a transposed view, its columns' values side by side),
 * at b + n + d·bd.
 */
static inline __attribute__((always_inline)) void tile(const float * ap, const float * b, int64_t bs, int64_t bd, int64_t K,
		float * c, int64_t cs, const int NC, const int ACC, const int BT) {
	vec acc[MR][NR];
	for (int i = 0; i < MR; i++) {
		for (int j = 0; j < NC; j++) {
			acc[i][j] = ACC ? VLOAD(c + j * cs + i * LANES) : VZERO();
		}
	}
	for (int64_t d = 0; d < K; d++) {
		vec av[MR];
		for (int i = 0; i < MR; i++) {
			av[i] = VLOAD(ap + d * BLOCK + i * LANES);
		}
		const float * bp = BT ? b + d * bd : b + d;
		for (int j = 0; j < NC; j++) {
			const vec bj = VBCAST(BT ? bp + j : bp + j * bs);
			for (int i = 0; i < MR; i++) {
				acc[i][j] = VFMA(av[i], bj, acc[i][j]);
			}
		}
	}
	for (int j = 0; j < NC; j++) {
		for (int i = 0; i < MR; i++) {
			VSTORE(c + j * cs + i * LANES, acc[i][j]);
		}
	}
}

/* The threads claim jobs from a counter (toy_claims.h). */

/* A product is cut into at least this many jobs per thread (more columns a job when there are
 * enough row blocks), and a job takes at least this many columns (packing its block costs about
 * one column's FMAs for every LANES). */
enum { JOBS_PER_THREAD = 4, MIN_JOB_COLS = 8 * NR };

/* row_from is the address of value k0 of a's row at row, of type type (k0 a multiple of q8_0's
 * block for q8_0). */
static const char * row_from(const char * row, enum ggml_type type, int64_t k0) {
	switch (type) {
	case GGML_TYPE_F32:
		return row + k0 * (int64_t) sizeof(float);
	case GGML_TYPE_F16:
	case GGML_TYPE_BF16:
		return row + k0 * (int64_t) sizeof(uint16_t);
	default: /* q8_0 */
		return row + k0 / Q8_0_BLOCK * Q8_0_BYTES;
	}
}

/* load_at loads LANES values of type type, from d on, of the contiguous run at from: a row of a
 * from its value k0 (a multiple of q8_0's block), or a column of a transposed view; for q8_0,
 * a row and d a multiple of LANES. */
static inline __attribute__((always_inline)) vec load_at(const char * from, enum ggml_type type, int64_t d) {
	switch (type) {
	case GGML_TYPE_F32:
		return VLOAD((const float *) from + d);
	case GGML_TYPE_F16:
		return VLOADH((const uint16_t *) from + d);
	case GGML_TYPE_BF16:
		return VLOADB((const uint16_t *) from + d);
	default: /* q8_0 */
		return vload_q8_0(from, d);
	}
}

/* value_at is value d of the contiguous run of f32, f16 or bf16 values at from (load_at's). */
static inline float value_at(const char * from, enum ggml_type type, int64_t d) {
	switch (type) {
	case GGML_TYPE_F16:
		return half_to_float(((const uint16_t *) from)[d]);
	case GGML_TYPE_BF16:
		return bf16_to_float(((const uint16_t *) from)[d]);
	default:
		return ((const float *) from)[d];
	}
}

/*
 * rows_contiguous says a's rows hold their values side by side (a dense matrix, or a view of
 * rows); otherwise its columns do (a transposed view). ggml's strides count q8_0 in blocks: a
 * transposed q8_0 view whose matrix has rows of one block has the first stride of a matrix of
 * rows, so for q8_0 the rows must also be whole blocks that do not overlap (the rule of
 * ggml.MulMatPackedFits, which refuses the one shape both readings fit, 32 by 32).
 */
static int rows_contiguous(const struct ggml_tensor * a) {
	const size_t esize = a->type == GGML_TYPE_F32 ? sizeof(float) : a->type == GGML_TYPE_Q8_0 ? Q8_0_BYTES : sizeof(uint16_t);
	if (a->type == GGML_TYPE_Q8_0) {
		return a->nb[0] == esize && a->ne[0] % Q8_0_BLOCK == 0 && a->nb[1] >= (size_t) (a->ne[0] / Q8_0_BLOCK) * Q8_0_BYTES;
	}
	return a->nb[0] == esize;
}

/*
 * pack copies values [k0, k0 + kc) of the rows [m0, m0 + rows) of a's matrix at ah into ap,
 * transposed and in f32 (row m's value d at ap[(d − k0)·BLOCK + m − m0]), and zeros up to a
 * whole tile.
 */
static void pack(const struct ggml_tensor * a, const char * ah, int64_t m0, int64_t rows, int64_t k0, int64_t kc, float * ap) {
	if (rows_contiguous(a)) {
		/* a's rows contiguous: LANES rows at a time, LANES values of each loaded and
		 * transposed into the block's columns (q8_0's kc is whole blocks, so no tail)... */
		const int64_t kv = kc - kc % LANES;
		int64_t m = 0;
		for (; m + LANES <= rows; m += LANES) {
			const char * from[LANES];
			for (int r = 0; r < LANES; r++) {
				from[r] = row_from(ah + (m0 + m + r) * a->nb[1], a->type, k0);
			}
			for (int64_t d = 0; d < kv; d += LANES) {
				vec v[LANES];
				for (int r = 0; r < LANES; r++) {
					v[r] = load_at(from[r], a->type, d);
				}
				vtranspose(v);
				for (int j = 0; j < LANES; j++) {
					VSTORE(ap + (d + j) * BLOCK + m, v[j]);
				}
			}
			for (int64_t d = kv; d < kc; d++) {
				for (int r = 0; r < LANES; r++) {
					ap[d * BLOCK + m + r] = value_at(from[r], a->type, d);
				}
			}
		}
		/* ...and the rows left over each scattered into its column, the same loads. */
		for (; m < rows; m++) {
			const char * from = row_from(ah + (m0 + m) * a->nb[1], a->type, k0);
			for (int64_t d = 0; d < kv; d += LANES) {
				float v[LANES] __attribute__((aligned(64)));
				VSTORE(v, load_at(from, a->type, d));
				for (int j = 0; j < LANES; j++) {
					ap[(d + j) * BLOCK + m] = v[j];
				}
			}
			for (int64_t d = kv; d < kc; d++) {
				ap[d * BLOCK + m] = value_at(from, a->type, d);
			}
		}
	} else if (a->type == GGML_TYPE_Q8_0) {
		/* A transposed q8_0 matrix W (ggml_transpose: a's value (m, d) is W's row d,
		 * element m): each value of the shared dimension is W's row d from element
		 * m0 on, whole blocks (m0 is a multiple of 64, W's rows of 32). */
		for (int64_t d = 0; d < kc; d++) {
			const char * blocks = ah + (k0 + d) * a->nb[0] + (m0 / Q8_0_BLOCK) * Q8_0_BYTES;
			for (int64_t blk = 0; blk * Q8_0_BLOCK < rows; blk++) {
				const char * b = blocks + blk * Q8_0_BYTES;
				const float scale = q8_0_scale(b);
				float * out = ap + d * BLOCK + blk * Q8_0_BLOCK;
				int i = 0;
				if ((blk + 1) * Q8_0_BLOCK <= rows) { /* a whole block, LANES values at a time */
					for (; i < Q8_0_BLOCK; i += LANES) {
						VSTORE(out + i, VMUL(VSET(scale), VLOADQ(b + 2 + i)));
					}
				}
				for (; i < Q8_0_BLOCK && blk * Q8_0_BLOCK + i < rows; i++) {
					out[i] = scale * (float) (int8_t) b[2 + i];
				}
			}
		}
	} else {
		/* A transposed view (a's columns contiguous, f32, f16 or bf16): each value of
		 * the shared dimension is the block's rows side by side, one load. */
		for (int64_t d = 0; d < kc; d++) {
			const char * col = ah + (k0 + d) * a->nb[0] + m0 * a->nb[1];
			int64_t m = 0;
			for (; m + LANES <= rows; m += LANES) {
				VSTORE(ap + d * BLOCK + m, load_at(col, a->type, m));
			}
			for (; m < rows; m++) {
				ap[d * BLOCK + m] = value_at(col, a->type, m);
			}
		}
	}
	for (int64_t m = rows; m < (rows + MR * LANES - 1) / (MR * LANES) * (MR * LANES); m++) {
		for (int64_t d = 0; d < kc; d++) {
			ap[d * BLOCK + m] = 0;
		}
	}
}

/* TILE_CASES(BT) calls tile for nc columns, adding when acc is set. */
#if NR > 4
#define TILE_WIDE(BT) \
	case 4: tile(ap, b, bs, bd, K, c, cs, 4, 0, BT); break; \
	case 5: tile(ap, b, bs, bd, K, c, cs, 5, 0, BT); break; \
	case -4: tile(ap, b, bs, bd, K, c, cs, 4, 1, BT); break; \
	case -5: tile(ap, b, bs, bd, K, c, cs, 5, 1, BT); break;
#else
#define TILE_WIDE(BT)
#endif
#define TILE_CASES(BT) \
	switch (acc ? -nc : nc) { \
	case 1: tile(ap, b, bs, bd, K, c, cs, 1, 0, BT); break; \
	case 2: tile(ap, b, bs, bd, K, c, cs, 2, 0, BT); break; \
	case 3: tile(ap, b, bs, bd, K, c, cs, 3, 0, BT); break; \
	case -1: tile(ap, b, bs, bd, K, c, cs, 1, 1, BT); break; \
	case -2: tile(ap, b, bs, bd, K, c, cs, 2, 1, BT); break; \
	case -3: tile(ap, b, bs, bd, K, c, cs, 3, 1, BT); break; \
	TILE_WIDE(BT) \
	default: \
		if (acc) { \
			tile(ap, b, bs, bd, K, c, cs, NR, 1, BT); \
		} else { \
			tile(ap, b, bs, bd, K, c, cs, NR, 0, BT); \
		} \
	}

/* tiles runs tile for the nc (1..NR) columns at b into c, adding to c's values when acc is set,
 * reading b transposed when bt is set; with K 0 and acc clear it writes zeros. */
static __attribute__((noinline)) void tiles(const float * ap, const float * b, int64_t bs, int64_t bd, int64_t K, float * c,
		int64_t cs, int nc, int acc, int bt) {
	if (bt) {
		TILE_CASES(1)
	} else {
		TILE_CASES(0)
	}
}

/*
 * What the caller knows of a causal attention's product (the user data, ggml.Causality), so
 * that the kernel skips the values it would multiply by zero or that nothing reads:
 *   CAUSAL_SCORES   the result is scores [keys M, queries N] of each head (M = N): a key after its
 *                   query (m > n) is masked, so its value is not read; a tile of only such values
 *                   is not computed but written as 0;
 *   CAUSAL_PROBS    b is probabilities [keys K, queries N] (K = N), zero for a key after its
 *                   query (d > n): column n's sum stops at d = n;
 *   CAUSAL_PROBS_T  a is probabilities (or their gradient) transposed by groups, [queries·r K,
 *                   keys M] (K a multiple of M), zero for a query before its key (d mod M < m):
 *                   row m's sum starts at m in each of the r runs of M.
 * The values skipped are exact zeros, so the others are computed to the bit as without a mode
 * (each a sum in the same order, where the skipped terms would add 0).
 */
enum { DENSE, CAUSAL_SCORES, CAUSAL_PROBS, CAUSAL_PROBS_T };

void toy_mul_mat_packed(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const int mode = userdata != NULL ? *(const int32_t *) userdata : DENSE;
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int64_t K = a->ne[0], M = a->ne[1], G = a->ne[2];
	const int64_t N = b->ne[1], H = b->ne[2], heads = H * b->ne[3]; /* b's heads of every sequence */
	const int64_t r = H / G, r3 = b->ne[3] / a->ne[3];
	/* b's value (d, n) is at bh + n·bs + d·bd: rows contiguous (bd 1), or a transposed view
	 * whose columns' values are side by side (bs 1). */
	const int bt = b->nb[0] != sizeof(float);
	const int64_t bs = bt ? 1 : (int64_t) (b->nb[1] / sizeof(float)), bd = bt ? (int64_t) (b->nb[0] / sizeof(float)) : 1;
	const int64_t cs = dst->nb[1] / sizeof(float);
	const int64_t blocks = (M + BLOCK - 1) / BLOCK;
	/* Jobs are (head of a sequence, block of BLOCK rows, run of columns); a job's run holds
	 * jobCols columns. */
	int64_t runs = (JOBS_PER_THREAD * (int64_t) nth + heads * blocks - 1) / (heads * blocks);
	int64_t jobCols = (N + runs - 1) / runs;
	jobCols = jobCols < MIN_JOB_COLS ? MIN_JOB_COLS : (jobCols + NR - 1) / NR * NR;
	runs = (N + jobCols - 1) / jobCols;
	const int64_t jobs = heads * blocks * runs;
	/* The packed block of at most KC values of the shared dimension. */
	const int64_t kcMax = K < KC ? K : KC;
	float ap_stack[BLOCK * MAX_K] __attribute__((aligned(64)));
	const size_t need = (size_t) (BLOCK * kcMax);
	float * ap = need <= BLOCK * MAX_K ? ap_stack : (float *) aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
	if (ap == NULL) {
		fprintf(stderr, "toy_mul_mat_packed: out of memory for a packed block of %lld values\n", (long long) need);
		abort();
	}
	int64_t packed = -1; /* the (head, block) whose rows ap holds, when one pass takes all of K */
	for (int64_t next = 0;; next++) {
		const int64_t job = nth > 1 ? toy_claim(dst) : next;
		if (job >= jobs) {
			break;
		}
		const int64_t hb = job / runs, hs = hb / blocks, m0 = (hb % blocks) * BLOCK;
		const int64_t h = hs % H, s3 = hs / H;
		const int64_t nBegin = (job % runs) * jobCols, nEnd = nBegin + jobCols < N ? nBegin + jobCols : N;
		const int64_t rows = M - m0 < BLOCK ? M - m0 : BLOCK;
		const char * ah = (const char *) a->data + (h / r) * a->nb[2] + (s3 / r3) * a->nb[3];
		const float * bh = (const float *) ((const char *) b->data + h * b->nb[2] + s3 * b->nb[3]);
		float * ch = (float *) ((char *) dst->data + h * dst->nb[2] + s3 * dst->nb[3]);
		if (mode == CAUSAL_SCORES && m0 >= nEnd) {
			/* Every key of the job after every query: zeros, nothing packed. */
			for (int64_t n = nBegin; n < nEnd; n++) {
				for (int64_t m = m0; m < m0 + rows; m++) {
					ch[n * cs + m] = 0;
				}
			}
			continue;
		}
		/* The shared dimension in passes of KC values, each adding to the result the last left. */
		for (int64_t k0 = 0; k0 < K; k0 += KC) {
			const int64_t kc = K - k0 < KC ? K - k0 : KC;
			const int add = k0 > 0;
			if (hb != packed || K > KC) {
				pack(a, ah, m0, rows, k0, kc, ap);
				packed = hb;
			}
			for (int64_t i0 = 0; i0 < rows; i0 += MR * LANES) {
				/* A tile past the block's last rows works in a scratch column set. */
				const int full = i0 + MR * LANES <= rows;
				float scratch[MR * LANES * NR] __attribute__((aligned(64)));
				for (int64_t n0 = nBegin; n0 < nEnd; n0 += NR) {
					const int nc = (int) (nEnd - n0 < NR ? nEnd - n0 : NR);
					float * c = full ? ch + n0 * cs + m0 + i0 : scratch;
					const int64_t ccs = full ? cs : MR * LANES;
					if (!full && add) {
						for (int j = 0; j < nc; j++) {
							for (int64_t m = i0; m < rows; m++) {
								scratch[j * MR * LANES + m - i0] = ch[(n0 + j) * cs + m0 + m];
							}
						}
					}
					const float * bn = bh + n0 * bs + k0 * bd;
					/* The runs [d0, d1) of this pass (relative to k0) the mode leaves, each
					 * added to the last (the first to what an earlier pass left). */
					int runs_done = 0;
#define RUN(d0, d1) (tiles(ap + (d0) * BLOCK + i0, bn + (d0) * bd, bs, bd, (d1) - (d0), c, ccs, nc, add || runs_done, bt), \
	runs_done++)
					switch (mode) {
					case CAUSAL_SCORES:
						if (m0 + i0 < n0 + nc) {
							RUN(0, kc);
						}
						break;
					case CAUSAL_PROBS: {
						const int64_t d1 = n0 + nc - k0 < kc ? n0 + nc - k0 : kc;
						if (d1 > 0) {
							RUN(0, d1);
						}
						break;
					}
					case CAUSAL_PROBS_T:
						for (int64_t s0 = k0 / M * M; s0 < k0 + kc; s0 += M) {
							const int64_t d0 = s0 + m0 + i0 > k0 ? s0 + m0 + i0 - k0 : 0;
							const int64_t d1 = s0 + M < k0 + kc ? s0 + M - k0 : kc;
							if (d1 > d0) {
								RUN(d0, d1);
							}
						}
						break;
					default:
						RUN(0, kc);
					}
#undef RUN
					if (runs_done == 0 && !add) {
						tiles(ap + i0, bn, bs, bd, 0, c, ccs, nc, 0, bt); /* zeros */
					}
					if (!full) {
						for (int j = 0; j < nc; j++) {
							for (int64_t m = i0; m < rows; m++) {
								ch[(n0 + j) * cs + m0 + m] = scratch[j * MR * LANES + m - i0];
							}
						}
					}
				}
			}
		}
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	if (ap != ap_stack) {
		free(ap);
	}
}

#else

/* No vector unit this file knows: the Go layer asks toy_vectorized and leaves the
 * products to ggml, so this is never called. */
void toy_mul_mat_packed(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
}

#endif
