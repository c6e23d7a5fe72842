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
// types of the weights it reads (repacked by toy_kquant_repack first).
// toy:kernel mul_mat_kquant types=q4_K,q5_K,q6_K,q4_0,q5_0,q5_1

/*
 * ggml_mul_mat(w, x) for q4_K, q5_K and q6_K weights (and q4_0's, q5_0's and q5_1's, rows of whole blocks of 32), repacked at load into a layout of 16 rows
 * interleaved, and x quantized to 8 bits per block of 256 values as ggml's q8_K quantizes it
 * (same scale, same rounding), so that every product is an integer dot product: VNNI's
 * vpdpbusd multiplies 64 unsigned weight bytes by 64 signed activation bytes and adds each 4
 * into one of 16 int32 lanes, one lane per row of the group. A lane holds 4 consecutive values
 * of one row; the activations' 4 matching bytes are broadcast to every lane, so no horizontal
 * sum is ever needed, and one loaded weight vector serves every column of a tile.
 *
 * The repacked layout, for a weight [k, n] (k a multiple of 256): rows in groups of 16 (the
 * last padded with zero rows), each group's super-blocks of 256 values one after the other,
 * each super-block a chunk of Q4R_BYTES or Q6R_BYTES:
 *
 * q4_K (2368 bytes; ggml's 16 blocks take 2304):
 *   [0, 32)      d of the 16 rows, f16         [32, 64)   dmin of the 16 rows, f16
 *   [64, 192)    scale of sub-block j (32 values) of row r at 64 + 16j + r, a byte (6 bits)
 *   [192, 320)   the mins of sub-blocks 2t and 2t+1 of row r at 192 + 32t + 2r, + 1, bytes
 *   [320, 2368)  the 4-bit values: for sub-block j, group g of 8 values (4 a sub-block), 64
 *                bytes at 320 + 64(4j + g), byte 4r + b holding value 32j + 8g + b of row r in
 *                its low nibble and value 32j + 8g + 4 + b in its high nibble.
 * q5_K (2880 bytes; ggml's 16 blocks take 2816): q4_K's chunk (the low 4 bits of each value),
 *   then at 2368 + 64j the high bits of sub-block j: byte 4r + b holds in bit v the high bit of
 *   the value that 64-byte vector v of the sub-block puts in that byte (v = 2g: group g's low
 *   nibbles, 2g + 1: its high ones).
 * q6_K (3360 bytes, as ggml's 16 blocks):
 *   [0, 32)      d of the 16 rows, f16
 *   [32, 288)    scale of sub-block j (16 values) of row r at 32 + 16j + r, signed byte
 *   [288, 3360)  8 chunks of 32 values, 384 bytes each: 4 groups of 8 values laid out as q4_K's
 *                (the low 4 bits of each 6-bit value), then two 64-byte vectors of the high 2
 *                bits: vector h (values 16h..16h+15 of the chunk) byte 4r + b holds in bits
 *                2s, 2s+1 the high bits of the value that vector s of groups 2h, 2h+1 puts in
 *                that byte (s = 0: group 2h's low nibbles, 1: its high ones, 2, 3: group 2h+1's).
 * q4_0 (288 bytes a block of 32 values, as ggml's 16 blocks; a super-block's J blocks, 8 but
 *   for a row's last values, which may fill J < 8: ggml's rows are of whole blocks only):
 *   [0, 32J)        d of block j (values 32j..32j+31 of the super-block) of row r at 32j + 2r, f16
 *   [32J, 288J)     the 4-bit values, laid out as q4_K's at 320.
 * q5_0 (352 bytes a block, as ggml's 16): d and the low 4 bits of the values as q4_0's, then
 *   at [288J, 352J) their high bits as q5_K's at 2368.
 * q5_1 (384 bytes a block, as ggml's 16): d as q4_0's, then at [32J, 64J) the blocks' m (f16)
 *   as their d, at [64J, 320J) the low 4 bits of the values as q4_0's, at [320J, 384J) their
 *   high bits as q5_K's at 2368.
 *
 * A row's value is d·scale·q − dmin·min (q4_K, q 0..15; q5_K, q 0..31), d·scale·(q − 32) (q6_K, q 0..63)
 * d·(q − 8) (q4_0, q 0..15), d·(q − 16) (q5_0, q 0..31) or d·q + m (q5_1, q 0..31), ggml's. The product of a row with a column x quantized to q8_K (scale dx, bytes xq, the sums
 * of each 16 and 32 bytes) is, per super-block, dx·(d·Σ_j scale_j·(q·xq)_j − dmin·Σ_j
 * min_j·Σxq_j) (q4_K), dx·d·Σ_j scale_j·((q·xq)_j − 32·Σxq_j) (q6_K), all exact in int32: ggml's
 * own integer kernels compute the same sums (their float additions in another order). For q4_0
 * weights the columns are rounded as ggml rounds them for q4_0 (to q8_0: a scale every 32
 * values, its largest magnitude over 127, here an f32 as toy_quantize_q32's; quantize_block_q32)
 * rather than to q8_K, whose one scale every 256 values lets one large value round the other
 * 255 to a few steps; a block j of 32 adds d_j·dx_j·((q·xq)_j − 8·Σxq_j) in f32 (q5_0: less
 * 16·Σxq_j; q5_1: d_j·dx_j·(q·xq)_j + m_j·dx_j·Σxq_j). q5_0 and q5_1 are repacked for the same
 * reason as q4_0 (below): read in place (q5_1 by mul_mat_q32.c, 35.8 GB/s a core from the L3;
 * q5_0 by mul_mat_cols.c) they streamed at about half the repacked rate.
 *
 * q4_0 weights are repacked for the same reason as the k-quants: read in place (mul_mat_q32.c's
 * few-column path) each row's pair of blocks costs about twelve instructions to unpack and scale
 * per 36 bytes, which kept one core at about 30 GB/s from the L3 cache, below what a generation
 * step streams from memory on two; 16 rows interleaved need about three per 36 bytes.
 */

enum { QK = 256, RG = 16, Q4R_BYTES = 2368, Q5R_BYTES = 2880, Q6R_BYTES = 3360, Q40R_BYTES = 2304, Q50R_BYTES = 2816,
	Q51R_BYTES = 3072 };
/* The bytes of one block of 32 values of 16 rows of q4_0, q5_0 and q5_1, repacked. */
enum { Q40R_BLOCK = Q40R_BYTES / 8, Q50R_BLOCK = Q50R_BYTES / 8, Q51R_BLOCK = Q51R_BYTES / 8 };

