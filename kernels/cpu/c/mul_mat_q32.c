#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_ggml.h"
#include "toy_claims.h"
#include "toy_cpu.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights it reads, where a lookup asks for one.
// toy:kernel quantize_q32
// toy:kernel mul_mat_q32 types=q8_0,q4_0,q5_0,q5_1

/*
 * Products over weights of ggml's block types of 32 values (q8_0, q4_0, q5_0, q5_1) in 8-bit
 * integers. toy_quantize_q32 rounds the columns to signed bytes, a scale for each 32 values
 * (as ggml rounds them to q8_0 for these weights, but with an f32 scale); toy_mul_mat_q32 packs
 * 64 rows of weights at a time as unsigned bytes q (a weight is d·(q − o) + m: o 128 for q8_0,
 * 8 for q4_0, 16 for q5_0, 0 for q5_1 whose m is the block's min), four values of 16 rows to a
 * vector, so that one VNNI instruction (vpdpbusd) multiplies four values of 16 rows by four of a
 * column, broadcast, and adds them to the rows' 32-bit sums: no horizontal sums, as the f32
 * packed GEMM (mul_mat_packed.c). After each block of 32 values the integer sums, less o times
 * the column's sum of the block, are scaled (the rows' d times the column's) and added to f32
 * sums. Up to FEW_COLS columns it reads the rows where they are instead (mul_mat_cols below):
 * packing costs about a column's products.
 */

/* The bytes of a quantized column of k values (a multiple of 32): k signed bytes, then a float
 * scale and an int32 sum of the bytes for each block of 32. */
static inline int64_t q32_col_bytes(int64_t k) { return k + k / 32 * 8; }

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define TOY_Q32 1
#else
#define TOY_Q32 0
#endif

int toy_vectorized_q32(void) { return TOY_Q32; }

/* quantize_col rounds the k values at x to bytes at q: each block of 32 scaled by its largest
 * magnitude over 127, rounded to nearest; its scale and its bytes' sum after the bytes. */
static void quantize_col(const float * x, int64_t k, char * q) {
	const int64_t nb = k / 32;
	float * scales = (float *) (q + k);
	int32_t * sums = (int32_t *) (q + k + nb * 4);
	for (int64_t b = 0; b < nb; b++) {
		const float * xb = x + b * 32;
		int8_t * qb = (int8_t *) q + b * 32;
#if TOY_Q32
		const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
		const __m512 m = _mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1));
		const float amax = _mm512_reduce_max_ps(m);
		const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
		const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id)));
		const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id)));
		_mm_storeu_si128((__m128i *) qb, _mm512_cvtsepi32_epi8(i0));
		_mm_storeu_si128((__m128i *) (qb + 16), _mm512_cvtsepi32_epi8(i1));
		scales[b] = d;
		sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
#else
		float amax = 0;
		for (int i = 0; i < 32; i++) {
			amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
		}
		const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
		int32_t s = 0;
		for (int i = 0; i < 32; i++) {
			const int v = (int) nearbyintf(xb[i] * id);
			qb[i] = (int8_t) (v > 127 ? 127 : v < -127 ? -127 : v);
			s += qb[i];
		}
		scales[b] = d;
		sums[b] = s;
#endif
	}
}

void toy_quantize_q32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * x = dst->src[0];
	const int64_t k = x->ne[0], n = x->ne[1];
	for (int64_t j = ith; j < n; j += nth) {
		quantize_col((const float *) ((const char *) x->data + j * x->nb[1]), k, (char *) dst->data + j * dst->nb[1]);
	}
}

#if TOY_Q32

/* The weight types, their blocks' bytes and their offsets o. */
enum { Q8_0, Q4_0, Q5_0, Q5_1 };

static int q32_kind(enum ggml_type t) {
	switch (t) {
	case GGML_TYPE_Q4_0:
		return Q4_0;
	case GGML_TYPE_Q5_0:
		return Q5_0;
	case GGML_TYPE_Q5_1:
		return Q5_1;
	default:
		return Q8_0;
	}
}

static const int block_bytes[] = { 34, 18, 22, 24 };
static const int offsets[] = { 128, 8, 16, 0 };

