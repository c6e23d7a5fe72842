#include <stdint.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "kg_ggml.h"
#include "toy_cpu.h"

/*
 * Each (row, column) dot product runs in its own vector accumulator over the whole row, in the
 * same order whatever the number of columns, then a fixed horizontal sum, then the scalar
 * tail: a column's result does not depend on which other columns share the call.
 */

/* The most columns one pass over a block of rows keeps in registers; more take another pass. */
enum { GROUP = 8 };

/* f16 (IEEE binary16) to f32, for the scalar paths. */
static inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
	return _cvtsh_ss(h);
#else
	const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else { /* subnormal: normalise */
		exp = 113;
		while (!(man & 0x400)) {
			man <<= 1;
			exp--;
		}
		bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
	}
	union { uint32_t u; float f; } v = { bits };
	return v.f;
#endif
}

/* The weight types: a weight's kind is a constant wherever the vector loops load it. */
enum { KIND_F32, KIND_F16, KIND_BF16 };

static inline float bf16_to_float(uint16_t h) {
	union { uint32_t u; float f; } v = { (uint32_t) h << 16 };
	return v.f;
}

static inline float weight_at(const char * row, int kind, int64_t i) {
	switch (kind) {
	case KIND_F16:
		return half_to_float(((const uint16_t *) row)[i]);
	case KIND_BF16:
		return bf16_to_float(((const uint16_t *) row)[i]);
	}
	return ((const float *) row)[i];
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))

#if defined(__AVX512F__)
typedef __m512 vec;
enum { LANES = 16 };
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VLOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p)))
#define VLOADB(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p))), 16))
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
static inline float vsum(vec v) { return _mm512_reduce_add_ps(v); }
#else
typedef __m256 vec;
enum { LANES = 8 };
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VLOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p)))
#define VLOADB(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p))), 16))
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static inline float vsum(vec v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}
#endif

/*
 * rows_cols computes rows [0, rows) of the weights at w (each stride bytes apart) against the
 * M columns at x (each xs floats apart), k long, into y[j*n + r]. The rows are taken as R lanes,
 * each a contiguous run of rows far from the others, one row of each lane at a time: on the
 * machines measured (docs/PERFORMANCE.md) the memory system streams R runs far apart at full
 * speed, but R adjacent rows at less than half. A lane streams its next rows in with software
 * prefetches PF bytes ahead when PF is not 0. KIND, R, M and PF are constants at every call, so
 * the loads are of one kind and the R·M accumulators stay in registers. The rows the lanes
 * leave over are computed one lane of one row at a time.
 */
static inline __attribute__((always_inline)) void rows_cols(const char * w, size_t stride, const int KIND,
		const float * x, int64_t xs, int64_t k, float * y, int64_t n, int64_t rows, const int R, const int M,
		const int PF) {
	const int64_t kv = k - k % LANES;
	const int64_t lane = rows / R;
	for (int64_t t = 0; t < lane; t++) {
		vec acc[4][GROUP];
		for (int q = 0; q < R; q++) {
			for (int j = 0; j < M; j++) {
				acc[q][j] = VZERO();
			}
		}
		for (int64_t i = 0; i < kv; i += LANES) {
			vec wv[4];
			for (int q = 0; q < R; q++) {
				const char * row = w + (q * lane + t) * stride;
				if (PF) {
					_mm_prefetch(row + i * (KIND == KIND_F32 ? 4 : 2) + PF, _MM_HINT_T0);
				}
				wv[q] = KIND == KIND_F16 ? VLOADH((const uint16_t *) row + i)
					: KIND == KIND_BF16 ? VLOADB((const uint16_t *) row + i) : VLOAD((const float *) row + i);
			}
			for (int j = 0; j < M; j++) {
				const vec xv = VLOAD(x + j * xs + i);
				for (int q = 0; q < R; q++) {
					acc[q][j] = VFMA(wv[q], xv, acc[q][j]);
				}
			}
		}
		for (int q = 0; q < R; q++) {
			const int64_t r = q * lane + t;
			for (int j = 0; j < M; j++) {
				float s = vsum(acc[q][j]);
				for (int64_t i = kv; i < k; i++) {
					s += weight_at(w + r * stride, KIND, i) * x[j * xs + i];
				}
				y[j * n + r] = s;
			}
		}
	}
	if (R > 1 && rows > R * lane) {
		rows_cols(w + R * lane * stride, stride, KIND, x, xs, k, y + R * lane, n, rows - R * lane, 1, M, PF);
	}
}

