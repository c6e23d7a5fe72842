/*
 * The vector unit toy's CPU kernels use, as the compiler targets it: AVX-512, or AVX2 with F16C
 * and FMA (TOY_VECTOR is 1), LANES floats a vector, with loads of f32, f16, bf16 and int8
 * values, a horizontal sum of LANES vectors at once and the softmax kernels' exponential; where
 * there is neither, TOY_VECTOR is 0 and the kernels are plain loops. Also the scalar conversions
 * of f16 and bf16.
 */
#ifndef TOY_VEC_H
#define TOY_VEC_H

#include <stdint.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))
#define TOY_VECTOR 1
#include <immintrin.h>
#else
#define TOY_VECTOR 0
#endif

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

static inline float bf16_to_float(uint16_t h) {
	union { uint32_t u; float f; } v = { (uint32_t) h << 16 };
	return v.f;
}

/* toy_load16 is the 16 bits at p (little-endian, at any alignment). */
static inline short toy_load16(const char * p) {
	uint16_t v;
	__builtin_memcpy(&v, p, 2);
	return (short) v;
}

/* q8_0's block: an f16 scale and 32 signed bytes (ggml's block_q8_0). */
enum { Q8_0_BLOCK = 32, Q8_0_BYTES = 2 + Q8_0_BLOCK };

/* q8_0_scale is the f16 scale of the q8_0 block at b (little-endian, at any alignment); q5_0's
 * block starts with its scale too. */
static inline float q8_0_scale(const char * b) {
	return half_to_float((uint16_t) toy_load16(b));
}

/* q5_0's block: an f16 scale, 32 high bits, then 16 bytes of low nibbles (ggml's block_q5_0):
 * value j is (its 4 bits | its high bit << 4) − 16, times the scale. */
enum { Q5_0_BLOCK = 32, Q5_0_BYTES = 2 + 4 + 16 };

/* q5_0_high is the 32 high bits of the q5_0 block at b, bit j value j's. */
static inline uint32_t q5_0_high(const char * b) {
	uint32_t h;
	__builtin_memcpy(&h, b + 2, 4);
	return h;
}

#if TOY_VECTOR

#if defined(__AVX512F__)
typedef __m512 vec;
enum { LANES = 16 };
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VLOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p)))
#define VLOADB(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p))), 16))
#define VLOADQ(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (p))))
#define VSETH(p) _mm512_cvtph_ps(_mm256_set1_epi16(toy_load16(p)))
/* VLOADQ5(qs, qh, v0): q5_0 values v0..v0+LANES-1 of a block (v0 a multiple of LANES) as f32,
 * before the scale: the nibbles of qs (low ones for values 0..15, high for 16..31), each with
 * its bit of qh as bit 4, less 16. */
#define VLOADQ5(qs, qh, v0) vloadq5(qs, qh, v0)
static inline __m512 vloadq5(const char * qs, uint32_t qh, int64_t v0) {
	const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (qs + v0 % 16)));
	const __m512i nib = v0 >= 16 ? _mm512_srli_epi32(bytes, 4) : _mm512_and_si512(bytes, _mm512_set1_epi32(15));
	/* less 16 where the high bit is clear: (nib | bit << 4) − 16 */
	const __mmask16 high = (__mmask16) (qh >> v0);
	return _mm512_cvtepi32_ps(_mm512_mask_sub_epi32(nib, (__mmask16) ~high, nib, _mm512_set1_epi32(16)));
}
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSHUF(a, b, imm) _mm512_shuffle_ps(a, b, imm)
#define VSTORE(p, a) _mm512_storeu_ps(p, a)
/* halves(a, b): [a's low 256 bits | b's low 256] + [a's high | b's high], each accumulator's
 * lanes l and l+8 summed; quarters: the same within each half, of four accumulators' halves. */