/* repacked_bytes is the chunk of a super-block of 16 rows of ggml type type. */
static int64_t repacked_bytes(int type) {
	return type == GGML_TYPE_Q4_K ? Q4R_BYTES : type == GGML_TYPE_Q5_K ? Q5R_BYTES : type == GGML_TYPE_Q4_0 ? Q40R_BYTES
		: type == GGML_TYPE_Q5_0 ? Q50R_BYTES : type == GGML_TYPE_Q5_1 ? Q51R_BYTES : Q6R_BYTES;
}

/* The quantized columns: per column and super-block, XB bytes: the 256 bytes, then the f32
 * scale, the 8 sums of 32 bytes as int16, and at XB_BS16 the 16 sums of 16 bytes times 32 as
 * int32 (q6_K's offset). */
enum { XB = 352, XB_D = 256, XB_BS32 = 260, XB_BS16 = 288 };
/* For q4_0 weights (quantize_block_q32) a column's super-block holds the 256 bytes, the 8 sums
 * of 32 at XB_BS32 as for the k-quants, and the 8 blocks' f32 scales at XB_D32. */
enum { XB_D32 = 288 };

/* blocks32 says whether type is one of the block types of 32 values the kernel takes (q4_0,
 * q5_0, q5_1), whose rows may end in a part of a super-block: its chunk holds the blocks there
 * are (the layout above), and the columns' last super-block is quantized with zeros after them. */
static int blocks32(int type) { return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1; }

/* block32_bytes is the repacked bytes of a block of 32 values of 16 rows of the blocks32 type type. */
static int64_t block32_bytes(int type) {
	return type == GGML_TYPE_Q4_0 ? Q40R_BLOCK : type == GGML_TYPE_Q5_0 ? Q50R_BLOCK : Q51R_BLOCK;
}

/* super_blocks is the super-blocks of 256 values a row of k values takes (for q4_0, q5_0 and
 * q5_1 the last may be a part of one). */
static int64_t super_blocks(int64_t k) { return (k + QK - 1) / QK; }

int64_t toy_kquant_bytes(int type, int64_t k, int64_t n) {
	if (k <= 0 || n <= 0 || k % (blocks32(type) ? 32 : QK) != 0 || (type != GGML_TYPE_Q4_K && type != GGML_TYPE_Q5_K &&
			type != GGML_TYPE_Q6_K && !blocks32(type))) {
		return -1;
	}
	if (blocks32(type)) {
		return (n + RG - 1) / RG * (k / 32) * block32_bytes(type);
	}
	return (n + RG - 1) / RG * (k / QK) * repacked_bytes(type);
}

/* ggml's block_q4_K: d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 bytes of nibbles;
 * block_q4_0: d (f16), 16 bytes of nibbles (value i in byte i's low nibble, 16 + i in its high);
 * block_q5_0: d (f16), the 32 high bits (value i's bit i), then q4_0's nibbles;
 * block_q5_1: d, m (f16), the 32 high bits, then q4_0's nibbles. */
enum { Q4K_BYTES = 144, Q5K_BYTES = 176, Q6K_BYTES = 210, Q40_BYTES = 18, Q50_BYTES = 22, Q51_BYTES = 24 };

