#include <stdint.h>
#include <string.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_rows.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel store_transposed types=f16,f32

/* f32 to f16 (IEEE binary16), rounded to nearest even, as ggml's set_rows converts. */
static inline uint16_t float_to_half(float f) {
#if defined(__F16C__)
	return (uint16_t) _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	const uint16_t sign = (uint16_t) ((x >> 16) & 0x8000);
	const uint32_t abs = x & 0x7fffffffu;
	if (abs > 0x7f800000u) {
		return sign | 0x7e00; /* NaN */
	}
	if (abs >= 0x477ff000u) {
		return sign | 0x7c00; /* rounds to infinity */
	}
	if (abs < 0x38800000u) { /* a subnormal half, or zero */
		if (abs < 0x33000000u) {
			return sign;
		}
		const uint32_t exp = abs >> 23, man = (abs & 0x7fffff) | 0x800000;
		const int shift = (int) (126 - exp); /* 14..24 */
		uint32_t h = man >> shift;
		const uint32_t rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1))) {
			h++;
		}
		return sign | (uint16_t) h;
	}
	uint32_t h = ((abs >> 13) - (112u << 10));
	const uint32_t rest = abs & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) {
		h++;
	}
	return sign | (uint16_t) h;
#endif
}

/* How many channels ahead of the one it writes a thread prefetches the lines of. */
enum { AHEAD = 8 };

void toy_store_transposed(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * v = dst->src[1];
	const int32_t * cell = (const int32_t *) dst->src[2]->data;
	const int64_t C = dst->ne[1], n = v->ne[1];
	const size_t row = dst->nb[1], es = dst->nb[0], vs = v->nb[1];
	const int f16 = dst->type == GGML_TYPE_F16;
	char * base = (char *) dst->data;
	const char * vals = (const char *) v->data;
	/* Each thread takes a contiguous share of the channels (the cache's rows). */
	int64_t c0, c1;
	toy_row_share(C, ith, nth, &c0, &c1);
	for (int64_t c = c0; c < c0 + AHEAD && c < c1; c++) {
		for (int64_t t = 0; t < n; t++) {
			__builtin_prefetch(base + c * row + (size_t) cell[t] * es, 1);
		}
	}
	for (int64_t c = c0; c < c1; c++) {
		if (c + AHEAD < c1) {
			for (int64_t t = 0; t < n; t++) {
				__builtin_prefetch(base + (c + AHEAD) * row + (size_t) cell[t] * es, 1);
			}
		}
		char * r = base + c * row;
		for (int64_t t = 0; t < n; t++) {
			const float x = *(const float *) (vals + t * vs + c * (int64_t) sizeof(float));
			if (f16) {
				((uint16_t *) r)[cell[t]] = float_to_half(x);
			} else {
				((float *) r)[cell[t]] = x;
			}
		}
	}
}