/* unpack_block writes the 32 values of block b of kind as unsigned bytes q (value j at q[j]),
 * and its scale and min. */
static inline void unpack_block(const char * b, int kind, uint8_t * q, float * d, float * m) {
	*d = q8_0_scale(b);
	*m = kind == Q5_1 ? half_to_float((uint16_t) toy_load16(b + 2)) : 0.0f;
	switch (kind) {
	case Q8_0:
		for (int j = 0; j < 32; j++) {
			q[j] = (uint8_t) (b[2 + j] ^ 0x80);
		}
		break;
	case Q4_0:
		for (int j = 0; j < 16; j++) {
			q[j] = (uint8_t) b[2 + j] & 15;
			q[j + 16] = (uint8_t) b[2 + j] >> 4;
		}
		break;
	default: {
		const int at = kind == Q5_0 ? 6 : 8;
		uint32_t qh;
		memcpy(&qh, b + at - 4, 4);
		for (int j = 0; j < 16; j++) {
			q[j] = ((uint8_t) b[at + j] & 15) | ((qh >> j) & 1) << 4;
			q[j + 16] = ((uint8_t) b[at + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
		}
	}
	}
}

/* The most columns multiplied without packing: on one core, 1536×576 q8_0 in cache, 4 columns
 * took 0.037 ms unpacked against 0.041 packed, 8 columns 0.074 against 0.050 (2026-12-06). */
enum { FEW_COLS = 4 };
/* The rows one job of the GEMM packs, as MR vectors of 16 by NR columns of a tile; up to
 * FEW_COLS columns are multiplied without packing. */
enum { BLOCK = 64, MR = 4, NR = 3 };

/* The blocks of the shared dimension a tile runs over before the next tile: 16 blocks of packed
 * rows (40 KiB) stay in the 48 KiB L1 while the job's columns pass over them. One core, 256
 * rows of q8_0 by 128 columns (2026-12-06): 2048 values 295-297 GMAC/s unchunked, 335-337 in
 * chunks of 16 (330-331 in 12, 323-326 in 8); 1536 values 299-305 against 337-339; 576 level.
 * A tile's sums are stored and reloaded between chunks, unchanged: the same bits. */
enum { KCHUNK = 16 };

/* How far ahead of the two blocks it reads in each of its 16 rows pack prefetches: from memory
 * (2048 by 32768 q8_0 weights on one core) the 16 rows' streams packed in 12-18 ms without,
 * 5-6 ms with 256 to 512 bytes (2026-12-06, a busy machine: the best of 5 runs). */
enum { PACK_PREFETCH = 512 };

/*
 * The pairs of q5_0 and q5_1 blocks (2·bytes ≤ 48) are read as one 64-byte window each, masked
 * so that it never reads past the pair (pair_window), and rearranged in registers: one vpermb
 * puts the 16 bytes of nibbles of block h in the quarters 2h and 2h + 1 of the vector, one
 * shift of 16-bit lanes by 0 or 4 and one mask leave value j of block h at byte 32h + j
 * (pair_values), and one vpermw of the window's first 32 bytes broadcasts the blocks' f16
 * scales, and q5_1's mins, to the lanes of their halves (window_scales), where two 16-byte loads
 * had their halves shuffled into place and each 16-bit float was broadcast from a general
 * register. One column of q5_1 on one core, 4 matrices of 2048×2048 in the L3 cache
 * (BenchmarkMulMatStep, two sittings of 3 and 4 rounds alternating, 2026-12-06): 26-29 GB/s
 * before, 31-35 after. q4_0's pairs, with one scale each and no high bits, measured no faster so
 * (28-33 either way) and keep the loads below.
 */

/* The bytes of the window pair_values gathers for value j of the pair (j/32: the block), by
 * kind (Q5_0, Q5_1). */
static const uint8_t pair_nibbles[2][64] __attribute__((aligned(64))) = {
	{ /* Q5_0 */
		6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
		6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
		28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
		28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
	},
	{ /* Q5_1 */
		8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
		8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
		32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
		32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
	},
};

/* The shift of each 16-bit lane of the gathered bytes: 0 for a block's low nibbles (its values
 * 0..15), 4 for its high ones. */
static const uint16_t pair_shifts[32] __attribute__((aligned(64))) = {
	0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4,
};

/* pair_window is the 2·bytes bytes of the pair of blocks at b of kind (Q5_0, Q5_1), zeros after. */
static inline __m512i pair_window(const char * b, int kind) {
	return _mm512_maskz_loadu_epi8((((__mmask64) 1) << (2 * block_bytes[kind])) - 1, (const void *) b);
}

/* pair_values is the 64 unsigned values q of the pair in window win (of kind Q5_0 or Q5_1),
 * value j of the first block at byte j, of the second at 32 + j; b is where the window starts. */
static inline __m512i pair_values(__m512i win, const char * b, int kind) {
	__m512i v = _mm512_permutexvar_epi8(_mm512_load_si512((const void *) pair_nibbles[kind - Q5_0]), win);
	v = _mm512_and_si512(_mm512_srlv_epi16(v, _mm512_load_si512((const void *) pair_shifts)), _mm512_set1_epi8(15));
	const int bytes = block_bytes[kind], at = kind == Q5_0 ? 6 : 8;
	uint32_t h0, h1;
	memcpy(&h0, b + at - 4, 4);
	memcpy(&h1, b + bytes + at - 4, 4);
	return _mm512_mask_add_epi8(v, (__mmask64) h0 | (__mmask64) h1 << 32, v, _mm512_set1_epi8(16));
}

/* window_scales is the f32 vector of the 16-bit floats at bytes off and bytes + off of window
 * win, each in 8 lanes: the pair's scales (off 0) or q5_1's mins (off 2). */
static inline __m512 window_scales(__m512i win, int bytes, int off) {
	const __m256i idx = _mm256_setr_epi16(off / 2, off / 2, off / 2, off / 2, off / 2, off / 2, off / 2, off / 2,
		(bytes + off) / 2, (bytes + off) / 2, (bytes + off) / 2, (bytes + off) / 2, (bytes + off) / 2, (bytes + off) / 2,
		(bytes + off) / 2, (bytes + off) / 2);
	return _mm512_cvtph_ps(_mm256_permutexvar_epi16(idx, _mm512_castsi512_si256(win)));
}

/* load_pair is the 64 unsigned values q of the two blocks at b (block b and the next) of kind,
 * value j of the first at byte j, of the second at 32 + j. */
static inline __m512i load_pair(const char * b, int kind) {
	if (kind == Q8_0) {
		const int bytes = block_bytes[kind];
		const __m256i lo = _mm256_loadu_si256((const __m256i *) (b + 2));
		const __m256i hi = _mm256_loadu_si256((const __m256i *) (b + bytes + 2));
		return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8((char) 0x80));
	}
	if (kind != Q4_0) {
		return pair_values(pair_window(b, kind), b, kind);
	}
	/* q4_0: two 16-byte loads */
	const __m256i qs = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (b + 2))),
		_mm_loadu_si128((const __m128i *) (b + 18 + 2)), 1);
	const __m256i f = _mm256_set1_epi8(15);
	const __m256i lo = _mm256_and_si256(qs, f), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), f);
	/* [lo0 lo1 hi0 hi1] by 128 bits, to [lo0 hi0 lo1 hi1] */
	__m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
	return _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));
}