/* q4_k_scale_min is sub-block j's 6-bit scale and min of the q4_K block's 12 bytes s. */
static void q4_k_scale_min(int j, const uint8_t * s, uint8_t * sc, uint8_t * m) {
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/* q6_k_values writes the 256 6-bit values (0..63) of the q6_K block b to q. */
static void q6_k_values(const uint8_t * b, uint8_t * q) {
	const uint8_t * ql = b, * qh = b + 128;
	for (int half = 0; half < 2; half++) {
		for (int l = 0; l < 32; l++) {
			q[128 * half + l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
			q[128 * half + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
			q[128 * half + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
			q[128 * half + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
		}
		ql += 64;
		qh += 32;
	}
}

/* pack_high5 writes bit 4 of the values q[r][0..32) of the 16 rows as 64 bytes at out: byte
 * 4r + b holds in bit v the high bit of the value that nibble vector v (group v/2, half v%2)
 * puts in that byte (q5_K's, q5_0's and q5_1's high bits). */
static void pack_high5(uint8_t q[RG][32], uint8_t * out) {
	for (int r = 0; r < RG; r++) {
		for (int b = 0; b < 4; b++) {
			uint8_t v = 0;
			for (int vv = 0; vv < 8; vv++) {
				v |= (uint8_t) (((q[r][8 * (vv / 2) + 4 * (vv % 2) + b] >> 4) & 1) << vv);
			}
			out[4 * r + b] = v;
		}
	}
}

/* pack_nibbles writes the 4-bit values q[r][0..32) of the 16 rows (the low 4 bits of each) as
 * 4 groups of 64 bytes at out (the layout above). */
static void pack_nibbles(uint8_t q[RG][32], uint8_t * out) {
	for (int g = 0; g < 4; g++) {
		for (int r = 0; r < RG; r++) {
			for (int b = 0; b < 4; b++) {
				out[64 * g + 4 * r + b] = (q[r][8 * g + b] & 0xF) | (q[r][8 * g + 4 + b] & 0xF) << 4;
			}
		}
	}
}

int toy_kquant_repack(int type, const void * src, int64_t k, int64_t n, void * dst) {
	if (toy_kquant_bytes(type, k, n) < 0) {
		return -1;
	}
	const int64_t S = super_blocks(k), groups = (n + RG - 1) / RG;
	const int q6 = type == GGML_TYPE_Q6_K, q5 = type == GGML_TYPE_Q5_K, q40 = type == GGML_TYPE_Q4_0;
	const int q50 = type == GGML_TYPE_Q5_0, q51 = type == GGML_TYPE_Q5_1, q4 = !q6 && !blocks32(type); /* q4: q4_K or q5_K */
	/* q4_0, q5_0 and q5_1: ggml's block of 32 values, and where the repacked nibbles and high
	 * bits begin, per block of the chunk (the layout above) */
	const int64_t b32 = q40 ? Q40_BYTES : q50 ? Q50_BYTES : Q51_BYTES, nib32 = q51 ? 64 : 32, high32 = q51 ? 320 : 288;
	const int64_t block = q6 ? Q6K_BYTES : q5 ? Q5K_BYTES : blocks32(type) ? 8 * b32 : Q4K_BYTES;
	const int64_t chunk_bytes = repacked_bytes(type);
	const int64_t row_bytes = blocks32(type) ? k / 32 * b32 : S * block;
	uint8_t * out = (uint8_t *) dst;
	for (int64_t g = 0; g < groups; g++) {
		for (int64_t s = 0; s < S; s++) {
			/* q4_0, q5_0 and q5_1: the super-block's J blocks (J < 8 only at the end of a row) */
			const int J = blocks32(type) ? (int) (k / 32 - 8 * s < 8 ? k / 32 - 8 * s : 8) : 8;
			const int64_t pb = blocks32(type) ? block32_bytes(type) : 0;
			uint8_t * c = blocks32(type) ? out + g * (k / 32) * pb + 8 * s * pb : out + (g * S + s) * chunk_bytes;
			memset(c, 0, blocks32(type) ? J * pb : chunk_bytes);
			uint8_t q[RG][QK];
			memset(q, 0, sizeof q);
			for (int r = 0; r < RG && g * RG + r < n; r++) {
				const uint8_t * b = (const uint8_t *) src + (g * RG + r) * row_bytes + s * block;
				if (blocks32(type)) {
					for (int j = 0; j < J; j++) {
						const uint8_t * bj = b + j * b32;
						const uint8_t * qs = bj + (q40 ? 2 : q50 ? 6 : 8);
						uint32_t qh = 0;
						memcpy(c + 32 * j + 2 * r, bj, 2);
						if (q50) {
							memcpy(&qh, bj + 2, 4);
						} else if (q51) {
							memcpy(c + 32 * J + 32 * j + 2 * r, bj + 2, 2);
							memcpy(&qh, bj + 4, 4);
						}
						for (int i = 0; i < 16; i++) {
							q[r][32 * j + i] = (uint8_t) ((qs[i] & 0xF) | ((qh >> i) & 1) << 4);
							q[r][32 * j + 16 + i] = (uint8_t) ((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4);
						}
					}
				} else if (q4) {
					memcpy(c + 2 * r, b, 2);
					memcpy(c + 32 + 2 * r, b + 2, 2);
					for (int j = 0; j < 8; j++) {
						uint8_t sc, m;
						q4_k_scale_min(j, b + 4, &sc, &m);
						c[64 + 16 * j + r] = sc;
						c[192 + 32 * (j / 2) + 2 * r + j % 2] = m;
					}
					/* q5_K: 32 bytes of high bits, then the nibbles; value 64h + l's high bit is
					 * bit 2h of byte l, value 64h + 32 + l's bit 2h + 1 (ggml's dequantizer). */
					const uint8_t * qs = b + (q5 ? 48 : 16), * qh = b + 16;
					for (int h = 0; h < 4; h++) {
						for (int l = 0; l < 32; l++) {
							q[r][64 * h + l] = qs[32 * h + l] & 0xF;
							q[r][64 * h + 32 + l] = qs[32 * h + l] >> 4;
							if (q5) {
								q[r][64 * h + l] |= ((qh[l] >> (2 * h)) & 1) << 4;
								q[r][64 * h + 32 + l] |= ((qh[l] >> (2 * h + 1)) & 1) << 4;
							}
						}
					}
				} else {
					memcpy(c + 2 * r, b + 208, 2);
					for (int j = 0; j < 16; j++) {
						c[32 + 16 * j + r] = b[192 + j];
					}
					q6_k_values(b, q[r]);
				}
			}
			for (int j = 0; j < J; j++) {
				uint8_t sub[RG][32];
				for (int r = 0; r < RG; r++) {
					memcpy(sub[r], q[r] + 32 * j, 32);
				}
				if (blocks32(type)) {
					pack_nibbles(sub, c + nib32 * J + 256 * j);
					if (!q40) {
						pack_high5(sub, c + high32 * J + 64 * j);
					}
					continue;
				}
				if (q4) {
					pack_nibbles(sub, c + 320 + 256 * j);
					if (q5) {
						pack_high5(sub, c + Q4R_BYTES + 64 * j);
					}
					continue;
				}
				uint8_t * chunk = c + 288 + 384 * j;
				pack_nibbles(sub, chunk);
				for (int h = 0; h < 2; h++) {
					for (int r = 0; r < RG; r++) {
						for (int b = 0; b < 4; b++) {
							uint8_t v = 0;
							for (int s4 = 0; s4 < 4; s4++) {
								/* vector s4 of groups 2h, 2h+1: group 2h + s4/2, half s4%2 */
								const int i = 8 * (2 * h + s4 / 2) + 4 * (s4 % 2) + b;
								v |= (uint8_t) ((sub[r][i] >> 4) << (2 * s4));
							}
							chunk[256 + 64 * h + 4 * r + b] = v;
						}
					}
				}
			}
		}
	}
	return 0;
}

/* quantize_block quantizes the 256 values at v as ggml's q8_K does (the scale −max/127 of the
 * value of largest magnitude, the first of equals; values rounded to nearest, at most 127)
 * into XB bytes at o, with the block sums the kernels read. */
static void quantize_block(const float * v, uint8_t * o) {
	int8_t * q = (int8_t *) o;
	float d = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
	const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
	__m512 am = _mm512_setzero_ps();
	for (int i = 0; i < QK; i += 16) {
		am = _mm512_max_ps(am, _mm512_and_ps(_mm512_loadu_ps(v + i), sign));
	}
	const float amax = _mm512_reduce_max_ps(am);
	if (amax == 0) {
		memset(q, 0, QK);
		memset(o + XB_D, 0, XB - XB_D);
		return;
	}
	float max = 0;
	for (int i = 0; i < QK; i += 16) {
		const __mmask16 at = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(v + i), sign), _mm512_set1_ps(amax), _CMP_EQ_OQ);
		if (at) {
			max = v[i + __builtin_ctz(at)];
			break;
		}
	}
	const float iscale = -127.f / max;
	const __m512 is = _mm512_set1_ps(iscale);
	int32_t bs16[16];
	const __m512 magic = _mm512_set1_ps(12582912.f);
	const __m512i mant = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000);
	for (int i = 0; i < QK; i += 16) {
		/* ggml's nearest_int(iscale·x): x·iscale + 1.5·2^23, the integer in the low bits.
		 * Built as ggml is (-O3, GNU C: contracted), the product and the sum are one FMA,
		 * rounded once; so here (rounding the product first moved some values by one: the
		 * logits of a q4_K model by 1e-3, TestKQuantKernelsDecode). */
		const __m512 f = _mm512_fmadd_ps(is, _mm512_loadu_ps(v + i), magic);
		__m512i r = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), mant), bias);
		r = _mm512_min_epi32(r, _mm512_set1_epi32(127));
		_mm_storeu_si128((__m128i *) (q + i), _mm512_cvtepi32_epi8(r));
		bs16[i / 16] = _mm512_reduce_add_epi32(r);
	}
	d = 1 / iscale;
	for (int j = 0; j < 8; j++) {
		const int16_t sum = (int16_t) (bs16[2 * j] + bs16[2 * j + 1]);
		memcpy(o + XB_BS32 + 2 * j, &sum, 2);
	}
	for (int j = 0; j < 16; j++) {
		bs16[j] *= 32;
	}
	memcpy(o + XB_BS16, bs16, sizeof bs16);
#else
	float amax = 0, max = 0;
	for (int i = 0; i < QK; i++) {
		const float a = v[i] < 0 ? -v[i] : v[i];
		if (a > amax) {
			amax = a;
			max = v[i];
		}
	}
	if (amax == 0) {
		memset(q, 0, QK);
	} else {
		const float iscale = -127.f / max;
		for (int i = 0; i < QK; i++) {
			/* ggml's nearest_int, one FMA as ggml is built (above) */
			const float f = __builtin_fmaf(iscale, v[i], 12582912.f);
			int32_t bits;
			memcpy(&bits, &f, 4);
			const int32_t r = (bits & 0x007fffff) - 0x00400000;
			q[i] = (int8_t) (r < 127 ? r : 127);
		}
		d = 1 / iscale;
	}
	for (int j = 0; j < 8; j++) {
		int16_t sum = 0;
		for (int i = 0; i < 32; i++) {
			sum += q[32 * j + i];
		}
		memcpy(o + XB_BS32 + 2 * j, &sum, 2);
	}
	for (int j = 0; j < 16; j++) {
		int32_t sum = 0;
		for (int i = 0; i < 16; i++) {
			sum += q[16 * j + i];
		}
		sum *= 32;
		memcpy(o + XB_BS16 + 4 * j, &sum, 4);
	}
#endif
	memcpy(o + XB_D, &d, 4);
}

