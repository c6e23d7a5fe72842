#include <stdint.h>

#include "kg_ggml.h"
#include "toy_cpu.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel cont_f32

/* The tile's side: 16 floats are one 64-byte cache line of a contiguous source row. */
enum { TILE = 16 };

void toy_cont_f32(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * userdata) {
	(void) userdata;
	const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2], ne3 = dst->ne[3];
	const size_t s0 = a->nb[0], s1 = a->nb[1], s2 = a->nb[2], s3 = a->nb[3];
	/* Jobs are blocks of TILE rows of one plane (i2, i3), dealt out to the threads in turn. */
	const int64_t blocks = (ne1 + TILE - 1) / TILE;
	const int64_t jobs = blocks * ne2 * ne3;
	for (int64_t job = ith; job < jobs; job += nth) {
		const int64_t b = job % blocks, i2 = (job / blocks) % ne2, i3 = job / (blocks * ne2);
		const int64_t r0 = b * TILE, r1 = r0 + TILE < ne1 ? r0 + TILE : ne1;
		const char * src = (const char *) a->data + i2 * s2 + i3 * s3;
		float * out = (float *) dst->data + ((i3 * ne2 + i2) * ne1) * ne0;
		for (int64_t c0 = 0; c0 < ne0; c0 += TILE) {
			const int64_t c1 = c0 + TILE < ne0 ? c0 + TILE : ne0;
			for (int64_t r = r0; r < r1; r++) {
				const char * row = src + r * s1;
				float * o = out + r * ne0;
				for (int64_t c = c0; c < c1; c++) {
					o[c] = *(const float *) (row + c * s0);
				}
			}
		}
	}
}

/* toy_vectorized says which code toy_vec.h compiled the kernels to: 1 with a vector unit. */
int toy_vectorized(void) { return TOY_VECTOR; }

/* toy_isa says which vector unit toy_vec.h compiled the kernels for. */
int toy_isa(void) {
#if TOY_VECTOR && defined(__AVX512F__)
	return 512;
#elif TOY_VECTOR
	return 256;
#else
	return 0;
#endif
}