/*
 * The packed rows: for block kb of the shared dimension, 8 groups of 4 values, each 64 rows ×
 * 4 bytes (row r's values 4g..4g+3 at q + kb·2048 + g·256 + r·4), then the rows' scales at
 * d + kb·64 and mins at mn + kb·64. pack fills them for rows [m0, m0 + rows) of w (zeros past
 * the last row).
 */
static void pack(const char * w, size_t stride, int kind, int64_t m0, int64_t rows, int64_t nb, uint8_t * q, float * d,
		float * mn) {
	const int bytes = block_bytes[kind];
	for (int64_t r0 = 0; r0 < BLOCK; r0 += 16) {
		const char * from[16];
		for (int r = 0; r < 16; r++) {
			from[r] = r0 + r < rows ? w + (m0 + r0 + r) * stride : NULL;
		}
		for (int64_t kb = 0; kb < nb; kb += 2) {
			const int two = kb + 1 < nb;
			vec v[16];
			for (int r = 0; r < 16; r++) {
				if (from[r] == NULL) {
					v[r] = _mm512_setzero_ps();
					d[kb * BLOCK + r0 + r] = 0;
					mn[kb * BLOCK + r0 + r] = 0;
					if (two) {
						d[(kb + 1) * BLOCK + r0 + r] = 0;
						mn[(kb + 1) * BLOCK + r0 + r] = 0;
					}
					continue;
				}
				const char * b = from[r] + kb * bytes;
				_mm_prefetch(b + PACK_PREFETCH, _MM_HINT_T0);
				if (two) {
					v[r] = _mm512_castsi512_ps(load_pair(b, kind));
				} else {
					uint8_t u[64] __attribute__((aligned(64))) = { 0 };
					float dd, mm;
					unpack_block(b, kind, u, &dd, &mm);
					v[r] = _mm512_load_ps((const float *) u);
				}
				d[kb * BLOCK + r0 + r] = q8_0_scale(b);
				mn[kb * BLOCK + r0 + r] = kind == Q5_1 ? half_to_float((uint16_t) toy_load16(b + 2)) : 0.0f;
				if (two) {
					d[(kb + 1) * BLOCK + r0 + r] = q8_0_scale(b + bytes);
					mn[(kb + 1) * BLOCK + r0 + r] = kind == Q5_1 ? half_to_float((uint16_t) toy_load16(b + bytes + 2)) : 0.0f;
				}
			}
			vtranspose(v);
			for (int g = 0; g < (two ? 16 : 8); g++) {
				_mm512_store_ps((float *) (q + (kb + g / 8) * 2048 + (g % 8) * 256 + r0 * 4), v[g]);
			}
		}
	}
}

