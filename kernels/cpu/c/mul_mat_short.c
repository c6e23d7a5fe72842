#include <stdint.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_vec.h"

/*
 * A product whose shared dimension is short (attention's scores in training: 64 values of a
 * head against 512 keys and 512 queries). ggml's tinyBLAS sums each output as a dot product
 * along the shared dimension and then adds its vector's lanes, which with 64 values costs about
 * as much as the FMAs. Here each output vector holds LANES rows of the result (the a side,
 * transposed into a small packed block), and every value of the shared dimension is one FMA per
 * accumulator with a broadcast of the b side: no horizontal sums at all.
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

/* The rows of a (the result's rows) one job packs and computes, a multiple of MR·LANES, and
 * the longest shared dimension (the Go layer checks it): the packed block is 32 KiB. */
enum { BLOCK = 64, MAX_K = 128 };

/*
 * tile computes the NC (≤ NR) columns of the result from column n0 for the MR·LANES rows at
 * ap (the packed a: the block's rows for shared index d at ap + d·BLOCK), over d < K, into c
 * (column j at c + j·cs floats); b's column n is K floats at b + n·bs.
 */
static inline __attribute__((always_inline)) void tile(const float * ap, const float * b, int64_t bs, int64_t K, float * c,
		int64_t cs, const int NC) {
	vec acc[MR][NR];
	for (int i = 0; i < MR; i++) {
		for (int j = 0; j < NC; j++) {
			acc[i][j] = VZERO();
		}
	}
	for (int64_t d = 0; d < K; d++) {
		vec av[MR];
		for (int i = 0; i < MR; i++) {
			av[i] = VLOAD(ap + d * BLOCK + i * LANES);
		}
		for (int j = 0; j < NC; j++) {
			const vec bj = VBCAST(b + j * bs + d);
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

void toy_mul_mat_short(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int64_t K = a->ne[0], M = a->ne[1], G = a->ne[2];
	const int64_t N = b->ne[1], heads = b->ne[2];
	const int64_t r = heads / G;
	const int64_t as = a->nb[1] / sizeof(float), bs = b->nb[1] / sizeof(float), cs = dst->nb[1] / sizeof(float);
	const int64_t blocks = (M + BLOCK - 1) / BLOCK;
	float ap[BLOCK * MAX_K] __attribute__((aligned(64)));
	/* Jobs are (head, block of BLOCK rows), dealt out to the threads in turn. */
	for (int64_t job = ith; job < heads * blocks; job += nth) {
		const int64_t h = job / blocks, m0 = (job % blocks) * BLOCK;
		const int64_t rows = M - m0 < BLOCK ? M - m0 : BLOCK; /* a multiple of MR·LANES or of LANES */
		const float * ah = (const float *) ((const char *) a->data + (h / r) * a->nb[2]);
		const float * bh = (const float *) ((const char *) b->data + h * b->nb[2]);
		float * ch = (float *) ((char *) dst->data + h * dst->nb[2]);
		/* Pack the block's rows transposed: row m's value d at ap[d·BLOCK + m − m0]. */
		for (int64_t m = 0; m < rows; m++) {
			const float * row = ah + (m0 + m) * as;
			for (int64_t d = 0; d < K; d++) {
				ap[d * BLOCK + m] = row[d];
			}
		}
		for (int64_t m = rows; m < (rows + MR * LANES - 1) / (MR * LANES) * (MR * LANES); m++) {
			for (int64_t d = 0; d < K; d++) {
				ap[d * BLOCK + m] = 0;
			}
		}
		for (int64_t i0 = 0; i0 < rows; i0 += MR * LANES) {
			/* A tile past the block's last rows computes zeros into a scratch column set. */
			const int full = i0 + MR * LANES <= rows;
			float scratch[MR * LANES * NR] __attribute__((aligned(64)));
			for (int64_t n0 = 0; n0 < N; n0 += NR) {
				const int nc = (int) (N - n0 < NR ? N - n0 : NR);
				float * c = full ? ch + n0 * cs + m0 + i0 : scratch;
				const int64_t ccs = full ? cs : MR * LANES;
				switch (nc) {
				case 1: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, 1); break;
				case 2: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, 2); break;
				case 3: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, 3); break;
#if NR > 4
				case 4: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, 4); break;
				case 5: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, 5); break;
#endif
				default: tile(ap + i0, bh + n0 * bs, bs, K, c, ccs, NR); break;
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

#else

/* No vector unit this file knows: the Go layer asks toy_vectorized and leaves the
 * products to ggml, so this is never called. */
void toy_mul_mat_short(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
}

#endif