/* quantize_block_q32 quantizes the 256 values at v as 8 blocks of 32, as toy_quantize_q32 does
 * (mul_mat_q32.c: each block's scale its largest magnitude over 127, in f32, values rounded to
 * nearest, ties to even), into XB bytes at o: the bytes, their sums and the scales. */
static void quantize_block_q32(const float * v, uint8_t * o) {
	for (int j = 0; j < 8; j++) {
		const float * x = v + 32 * j;
		float amax = 0;
		for (int i = 0; i < 32; i++) {
			const float a = x[i] < 0 ? -x[i] : x[i];
			amax = a > amax ? a : amax;
		}
		const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
		int32_t sum = 0;
		for (int i = 0; i < 32; i++) {
			const int q = (int) nearbyintf(x[i] * id);
			o[32 * j + i] = (uint8_t) (int8_t) (q > 127 ? 127 : q < -127 ? -127 : q);
			sum += (int8_t) o[32 * j + i];
		}
		const int16_t s16 = (int16_t) sum;
		memcpy(o + XB_BS32 + 2 * j, &s16, 2);
		memcpy(o + XB_D32 + 4 * j, &d, 4);
	}
}

/* quantize_column quantizes the k values at x block by block into super_blocks(k) blocks
 * of XB bytes at out, for weights of ggml type type (k a multiple of 256, or of 32 for q4_0,
 * q5_0 and q5_1, whose last super-block is quantized with zeros after the column's values). */