/*
 * tile computes NC (≤ NR) columns of the 64 packed rows over blocks [kb0, kb1) of nb: column
 * j's bytes at xq + j·xs, then its nb scales and nb sums; into c (column j at c + j·cs), or
 * adds to c's values where ACC is set.
 */
static inline __attribute__((always_inline)) void tile(const uint8_t * q, const float * d, const float * mn, int64_t nb,
		int64_t kb0, int64_t kb1, const char * xq, int64_t xs, int64_t k, float * c, int64_t cs, const int NC, const int ACC,
		const int KIND) {
	__m512 acc[MR][NR];
	for (int i = 0; i < MR; i++) {
		for (int j = 0; j < NC; j++) {
			acc[i][j] = ACC ? _mm512_loadu_ps(c + j * cs + i * 16) : _mm512_setzero_ps();
		}
	}
	const int o = offsets[KIND];
	for (int64_t kb = kb0; kb < kb1; kb++) {
		__m512i ia[MR][NR];
		for (int j = 0; j < NC; j++) {
			const int32_t s = ((const int32_t *) (xq + j * xs + k + nb * 4))[kb];
			const __m512i init = o ? _mm512_set1_epi32(-o * s) : _mm512_setzero_si512();
			for (int i = 0; i < MR; i++) {
				ia[i][j] = init;
			}
		}
		const uint8_t * qb = q + kb * 2048;
		for (int g = 0; g < 8; g++) {
			__m512i wv[MR];
			for (int i = 0; i < MR; i++) {
				wv[i] = _mm512_load_si512((const void *) (qb + g * 256 + i * 64));
			}
			for (int j = 0; j < NC; j++) {
				int32_t x4;
				memcpy(&x4, xq + j * xs + kb * 32 + g * 4, 4);
				const __m512i xb = _mm512_set1_epi32(x4);
				for (int i = 0; i < MR; i++) {
					ia[i][j] = _mm512_dpbusd_epi32(ia[i][j], wv[i], xb);
				}
			}
		}
		__m512 dv[MR];
		for (int i = 0; i < MR; i++) {
			dv[i] = _mm512_load_ps(d + kb * BLOCK + i * 16);
		}
		for (int j = 0; j < NC; j++) {
			const float dx = ((const float *) (xq + j * xs + k))[kb];
			const __m512 dxb = _mm512_set1_ps(dx);
			for (int i = 0; i < MR; i++) {
				acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i][j]), _mm512_mul_ps(dv[i], dxb), acc[i][j]);
			}
			if (KIND == Q5_1) {
				const float s = dx * (float) ((const int32_t *) (xq + j * xs + k + nb * 4))[kb];
				const __m512 sb = _mm512_set1_ps(s);
				for (int i = 0; i < MR; i++) {
					acc[i][j] = _mm512_fmadd_ps(_mm512_load_ps(mn + kb * BLOCK + i * 16), sb, acc[i][j]);
				}
			}
		}
	}
	for (int j = 0; j < NC; j++) {
		for (int i = 0; i < MR; i++) {
			_mm512_storeu_ps(c + j * cs + i * 16, acc[i][j]);
		}
	}
}