static inline vec halves(vec a, vec b) {
	return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
static inline vec quarters(vec a, vec b) {
	return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
#else
typedef __m256 vec;
enum { LANES = 8 };
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VLOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p)))
#define VLOADB(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p))), 16))
#define VLOADQ(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) (p))))
#define VSETH(p) _mm256_cvtph_ps(_mm_set1_epi16(toy_load16(p)))
#define VLOADQ5(qs, qh, v0) _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256( \
	(v0) >= 16 ? _mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) ((qs) + (v0) % 16))), 4) \
		: _mm256_and_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) ((qs) + (v0) % 16))), _mm256_set1_epi32(15)), \
	_mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) (qh)), \
		_mm256_add_epi32(_mm256_set1_epi32((int) (v0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))), \
		_mm256_set1_epi32(1)), 4)), _mm256_set1_epi32(16)))
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSHUF(a, b, imm) _mm256_shuffle_ps(a, b, imm)
#define VSTORE(p, a) _mm256_storeu_ps(p, a)
static inline vec quarters(vec a, vec b) {
	return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
#endif

/*
 * vsums stores the sums of the LANES vectors v into out[0..LANES): each vector's lanes are added
 * as a pairwise tree, lane l and l+LANES/2, then l and l+LANES/4, and so on (the order of a
 * single vector's horizontal sum), for all the vectors at once, a level of the tree at a time.
 * That takes about a third of the shuffles and adds of LANES separate sums, and each sum still
 * depends on its own vector only.
 */
static inline __attribute__((always_inline)) void vsums(const vec * v, float * out) {
	vec q[4], p[2];
#if defined(__AVX512F__)
	vec h[8];
	for (int i = 0; i < 8; i++) {
		h[i] = halves(v[2 * i], v[2 * i + 1]);
	}
	for (int i = 0; i < 4; i++) {
		q[i] = quarters(h[2 * i], h[2 * i + 1]);
	}
#else
	for (int i = 0; i < 4; i++) {
		q[i] = quarters(v[2 * i], v[2 * i + 1]);
	}
#endif
	/* Within each 128-bit block, lanes 0+2 and 1+3 of two vectors, then 0+1 of those. */
	for (int i = 0; i < 2; i++) {
		p[i] = VADD(VSHUF(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)), VSHUF(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
	}
	float z[LANES];
	VSTORE(z, VADD(VSHUF(p[0], p[1], _MM_SHUFFLE(2, 0, 2, 0)), VSHUF(p[0], p[1], _MM_SHUFFLE(3, 1, 3, 1))));
	/* The tree leaves vector i's sum in lane 4·(i mod LANES/4) + i div (LANES/4). */
	for (int i = 0; i < LANES; i++) {
		out[i] = z[4 * (i % (LANES / 4)) + i / (LANES / 4)];
	}
}

/* Element-wise helpers of the softmax kernels (attend.c, softmax.c) and of swiglu_back.c. */
#if defined(__AVX512F__)
#define VSET(x) _mm512_set1_ps(x)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define VNEG(a) _mm512_sub_ps(_mm512_setzero_ps(), a)
#define VMIN(a, b) _mm512_min_ps(a, b)
#define VSELECT_GE0(x, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), b, a)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VROUND(a) _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2(n) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#define VKEEP_GE(a, x, lo) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), a)
#define VREDUCE_MAX(a) _mm512_reduce_max_ps(a)
#define VREDUCE_ADD(a) _mm512_reduce_add_ps(a)
#define VALL_LT(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) == 0xffff)
#else
#define VSET(x) _mm256_set1_ps(x)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VNEG(a) _mm256_sub_ps(_mm256_setzero_ps(), a)
#define VMIN(a, b) _mm256_min_ps(a, b)
#define VSELECT_GE0(x, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ))
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VROUND(a) _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2(n) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define VKEEP_GE(a, x, lo) _mm256_and_ps(a, _mm256_cmp_ps(x, lo, _CMP_GE_OQ))
#define VALL_LT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)) == 0xff)
static inline float VREDUCE_ADD(__m256 a) {
	__m128 m = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	m = _mm_add_ps(m, _mm_movehl_ps(m, m));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}
static inline float VREDUCE_MAX(__m256 a) {
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}
#endif

/* vload_q8_0 is values i..i+LANES-1 (i a multiple of LANES) of the row of q8_0 blocks at row,
 * as f32: its block's integers times the block's scale (each product exact in f32). */
static inline __attribute__((always_inline)) vec vload_q8_0(const char * row, int64_t i) {
	const char * b = row + i / Q8_0_BLOCK * Q8_0_BYTES;
	return VMUL(VLOADQ(b + 2 + i % Q8_0_BLOCK), VSETH(b));
}

/*
 * vexp is e^x for x ≤ 0, and 0 below -87 (where e^x is no longer a normal float; a masked
 * cell's -inf is there): e^x = 2^n·e^r with n = round(x·log2 e) and r = x − n·ln 2 (ln 2 in two
 * parts), e^r by its Taylor series to r^7 (|r| ≤ ln 2 / 2: relative error under 2e-8, below
 * float's rounding).
 */
static inline vec vexp(vec x) {
	const vec lo = VSET(-87.0f);
	const vec xc = VMAX(x, lo);
	const vec n = VROUND(VMUL(xc, VSET(1.44269504088896341f)));
	vec r = VFMA(n, VSET(-0.693145751953125f), xc);
	r = VFMA(n, VSET(-1.428606765330187e-06f), r);
	vec p = VSET(1.0f / 5040);
	p = VFMA(p, r, VSET(1.0f / 720));
	p = VFMA(p, r, VSET(1.0f / 120));
	p = VFMA(p, r, VSET(1.0f / 24));
	p = VFMA(p, r, VSET(1.0f / 6));
	p = VFMA(p, r, VSET(0.5f));
	p = VFMA(p, r, VSET(1.0f));
	p = VFMA(p, r, VSET(1.0f));
	return VKEEP_GE(VMUL(p, VPOW2(n)), x, lo);
}

/* Interleaving two vectors by float (VUNPACKLO, VUNPACKHI) and by pairs of floats (…2), within
 * each 128-bit lane. */
#if defined(__AVX512F__)
#define VUNPACKLO(a, b) _mm512_unpacklo_ps(a, b)
#define VUNPACKHI(a, b) _mm512_unpackhi_ps(a, b)
#define VUNPACKLO2(a, b) _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define VUNPACKHI2(a, b) _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#else
#define VUNPACKLO(a, b) _mm256_unpacklo_ps(a, b)
#define VUNPACKHI(a, b) _mm256_unpackhi_ps(a, b)
#define VUNPACKLO2(a, b) _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)))
#define VUNPACKHI2(a, b) _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)))
#endif

/*
 * vtranspose turns the LANES vectors v (rows) into their columns: afterwards v[j] holds the j-th
 * value of every row, in the rows' order. AVX-512: pairs of rows interleaved by float, then
 * by pairs of floats (v[4g + c] then holds, in its 128-bit lane L, value 4L + c of rows
 * 4g..4g+3), then the lanes of four such vectors gathered; AVX2 the same with two lanes.
 */
static inline __attribute__((always_inline)) void vtranspose(vec v[LANES]) {
	vec t[LANES];
	for (int i = 0; i < LANES; i += 2) {
		t[i] = VUNPACKLO(v[i], v[i + 1]);
		t[i + 1] = VUNPACKHI(v[i], v[i + 1]);
	}
	for (int g = 0; g < LANES; g += 4) {
		v[g] = VUNPACKLO2(t[g], t[g + 2]);
		v[g + 1] = VUNPACKHI2(t[g], t[g + 2]);
		v[g + 2] = VUNPACKLO2(t[g + 1], t[g + 3]);
		v[g + 3] = VUNPACKHI2(t[g + 1], t[g + 3]);
	}
#if defined(__AVX512F__)
	/* Value 4L + c of every row: lane L of v[c], v[4 + c], v[8 + c] and v[12 + c]. */
	for (int c = 0; c < 4; c++) {
		const vec lo01 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x44), hi01 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xEE);
		const vec lo23 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x44), hi23 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xEE);
		t[c] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
		t[4 + c] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
		t[8 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
		t[12 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
	}
#else
	/* Value 4L + c of every row: lane L of v[c] and v[4 + c]. */
	for (int c = 0; c < 4; c++) {
		t[c] = _mm256_permute2f128_ps(v[c], v[4 + c], 0x20);
		t[4 + c] = _mm256_permute2f128_ps(v[c], v[4 + c], 0x31);
	}
#endif
	for (int j = 0; j < LANES; j++) {
		v[j] = t[j];
	}
}

#endif /* TOY_VECTOR */

#endif /* TOY_VEC_H */