static void quantize_column(const float * x, int64_t k, int type, uint8_t * out) {
	for (int64_t s = 0; s < k / QK; s++) {
		(blocks32(type) ? quantize_block_q32 : quantize_block)(x + s * QK, out + s * XB);
	}
	if (k % QK != 0) {
		float last[QK] = { 0 };
		memcpy(last, x + k / QK * QK, (size_t) (k % QK) * sizeof(float));
		quantize_block_q32(last, out + k / QK * XB);
	}
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define KQUANT_FAST 1

static inline int32_t load32(const uint8_t * p) {
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* ACCS(NC) is the accumulators a tile of NC columns keeps for each: a chain of dependent
 * vpdpbusd waits for each one's result, so up to 4 columns split their sums over 4 or 2
 * (sums of the same integers: the result does not change). One column of q4_K weights beyond
 * the L3 cache streamed at 12 GB/s a core with one accumulator, 29-32 with four
 * (BenchmarkMulMatKQuant, processor time, 2026-12-06). */
/* PF_KQUANT and PF_BLOCKS32 are how far ahead of a super-block one or two columns prefetch the
 * weights, every line of the chunk, for the k-quants (tile_q45, tile_q6) and the blocks of 32
 * (tile_q32r). Wall clock, one column, two threads, matrices of the 1B shape (2048×8192 and
 * 8192×2048) filling 8× the L3 cache or more, distances alternating in one process, 12-14
 * rounds (2026-12-06, an idle machine): q4_K 4 KiB 1.05-1.06× 8 KiB (medians of two sittings),
 * q6_K 1.03×, q4_0 0.98-0.99×; a llama3.2-1b Q6_K step in the rounds the DRAM measure read 48-57
 * GB/s, 4 KiB 1.07× 8 KiB (12 of 14 rounds faster). The 8 KiB taken before was tuned on 75 MB
 * of q4_K, which the 32 MiB L3 partly served (BenchmarkMulMatStep's comment). */
enum { PF_KQUANT = 4096, PF_BLOCKS32 = 8192 };

#define ACCS(NC) ((NC) == 1 ? 4 : (NC) <= 4 ? 2 : 1)
/* The tiles declare their accumulators acc[4][8] and use ACCS(NC) of them: NC is a const
 * parameter, not a constant expression, so acc[ACCS(NC)][8] was a variable-length array, which
 * gcc 12 allocated on the stack for every sub-block and stored each accumulator into (about 20
 * instructions of tile_q4_1's 121, 23 of tile_q6_1's 135). Without them the tiles stream at the
 * same rate (in the L3 and from memory, 10 rounds alternating, 2026-12-06): the memory side
 * holds them, not their instructions. */
/* ACCS6(NC) is ACCS for q6_K, whose sub-blocks of 16 values give each column 4 vpdpbusd, not
 * q4_K's 8: with 4 accumulators one column's chains were one instruction long, and 2 make the
 * same sums with 2 fewer additions a sub-block. One column, two threads, 2048×8192 and 8192×2048
 * q6_K filling 8× the L3 (10 rounds alternating, 2026-12-06): 1.037× (median); a llama3.2-1b
 * Q6_K step, 16 rounds: 1.02×. */
#define ACCS6(NC) ((NC) <= 4 ? 2 : 1)

/* acc_sum is the sum of column c's accumulators. */
static inline __attribute__((always_inline)) __m512i acc_sum(__m512i acc[][8], int c, const int A) {
	__m512i s = acc[0][c];
	for (int a = 1; a < A; a++) {
		s = _mm512_add_epi32(s, acc[a][c]);
	}
	return s;
}

/* q5_high moves bit v (0..7) of each byte of h to bit 4 (the other bits left for the
 * caller's mask). */
static inline __m512i q5_high(__m512i h, const int v) {
	return v < 4 ? _mm512_slli_epi16(h, 4 - v) : v == 4 ? h : _mm512_srli_epi16(h, v - 4);
}

/*
 * dot32 sums one sub-block of 32 values of the 16 rows against NC columns into acc (ACCS(NC)
 * accumulators a column, zeroed first): the nibbles of its 4 vectors of 64 bytes at q, their
 * high bits (H5) in hv as q5_high takes them, against the columns' bytes at xb + c·xs + 32j.
 */
static inline __attribute__((always_inline)) void dot32(__m512i acc[][8], const uint8_t * q, __m512i hv, const int H5,
		const uint8_t * xb, int64_t xs, int j, const int NC) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
	for (int a = 0; a < ACCS(NC); a++) {
		for (int c = 0; c < NC; c++) {
			acc[a][c] = _mm512_setzero_si512();
		}
	}
	for (int g = 0; g < 4; g++) {
		const __m512i v = _mm512_loadu_si512(q + 64 * g);
		__m512i lo = _mm512_and_si512(v, m4);
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
		if (H5) {
			/* bit 2g (2g + 1) of each byte to bit 4: lo | (shifted & 0x10) */
			lo = _mm512_ternarylogic_epi32(lo, q5_high(hv, 2 * g), m10, 0xF8);
			hi = _mm512_ternarylogic_epi32(hi, q5_high(hv, 2 * g + 1), m10, 0xF8);
		}
		const int a0 = (2 * g) % ACCS(NC), a1 = (2 * g + 1) % ACCS(NC);
		for (int c = 0; c < NC; c++) {
			const uint8_t * xc = xb + c * xs + 32 * j + 8 * g;
			acc[a0][c] = _mm512_dpbusd_epi32(acc[a0][c], lo, _mm512_set1_epi32(load32(xc)));
			acc[a1][c] = _mm512_dpbusd_epi32(acc[a1][c], hi, _mm512_set1_epi32(load32(xc + 4)));
		}
	}
}

/*
 * tile_q45 computes rows [16g, 16g + 16) (the group at w: S chunks) against the NC columns at
 * xq (column c's blocks at xq + c·xs), into y[c·ys + r] (a mask of the rows that exist).
 */
static inline __attribute__((always_inline)) void tile_q45(const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs,
		float * y, int64_t ys, __mmask16 rows, const int NC, const int Q5) {
	const int CH = Q5 ? Q5R_BYTES : Q4R_BYTES;
	__m512 facc[8];
	for (int c = 0; c < NC; c++) {
		facc[c] = _mm512_setzero_ps();
	}
	for (int64_t s = 0; s < S; s++) {
		const uint8_t * b = w + s * CH;
		const uint8_t * xb = xq + s * XB;
		if (NC <= 2) {
			for (int l = 0; l < CH; l += 64) {
				_mm_prefetch((const char *) b + PF_KQUANT + l, _MM_HINT_T0);
			}
		}
		__m512i sb[8];
		for (int c = 0; c < NC; c++) {
			sb[c] = _mm512_setzero_si512();
		}
		for (int j = 0; j < 8; j++) {
			const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b + 64 + 16 * j)));
			__m512i acc[4][8]; /* ACCS(NC) of them used (see ACCS) */
			const __m512i hv = Q5 ? _mm512_loadu_si512(b + Q4R_BYTES + 64 * j) : _mm512_setzero_si512();
			dot32(acc, b + 320 + 256 * j, hv, Q5, xb, xs, j, NC);
			for (int c = 0; c < NC; c++) {
				sb[c] = _mm512_add_epi32(sb[c], _mm512_mullo_epi32(acc_sum(acc, c, ACCS(NC)), sc));
			}
		}
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) b));
		const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (b + 32)));
		__m512i mp[4];
		for (int t = 0; t < 4; t++) {
			mp[t] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *) (b + 192 + 32 * t)));
		}
		for (int c = 0; c < NC; c++) {
			const uint8_t * xc = xb + c * xs;
			__m512i mins = _mm512_setzero_si512();
			for (int t = 0; t < 4; t++) {
				mins = _mm512_dpwssd_epi32(mins, mp[t], _mm512_set1_epi32(load32(xc + XB_BS32 + 4 * t)));
			}
			float dx;
			memcpy(&dx, xc + XB_D, 4);
			const __m512 f = _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(sb[c]), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(mins)));
			facc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), f, facc[c]);
		}
	}
	for (int c = 0; c < NC; c++) {
		_mm512_mask_storeu_ps(y + c * ys, rows, facc[c]);
	}
}

/* The high 2 bits of vector s (0..3) of a q6_K half-chunk's hi vector h, moved to bits 4 and
 * 5 of each byte (the other bits left for the caller's mask). */
static inline __m512i q6_high(__m512i h, const int s) {
	return s == 0 ? _mm512_slli_epi16(h, 4) : s == 1 ? _mm512_slli_epi16(h, 2) : s == 2 ? h : _mm512_srli_epi16(h, 2);
}

#define tile_q4(w, S, xq, xs, y, ys, rows, NC) tile_q45(w, S, xq, xs, y, ys, rows, NC, 0)
#define tile_q5(w, S, xq, xs, y, ys, rows, NC) tile_q45(w, S, xq, xs, y, ys, rows, NC, 1)