#define TILE_FN(KIND) \
	static __attribute__((noinline)) void tiles_##KIND(const uint8_t * q, const float * d, const float * mn, int64_t nb, \
			int64_t kb0, int64_t kb1, const char * xq, int64_t xs, int64_t k, float * c, int64_t cs, int nc, int acc) { \
		switch (acc ? -nc : nc) { \
		case 1: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, 1, 0, KIND); break; \
		case 2: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, 2, 0, KIND); break; \
		case -1: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, 1, 1, KIND); break; \
		case -2: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, 2, 1, KIND); break; \
		case -NR: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, NR, 1, KIND); break; \
		default: tile(q, d, mn, nb, kb0, kb1, xq, xs, k, c, cs, NR, 0, KIND); \
		} \
	}
TILE_FN(Q8_0)
TILE_FN(Q4_0)
TILE_FN(Q5_0)
TILE_FN(Q5_1)

typedef void (*tiles_fn)(const uint8_t * q, const float * d, const float * mn, int64_t nb, int64_t kb0, int64_t kb1,
	const char * xq, int64_t xs, int64_t k, float * c, int64_t cs, int nc, int acc);
static const tiles_fn tiles_fns[] = { tiles_Q8_0, tiles_Q4_0, tiles_Q5_0, tiles_Q5_1 };

/*
 * The product of a few columns reads the weights where they are, without packing: each row's
 * blocks two at a time as 64 unsigned bytes (load_pair), one vpdpbusd a column against the
 * column's 64 bytes, the 32-bit sums of the two blocks in the vector's halves. Each vector of
 * 32-bit sums starts from the column's correction of the two blocks (−o times the column's
 * sum of each block, in lanes 0 and 8) and is scaled by the rows' d times the column's scale
 * (each in its half) into an f32 sum; q5_1's mins add m times the column's values' sum (an
 * eighth in each lane of its half). The per-column vectors are made once a call (aux).
 */
enum { AUX_VECS = 3, AUX_BYTES = AUX_VECS * 64 };

/* make_aux writes, for each column j of m and pair of blocks p of npairs, at aux + (j·npairs +
 * p)·AUX_BYTES: the correction (int32), the scales and q5_1's sums (f32) of the pair (a missing
 * second block of an odd count: zero). */
static void make_aux(const char * xq, int64_t xs, int64_t k, int64_t m, int64_t npairs, int o, char * aux) {
	const int64_t nb = k / 32;
	for (int64_t j = 0; j < m; j++) {
		const float * dx = (const float *) (xq + j * xs + k);
		const int32_t * sx = (const int32_t *) (xq + j * xs + k + nb * 4);
		for (int64_t p = 0; p < npairs; p++) {
			int32_t * corr = (int32_t *) (aux + (j * npairs + p) * AUX_BYTES);
			float * sc = (float *) (corr + 16), * ms = sc + 16;
			for (int h = 0; h < 2; h++) {
				const int64_t kb = 2 * p + h;
				const int ok = kb < nb;
				for (int l = 0; l < 8; l++) {
					corr[8 * h + l] = l == 0 && ok ? -o * sx[kb] : 0;
					sc[8 * h + l] = ok ? dx[kb] : 0;
					ms[8 * h + l] = ok ? dx[kb] * (float) sx[kb] / 8 : 0;
				}
			}
		}
	}
}