/* rows_m computes rows [0, rows) against M columns, in the lanes and with the prefetches that
 * measured fastest for M (BenchmarkMulMatCols): 2 lanes for one column (memory-bound), 4 for
 * 2 to 4 columns, 2 for more (the accumulators fill the registers), prefetching from 4
 * columns on. */
static inline __attribute__((always_inline)) void rows_m(const char * w, size_t stride, const int KIND,
		const float * x, int64_t xs, int64_t k, float * y, int64_t n, int64_t rows, const int M) {
	rows_cols(w, stride, KIND, x, xs, k, y, n, rows, M == 1 ? 2 : M <= 4 ? 4 : 2, M, M >= 4 ? 8192 : 0);
}

#define TOY_COLS(KIND) \
	switch (m) { \
	case 1: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 1); break; \
	case 2: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 2); break; \
	case 3: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 3); break; \
	case 4: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 4); break; \
	case 5: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 5); break; \
	case 6: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 6); break; \
	case 7: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 7); break; \
	default: rows_m(w, stride, KIND, x, xs, k, y, n, rows, 8); break; \
	}

/* block computes rows [0, rows) of w against m (1..GROUP) columns into y[j*n + r]. */
static void block(const char * w, size_t stride, int kind, const float * x, int64_t xs, int64_t k, float * y,
		int64_t n, int64_t rows, int m) {
	switch (kind) {
	case KIND_F16:
		TOY_COLS(KIND_F16)
		break;
	case KIND_BF16:
		TOY_COLS(KIND_BF16)
		break;
	default:
		TOY_COLS(KIND_F32)
	}
}

int toy_mul_mat_cols_vectorized(void) { return 1; }

#else

/* No vector unit this file knows: a plain loop, for correctness only (the Go layer asks
 * toy_mul_mat_cols_vectorized and leaves the products to ggml). */
static void block(const char * w, size_t stride, int kind, const float * x, int64_t xs, int64_t k, float * y,
		int64_t n, int64_t rows, int m) {
	for (int64_t r = 0; r < rows; r++) {
		for (int j = 0; j < m; j++) {
			float s = 0;
			for (int64_t i = 0; i < k; i++) {
				s += weight_at(w + r * stride, kind, i) * x[j * xs + i];
			}
			y[j * n + r] = s;
		}
	}
}

int toy_mul_mat_cols_vectorized(void) { return 0; }

#endif

void toy_mul_mat_cols(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int kind = a->type == GGML_TYPE_F16 ? KIND_F16 : a->type == GGML_TYPE_BF16 ? KIND_BF16 : KIND_F32;
	const int64_t k = a->ne[0], n = a->ne[1], m = b->ne[1];
	const size_t stride = a->nb[1];
	const int64_t xs = (int64_t) (b->nb[1] / sizeof(float));
	const float * x = (const float *) b->data;
	float * y = (float *) dst->data;
	/* dst is [n, m]: element (row, column) at y[column*n + row]. Each thread takes a
	 * contiguous range of rows (one stream of weights), every column group of it. */
	const int64_t per = (n + nth - 1) / nth;
	const int64_t r0 = ith * per, r1 = r0 + per < n ? r0 + per : n;
	if (r0 >= r1) {
		return;
	}
	for (int64_t j0 = 0; j0 < m; j0 += GROUP) {
		const int mc = (int) (m - j0 < GROUP ? m - j0 : GROUP);
		block((const char *) a->data + r0 * stride, stride, kind, x + j0 * xs, xs, k, y + j0 * n + r0, n, r1 - r0, mc);
	}
}