/* tile_q6 is tile_q45 for q6_K. */
static inline __attribute__((always_inline)) void tile_q6(const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs,
		float * y, int64_t ys, __mmask16 rows, const int NC) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
	__m512 facc[8];
	for (int c = 0; c < NC; c++) {
		facc[c] = _mm512_setzero_ps();
	}
	for (int64_t s = 0; s < S; s++) {
		const uint8_t * b = w + s * Q6R_BYTES;
		const uint8_t * xb = xq + s * XB;
		if (NC <= 2) {
			for (int l = 0; l < Q6R_BYTES; l += 64) {
				_mm_prefetch((const char *) b + PF_KQUANT + l, _MM_HINT_T0);
			}
		}
		__m512i sb[8];
		for (int c = 0; c < NC; c++) {
			sb[c] = _mm512_setzero_si512();
		}
		for (int ch = 0; ch < 8; ch++) {
			const uint8_t * q = b + 288 + 384 * ch;
			for (int h = 0; h < 2; h++) {
				const int j = 2 * ch + h;
				const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (b + 32 + 16 * j)));
				const __m512i hv = _mm512_loadu_si512(q + 256 + 64 * h);
				__m512i acc[4][8]; /* ACCS6(NC) of them used (a constant bound: see ACCS) */
				for (int a = 0; a < ACCS6(NC); a++) {
					for (int c = 0; c < NC; c++) {
						acc[a][c] = _mm512_setzero_si512();
					}
				}
				for (int gg = 0; gg < 2; gg++) {
					const int g = 2 * h + gg;
					const __m512i v = _mm512_loadu_si512(q + 64 * g);
					/* lo | (high bits & 0x30): vpternlogd's A | (B & C) */
					const __m512i q0 = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), q6_high(hv, 2 * gg), m30, 0xF8);
					const __m512i q1 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
						q6_high(hv, 2 * gg + 1), m30, 0xF8);
					const int a0 = (2 * gg) % ACCS6(NC), a1 = (2 * gg + 1) % ACCS6(NC);
					for (int c = 0; c < NC; c++) {
						const uint8_t * xc = xb + c * xs + 32 * ch + 8 * g;
						acc[a0][c] = _mm512_dpbusd_epi32(acc[a0][c], q0, _mm512_set1_epi32(load32(xc)));
						acc[a1][c] = _mm512_dpbusd_epi32(acc[a1][c], q1, _mm512_set1_epi32(load32(xc + 4)));
					}
				}
				for (int c = 0; c < NC; c++) {
					const __m512i off = _mm512_set1_epi32(load32(xb + c * xs + XB_BS16 + 4 * j));
					sb[c] = _mm512_add_epi32(sb[c], _mm512_mullo_epi32(_mm512_sub_epi32(acc_sum(acc, c, ACCS6(NC)), off), sc));
				}
			}
		}
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) b));
		for (int c = 0; c < NC; c++) {
			float dx;
			memcpy(&dx, xb + c * xs + XB_D, 4);
			facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(sb[c]), facc[c]);
		}
	}
	for (int c = 0; c < NC; c++) {
		_mm512_mask_storeu_ps(y + c * ys, rows, facc[c]);
	}
}

/* The blocks of 32 values tile_q32r reads: q4_0, q5_0 (high bits, no m) and q5_1. */
enum { R40, R50, R51 };

/* tile_q32r is tile_q45 for q4_0, q5_0 and q5_1 (KIND), over NB blocks of 32 values (where the
 * others take S super-blocks): per block j of a super-block, the 16 rows' integer sums scaled by
 * the rows' d times the column's, less 8 (q4_0) or 16 (q5_0) times the column's sum of the block,
 * or plus the rows' m times it (q5_1). */
static inline __attribute__((always_inline)) void tile_q32r(const uint8_t * w, int64_t NB, const uint8_t * xq, int64_t xs,
		float * y, int64_t ys, __mmask16 rows, const int NC, const int KIND) {
	const int Q51 = KIND == R51, H5 = KIND != R40, OFF = KIND == R40 ? 8 : 16, HIGH = Q51 ? 320 : 288;
	const int PB = KIND == R40 ? Q40R_BLOCK : KIND == R50 ? Q50R_BLOCK : Q51R_BLOCK;
	__m512 facc[8];
	for (int c = 0; c < NC; c++) {
		facc[c] = _mm512_setzero_ps();
	}
	for (int64_t s = 0; 8 * s < NB; s++) {
		const int J = NB - 8 * s < 8 ? (int) (NB - 8 * s) : 8, QS = (Q51 ? 64 : 32) * J;
		const uint8_t * b = w + 8 * s * PB;
		const uint8_t * xb = xq + s * XB;
		if (NC <= 2) {
			for (int l = 0; l < J * PB; l += 64) {
				_mm_prefetch((const char *) b + PF_BLOCKS32 + l, _MM_HINT_T0);
			}
		}
		for (int j = 0; j < J; j++) {
			const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (b + 32 * j)));
			const __m512 mn = Q51 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (b + 32 * J + 32 * j))) : d;
			const __m512i hv = H5 ? _mm512_loadu_si512(b + HIGH * J + 64 * j) : _mm512_setzero_si512();
			__m512i acc[4][8]; /* ACCS(NC) of them used (see ACCS) */
			dot32(acc, b + QS + 256 * j, hv, H5, xb, xs, j, NC);
			for (int c = 0; c < NC; c++) {
				int16_t bs;
				float dx;
				memcpy(&bs, xb + c * xs + XB_BS32 + 2 * j, 2);
				memcpy(&dx, xb + c * xs + XB_D32 + 4 * j, 4);
				const __m512 dxb = _mm512_set1_ps(dx);
				if (Q51) {
					facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, dxb), _mm512_cvtepi32_ps(acc_sum(acc, c, ACCS(NC))), facc[c]);
					facc[c] = _mm512_fmadd_ps(mn, _mm512_set1_ps(dx * (float) bs), facc[c]);
				} else {
					const __m512i sum = _mm512_sub_epi32(acc_sum(acc, c, ACCS(NC)), _mm512_set1_epi32(OFF * (int32_t) bs));
					facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, dxb), _mm512_cvtepi32_ps(sum), facc[c]);
				}
			}
		}
	}
	for (int c = 0; c < NC; c++) {
		_mm512_mask_storeu_ps(y + c * ys, rows, facc[c]);
	}
}
#define tile_q40(w, S, xq, xs, y, ys, rows, NC) tile_q32r(w, S, xq, xs, y, ys, rows, NC, R40)
#define tile_q50(w, S, xq, xs, y, ys, rows, NC) tile_q32r(w, S, xq, xs, y, ys, rows, NC, R50)
#define tile_q51(w, S, xq, xs, y, ys, rows, NC) tile_q32r(w, S, xq, xs, y, ys, rows, NC, R51)