/* pair_scales is the f32 vector of the 16-bit floats at b and b + bytes, each in 8 lanes (the
 * second 0 where one is set). */
static inline __m512 pair_scales(const char * b, int bytes, int one) {
	const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(toy_load16(b))),
		_mm_set1_epi16(one ? 0 : toy_load16(b + bytes)), 1);
	return _mm512_cvtph_ps(h);
}

/*
 * lanes_cols computes rows t, lane + t, …, (R−1)·lane + t of w for t < lane (R runs of rows far
 * apart, as mul_mat_cols.c reads them) against the M columns at xq (xs bytes apart), k long,
 * into y[j·n + r], prefetching PF bytes ahead in each run when PF is not 0. Rows from memory
 * (2048 by 32768 q8_0 weights, one core, the best of 6 on a busy machine, 2026-12-06): one
 * column 1.9-2.4 ms either way; two 5.6-8.8 ms without, 2.4-2.9 with 4096 bytes; four 11.7-18.2
 * against 3.8-4.1.
 */
static inline __attribute__((always_inline)) void lanes_cols(const char * w, size_t stride, int64_t lane, int64_t k,
		const char * xq, int64_t xs, const char * aux, float * y, int64_t n, const int KIND, const int R, const int M,
		const int PF) {
	const int bytes = block_bytes[KIND];
	const int64_t nb = k / 32, npairs = (nb + 1) / 2, whole = nb / 2;
	for (int64_t t = 0; t < lane; t++) {
		__m512 acc[4][4];
		for (int q = 0; q < R; q++) {
			for (int j = 0; j < M; j++) {
				acc[q][j] = _mm512_setzero_ps();
			}
		}
		for (int64_t p = 0; p < npairs; p++) {
			__m512i wv[4];
			__m512 dw[4], mw[4];
			for (int q = 0; q < R; q++) {
				const char * b = w + (q * lane + t) * stride + 2 * p * bytes;
				if (PF) {
					_mm_prefetch(b + PF, _MM_HINT_T0);
				}
				if (p < whole && (KIND == Q5_0 || KIND == Q5_1)) {
					const __m512i win = pair_window(b, KIND);
					wv[q] = pair_values(win, b, KIND);
					dw[q] = window_scales(win, bytes, 0);
					if (KIND == Q5_1) {
						mw[q] = window_scales(win, bytes, 2);
					}
					continue;
				}
				if (p < whole) {
					wv[q] = load_pair(b, KIND);
				} else {
					uint8_t u[64] __attribute__((aligned(64))) = { 0 };
					float dd, mm;
					unpack_block(b, KIND, u, &dd, &mm);
					wv[q] = _mm512_load_si512((const void *) u);
				}
				dw[q] = pair_scales(b, bytes, p >= whole);
				if (KIND == Q5_1) {
					mw[q] = pair_scales(b + 2, bytes, p >= whole);
				}
			}
			for (int j = 0; j < M; j++) {
				const char * a = aux + (j * npairs + p) * AUX_BYTES;
				const __m512i xv = _mm512_loadu_si512((const void *) (xq + j * xs + p * 64));
				const __m512i corr = _mm512_load_si512((const void *) a);
				const __m512 dx = _mm512_load_ps((const float *) (a + 64));
				for (int q = 0; q < R; q++) {
					const __m512i ia = _mm512_dpbusd_epi32(corr, wv[q], xv);
					acc[q][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(dw[q], dx), acc[q][j]);
					if (KIND == Q5_1) {
						acc[q][j] = _mm512_fmadd_ps(mw[q], _mm512_load_ps((const float *) (a + 128)), acc[q][j]);
					}
				}
			}
		}
		for (int q = 0; q < R; q++) {
			for (int j = 0; j < M; j++) {
				y[j * n + q * lane + t] = _mm512_reduce_add_ps(acc[q][j]);
			}
		}
	}
}

/* rows_cols computes rows [0, rows) in R runs, and the rows the runs leave one at a time. */
static inline __attribute__((always_inline)) void rows_cols(const char * w, size_t stride, int64_t rows, int64_t k,
		const char * xq, int64_t xs, const char * aux, float * y, int64_t n, const int KIND, const int R, const int M,
		const int PF) {
	const int64_t lane = rows / R;
	lanes_cols(w, stride, lane, k, xq, xs, aux, y, n, KIND, R, M, PF);
	if (R > 1 && rows > R * lane) {
		lanes_cols(w + R * lane * stride, stride, rows - R * lane, k, xq, xs, aux, y + R * lane, n, KIND, 1, M, PF);
	}
}

/* The most columns one pass over a chunk's rows keeps in registers. */
enum { COL_GROUP = 4 };

#define COLS_FN(KIND, M) \
	static __attribute__((noinline)) void cols_##KIND##_##M(const char * w, size_t stride, int64_t rows, int64_t k, \
			const char * xq, int64_t xs, const char * aux, float * y, int64_t n) { \
		rows_cols(w, stride, rows, k, xq, xs, aux, y, n, KIND, M <= 2 ? 4 : 2, M, M >= 2 ? 4096 : 0); \
	}
#define COLS_KIND(KIND) COLS_FN(KIND, 1) COLS_FN(KIND, 2) COLS_FN(KIND, 3) COLS_FN(KIND, 4)
COLS_KIND(Q8_0)
COLS_KIND(Q4_0)
COLS_KIND(Q5_0)
COLS_KIND(Q5_1)

typedef void (*cols_fn)(const char * w, size_t stride, int64_t rows, int64_t k, const char * xq, int64_t xs,
	const char * aux, float * y, int64_t n);
#define COLS_FNS(KIND) { cols_##KIND##_1, cols_##KIND##_2, cols_##KIND##_3, cols_##KIND##_4 }
static const cols_fn cols_fns[][COL_GROUP] = { COLS_FNS(Q8_0), COLS_FNS(Q4_0), COLS_FNS(Q5_0), COLS_FNS(Q5_1) };