#define TILE_FN(NAME, TILE, NC) \
	static __attribute__((noinline)) void NAME(const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs, float * y, \
			int64_t ys, __mmask16 rows) { \
		TILE(w, S, xq, xs, y, ys, rows, NC); \
	}
#define TILE_FNS(TILE) TILE_FN(TILE##_1, TILE, 1) TILE_FN(TILE##_2, TILE, 2) TILE_FN(TILE##_3, TILE, 3) \
	TILE_FN(TILE##_4, TILE, 4) TILE_FN(TILE##_5, TILE, 5) TILE_FN(TILE##_6, TILE, 6) TILE_FN(TILE##_7, TILE, 7) \
	TILE_FN(TILE##_8, TILE, 8)
TILE_FNS(tile_q4)
TILE_FNS(tile_q5)
TILE_FNS(tile_q6)
TILE_FNS(tile_q40)
TILE_FNS(tile_q50)
TILE_FNS(tile_q51)

typedef void (*tile_fn)(const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs, float * y, int64_t ys, __mmask16 rows);
static const tile_fn tiles_q4[8] = { tile_q4_1, tile_q4_2, tile_q4_3, tile_q4_4, tile_q4_5, tile_q4_6, tile_q4_7, tile_q4_8 };
static const tile_fn tiles_q5[8] = { tile_q5_1, tile_q5_2, tile_q5_3, tile_q5_4, tile_q5_5, tile_q5_6, tile_q5_7, tile_q5_8 };
static const tile_fn tiles_q6[8] = { tile_q6_1, tile_q6_2, tile_q6_3, tile_q6_4, tile_q6_5, tile_q6_6, tile_q6_7, tile_q6_8 };
static const tile_fn tiles_q40[8] = { tile_q40_1, tile_q40_2, tile_q40_3, tile_q40_4, tile_q40_5, tile_q40_6, tile_q40_7,
	tile_q40_8 };
static const tile_fn tiles_q50[8] = { tile_q50_1, tile_q50_2, tile_q50_3, tile_q50_4, tile_q50_5, tile_q50_6, tile_q50_7,
	tile_q50_8 };
static const tile_fn tiles_q51[8] = { tile_q51_1, tile_q51_2, tile_q51_3, tile_q51_4, tile_q51_5, tile_q51_6, tile_q51_7,
	tile_q51_8 };

/* tile computes one group's rows against nc (1..8) columns. */
static void tile(int type, const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs, float * y, int64_t ys, int64_t rows, int nc) {
	const __mmask16 mask = rows >= RG ? (__mmask16) 0xFFFF : (__mmask16) ((1u << rows) - 1);
	(type == GGML_TYPE_Q4_K ? tiles_q4 : type == GGML_TYPE_Q5_K ? tiles_q5 : type == GGML_TYPE_Q4_0 ? tiles_q40
		: type == GGML_TYPE_Q5_0 ? tiles_q50 : type == GGML_TYPE_Q5_1 ? tiles_q51 : tiles_q6)[nc - 1](w, S, xq, xs, y, ys, mask);
}

#else
#define KQUANT_FAST 0

/* No VNNI: the same integer sums, one value at a time (correct, slow: the Go layer asks
 * toy_kquant_fast and leaves such weights to ggml). */
static void tile(int type, const uint8_t * w, int64_t S, const uint8_t * xq, int64_t xs, float * y, int64_t ys, int64_t rows, int nc) {
	const int q40 = type == GGML_TYPE_Q4_0, q50 = type == GGML_TYPE_Q5_0, q51 = type == GGML_TYPE_Q5_1;
	const int q4 = type != GGML_TYPE_Q6_K && !blocks32(type), q5 = type == GGML_TYPE_Q5_K;
	const int ch = (int) repacked_bytes(type);
	for (int c = 0; c < nc; c++) {
		for (int64_t r = 0; r < rows; r++) {
			float sum = 0;
			for (int64_t s = 0; s < S; s++) {
				const uint8_t * xb = xq + c * xs + s * XB;
				const int8_t * xv = (const int8_t *) xb;
				float dx;
				memcpy(&dx, xb + XB_D, 4);
				if (blocks32(type)) {
					/* S is the row's blocks of 32 here (tile_q32r) */
					if (8 * s >= S) {
						break;
					}
					const int J = S - 8 * s < 8 ? (int) (S - 8 * s) : 8;
					const uint8_t * b = w + 8 * s * block32_bytes(type);
					for (int j = 0; j < J; j++) {
						int32_t dot = 0, xsum = 0;
						for (int i = 0; i < 32; i++) {
							const int g = i / 8, hi = i % 8 >= 4, bb = i % 4;
							const uint8_t byte = b[(q51 ? 64 : 32) * J + 64 * (4 * j + g) + 4 * r + bb];
							const int h5 = !q40 ? (b[(q51 ? 320 : 288) * J + 64 * j + 4 * r + bb] >> (2 * g + hi)) & 1 : 0;
							dot += (((hi ? byte >> 4 : byte & 0xF) | h5 << 4) - (q40 ? 8 : q50 ? 16 : 0)) * xv[32 * j + i];
							xsum += xv[32 * j + i];
						}
						float dxj;
						memcpy(&dxj, xb + XB_D32 + 4 * j, 4);
						sum += half_to_float((uint16_t) toy_load16((const char *) b + 32 * j + 2 * r)) * dxj * (float) dot;
						if (q51) {
							sum += half_to_float((uint16_t) toy_load16((const char *) b + 32 * J + 32 * j + 2 * r)) * dxj * (float) xsum;
						}
					}
				} else if (q4) {
					const uint8_t * b = w + s * ch;
					int32_t sb = 0, mins = 0;
					for (int j = 0; j < 8; j++) {
						int32_t dot = 0, xsum = 0;
						for (int i = 0; i < 32; i++) {
							const int g = i / 8, hi = i % 8 >= 4, bb = i % 4;
							const uint8_t byte = b[320 + 64 * (4 * j + g) + 4 * r + bb];
							const int h5 = q5 ? (b[Q4R_BYTES + 64 * j + 4 * r + bb] >> (2 * g + hi)) & 1 : 0;
							dot += ((hi ? byte >> 4 : byte & 0xF) | h5 << 4) * xv[32 * j + i];
							xsum += xv[32 * j + i];
						}
						sb += dot * b[64 + 16 * j + r];
						mins += xsum * b[192 + 32 * (j / 2) + 2 * r + j % 2];
					}
					sum += dx * (half_to_float((uint16_t) toy_load16((const char *) b + 2 * r)) * (float) sb -
						half_to_float((uint16_t) toy_load16((const char *) b + 32 + 2 * r)) * (float) mins);
				} else {
					const uint8_t * b = w + s * ch;
					int32_t sb = 0;
					for (int j = 0; j < 16; j++) {
						int32_t dot = 0;
						for (int i = 0; i < 16; i++) {
							const int v = 16 * j + i, ch = v / 32, vi = v % 32, g = vi / 8, hi = vi % 8 >= 4, bb = vi % 4;
							const uint8_t byte = b[288 + 384 * ch + 64 * g + 4 * r + bb];
							const int s4 = 2 * (g % 2) + hi;
							const uint8_t hb = b[288 + 384 * ch + 256 + 64 * (g / 2) + 4 * r + bb];
							const int q = (hi ? byte >> 4 : byte & 0xF) | ((hb >> (2 * s4)) & 3) << 4;
							dot += (q - 32) * xv[v];
						}
						sb += dot * (int8_t) b[32 + 16 * j + r];
					}
					sum += dx * half_to_float((uint16_t) toy_load16((const char *) b + 2 * r)) * (float) sb;
				}
			}
			y[c * ys + r] = sum;
		}
	}
}
#endif

int toy_kquant_fast(void) { return KQUANT_FAST; }

/* The tile's columns at most, and a prompt's jobs: a group of rows against a run of at most
 * RUN columns. Up to COLS_MAX columns (generation) the threads take runs of groups instead,
 * each pass over a group's weights computing every column. */
enum { NC_MAX = 8, RUN = 64, COLS_MAX = 8, CHUNKS_PER_THREAD = 4 };

/* The quantized columns of at most this many bytes are kept on the stack (a thread's stack may
 * be as small as musl's 128 KiB), more on the heap. */
enum { STACK_X = 32 << 10 };

void toy_mul_mat_kquant(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct toy_kquant_params * p = (const struct toy_kquant_params *) userdata;
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int64_t bytes = p == NULL ? -1 : toy_kquant_bytes(p->type, p->k, p->n);
	if (p == NULL || p->magic != KQUANT_MAGIC || bytes < 0 || a->type != GGML_TYPE_I8 || a->ne[0] != bytes ||
			a->ne[1] * a->ne[2] * a->ne[3] != 1 || b->ne[0] != p->k || b->nb[0] != sizeof(float) ||
			dst->ne[0] != p->n || dst->ne[1] != b->ne[1]) {
		fprintf(stderr, "toy_mul_mat_kquant: the weights are not a repacked k-quant matrix of this shape\n");
		abort();
	}
	const int type = p->type;
	const int64_t k = p->k, n = p->n, m = b->ne[1], S = super_blocks(k), groups = (n + RG - 1) / RG;
	/* A group's bytes, and what the tiles count in: super-blocks, or blocks of 32 for q4_0, q5_0
	 * and q5_1 (tile_q32r). */
	const int64_t chunk_bytes = toy_kquant_bytes(type, k, RG), units = blocks32(type) ? k / 32 : S;
	const int64_t xs = S * XB;

	/* Each thread quantizes every column for itself: k·m values against k·n·m products; a
	 * generation step's few columns on the stack. */
	uint8_t stack[STACK_X] __attribute__((aligned(64)));
	uint8_t * xq = m * xs <= STACK_X ? stack : (uint8_t *) aligned_alloc(64, (size_t) ((m * xs + 63) / 64 * 64));
	if (xq == NULL) {
		fprintf(stderr, "toy_mul_mat_kquant: out of memory quantizing %lld columns of %lld\n", (long long) m, (long long) k);
		abort();
	}
	for (int64_t c = 0; c < m; c++) {
		quantize_column((const float *) ((const char *) b->data + c * b->nb[1]), k, type, xq + c * xs);
	}
	const uint8_t * w = (const uint8_t *) a->data;
	float * y = (float *) dst->data;
	const int64_t ys = (int64_t) (dst->nb[1] / sizeof(float));
	if (m <= COLS_MAX) {
		/* Generation: runs of groups, every column in one pass over the weights. The runs
		 * fall into regions of consecutive rows, one a thread (threads share them past
		 * TOY_REGIONS); each thread takes its own region's runs in order, then the others'
		 * (toy_claim_in), so that while the threads keep pace each streams its own region,
		 * far from the others' (mul_mat_cols.c's finding). */
		const int64_t per = (groups + (int64_t) nth * CHUNKS_PER_THREAD - 1) / ((int64_t) nth * CHUNKS_PER_THREAD);
		const int64_t jobs = (groups + per - 1) / per;
		const int regions = nth < TOY_REGIONS ? nth : TOY_REGIONS;
		const int64_t per_region = (jobs + regions - 1) / regions;
		for (int i = 0; i < regions; i++) {
			const int r = (ith + i) % regions;
			for (int64_t next = 0;; next++) {
				const int64_t job = r * per_region + (nth > 1 ? toy_claim_in(dst, r) : next);
				if (job >= (r + 1) * per_region || job >= jobs) {
					break;
				}
				for (int64_t g = job * per; g < groups && g < (job + 1) * per; g++) {
					const int64_t rows = n - g * RG < RG ? n - g * RG : RG;
					tile(type, w + g * chunk_bytes, units, xq, xs, y + g * RG, ys, rows, (int) m);
				}
			}
		}
	} else {
		/* A prompt: (group, run of columns) jobs, tiles of NC_MAX columns. */
		const int64_t runs = (m + RUN - 1) / RUN, jobs = groups * runs;
		for (int64_t next = 0;; next++) {
			const int64_t job = nth > 1 ? toy_claim(dst) : next;
			if (job >= jobs) {
				break;
			}
			const int64_t g = job / runs, c0 = (job % runs) * RUN, c1 = c0 + RUN < m ? c0 + RUN : m;
			const int64_t rows = n - g * RG < RG ? n - g * RG : RG;
			for (int64_t c = c0; c < c1; c += NC_MAX) {
				const int nc = (int) (c1 - c < NC_MAX ? c1 - c : NC_MAX);
				tile(type, w + g * chunk_bytes, units, xq + c * xs, xs, y + c * ys + g * RG, ys, rows, nc);
			}
		}
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	if (xq != stack) {
		free(xq);
	}
}