/* mul_mat_cols is toy_mul_mat_q32 for m ≤ FEW_COLS columns. */
static void mul_mat_cols(struct ggml_tensor * dst, int ith, int nth) {
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int kind = q32_kind(a->type);
	const int64_t k = a->ne[0], n = a->ne[1], m = b->ne[1], nb = k / 32, npairs = (nb + 1) / 2;
	const size_t stride = a->nb[1];
	const int64_t xs = (int64_t) b->nb[1];
	float * y = (float *) dst->data;
	char * aux = (char *) aligned_alloc(64, (size_t) (m * npairs * AUX_BYTES));
	if (aux == NULL) {
		fprintf(stderr, "toy_mul_mat_q32: out of memory for %lld columns of %lld\n", (long long) m, (long long) k);
		abort();
	}
	make_aux((const char *) b->data, xs, k, m, npairs, offsets[kind], aux);
	/* Chunks of rows, each thread's own region first (mul_mat_cols.c). */
	const int64_t chunk = toy_row_chunk(n, m, COL_GROUP, nth, stride);
	const int64_t chunks = (n + chunk - 1) / chunk;
	const int regions = nth < TOY_REGIONS ? nth : TOY_REGIONS;
	const int64_t per_region = (chunks + regions - 1) / regions;
	for (int i = 0; i < regions; i++) {
		const int r = (ith + i) % regions;
		for (int64_t next = 0;; next++) {
			const int64_t c = r * per_region + (nth > 1 ? toy_claim_in(dst, r) : next);
			if (c >= (r + 1) * per_region || c >= chunks) {
				break;
			}
			const int64_t r0 = c * chunk, r1 = r0 + chunk < n ? r0 + chunk : n;
			for (int64_t j0 = 0; j0 < m; j0 += COL_GROUP) {
				const int mc = (int) (m - j0 < COL_GROUP ? m - j0 : COL_GROUP);
				cols_fns[kind][mc - 1]((const char *) a->data + r0 * stride, stride, r1 - r0, k, (const char *) b->data + j0 * xs,
					xs, aux + j0 * npairs * AUX_BYTES, y + j0 * n + r0, n);
			}
		}
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	free(aux);
}

/* A product is cut into at least this many jobs per thread, and a job takes at least this many
 * columns (packing its rows costs about a column's products). */
enum { JOBS_PER_THREAD = 4, MIN_JOB_COLS = 8 * NR };

void toy_mul_mat_q32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	if (dst->src[1]->ne[1] <= FEW_COLS) {
		mul_mat_cols(dst, ith, nth);
		return;
	}
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int kind = q32_kind(a->type);
	const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], nb = K / 32;
	const int64_t xs = (int64_t) b->nb[1], cs = (int64_t) (dst->nb[1] / sizeof(float));
	const int64_t blocks = (M + BLOCK - 1) / BLOCK;
	int64_t runs = (JOBS_PER_THREAD * (int64_t) nth + blocks - 1) / blocks;
	int64_t jobCols = (N + runs - 1) / runs;
	jobCols = jobCols < MIN_JOB_COLS ? MIN_JOB_COLS : (jobCols + NR - 1) / NR * NR;
	runs = (N + jobCols - 1) / jobCols;
	const int64_t jobs = blocks * runs;
	/* The packed rows: 2048 bytes of values and 2 × 256 of scales a block of the shared
	 * dimension. */
	const size_t qbytes = (size_t) nb * 2048, fbytes = (size_t) nb * BLOCK * sizeof(float);
	char * buf = (char *) aligned_alloc(64, qbytes + 2 * fbytes + 64);
	if (buf == NULL) {
		fprintf(stderr, "toy_mul_mat_q32: out of memory packing 64 rows of %lld values\n", (long long) K);
		abort();
	}
	uint8_t * q = (uint8_t *) buf;
	float * d = (float *) (buf + qbytes), * mn = (float *) (buf + qbytes + fbytes);
	int64_t packed = -1;
	for (int64_t next = 0;; next++) {
		const int64_t job = nth > 1 ? toy_claim(dst) : next;
		if (job >= jobs) {
			break;
		}
		const int64_t blk = job / runs, m0 = blk * BLOCK;
		const int64_t nBegin = (job % runs) * jobCols, nEnd = nBegin + jobCols < N ? nBegin + jobCols : N;
		const int64_t rows = M - m0 < BLOCK ? M - m0 : BLOCK;
		if (blk != packed) {
			pack((const char *) a->data, a->nb[1], kind, m0, rows, nb, q, d, mn);
			packed = blk;
		}
		float * ch = (float *) dst->data;
		if (rows == BLOCK) {
			/* The blocks of the shared dimension in chunks whose packed rows stay in L1, each
			 * chunk over the job's columns, adding to what the last left. */
			for (int64_t kb0 = 0; kb0 < nb; kb0 += KCHUNK) {
				const int64_t kb1 = kb0 + KCHUNK < nb ? kb0 + KCHUNK : nb;
				for (int64_t n0 = nBegin; n0 < nEnd; n0 += NR) {
					const int nc = (int) (nEnd - n0 < NR ? nEnd - n0 : NR);
					tiles_fns[kind](q, d, mn, nb, kb0, kb1, (const char *) b->data + n0 * xs, xs, K, ch + n0 * cs + m0, cs, nc,
						kb0 > 0);
				}
			}
		} else {
			/* The last rows: a tile into scratch rows, the shared dimension whole. */
			for (int64_t n0 = nBegin; n0 < nEnd; n0 += NR) {
				const int nc = (int) (nEnd - n0 < NR ? nEnd - n0 : NR);
				float scratch[BLOCK * NR] __attribute__((aligned(64)));
				tiles_fns[kind](q, d, mn, nb, 0, nb, (const char *) b->data + n0 * xs, xs, K, scratch, BLOCK, nc, 0);
				for (int j = 0; j < nc; j++) {
					memcpy(ch + (n0 + j) * cs + m0, scratch + j * BLOCK, (size_t) rows * sizeof(float));
				}
			}
		}
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	free(buf);
}

#else

/* Without AVX-512 VNNI: the Go layer asks toy_vectorized_q32 and leaves these products to
 * ggml, so this is never called. */
void toy_mul_mat_q32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
}

#endif
