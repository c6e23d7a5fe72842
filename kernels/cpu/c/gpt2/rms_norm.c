#include <math.h>
#include <stdint.h>

#include "kg_ggml.h"
#include "../toy_cpu.h"
#include "../toy_rows.h"

// GPT-2's namesake of the common rms_norm module (kernels/README.md, "shadowing"): the module
// is the decoders' norm, and GPT-2 normalises with LayerNorm and a bias where the other families
// take an RMS norm. For a model whose table entry is gpt2 this file replaces ../rms_norm.c
// whole: rms_norm_mul does not resolve for it (the audit says "dropped by shadowing"), and
// layer_norm_mul_add does, for gpt2 alone.
// toy:kernel layer_norm_mul_add

/*
 * The squares of a row's deviations are summed as ggml's ggml_vec_cvar_f32 sums them in this
 * build: a block of TOY_CVAR_BLOCK floats at a time, each block added up in float by the tree of
 * that function's horizontal sum, and the blocks' sums in double; what is left over one by one,
 * in double. The block and its tree follow the instruction set the build targets, as ggml's
 * do, so that the variance is ggml's to the bit.
 */
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define TOY_CVAR_BLOCK 16
#elif defined(__AVX2__) && defined(__FMA__)
#define TOY_CVAR_BLOCK 8
#elif defined(__SSE2__) || defined(__ARM_NEON) && defined(__aarch64__)
#define TOY_CVAR_BLOCK 4
#else
#define TOY_CVAR_BLOCK 1
#endif

/*
 * TOY_NO_CONTRACT keeps gcc from fusing a product and the addition that reads it into one
 * multiply-add (its default, -ffp-contract=fast, does so across statements): each square, and
 * each product of the scale, is rounded to float before it is added, as in ggml's separate
 * operations. clang contracts only within an expression, which this file does not write.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define TOY_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define TOY_NO_CONTRACT
#endif

/* toy_block_sum adds up the squares s of one block in the order of ggml's horizontal sum. */
static inline float toy_block_sum(const float * s) {
#if TOY_CVAR_BLOCK == 16
	float h[8];
	for (int i = 0; i < 8; i++) {
		h[i] = s[i + 8] + s[i];
	}
	s = h;
#endif
#if TOY_CVAR_BLOCK >= 8
	// the two halves of eight, then the halves of four, then the last two
	const float a0 = s[4] + s[0], a1 = s[5] + s[1], a2 = s[6] + s[2], a3 = s[7] + s[3];
	return (a2 + a0) + (a3 + a1);
#elif TOY_CVAR_BLOCK == 4 && defined(__AVX__)
	return (s[2] + s[0]) + (s[3] + s[1]);
#elif TOY_CVAR_BLOCK == 4
	return (s[1] + s[0]) + (s[3] + s[2]); // SSE2's shuffles, and NEON's pairwise addition
#else
	return s[0];
#endif
}

/*
 * LayerNorm times a learned scale plus a learned bias, w ⊙ (x - mean) / √(var + eps) + b, of each
 * row: ggml's NORM and the MUL and ADD after it in one operation, where ggml makes three nodes
 * with a barrier of the threads between each. Every float operation is ggml's: the values
 * summed one after the other in double (in another order the sum of a row whose values cancel
 * could round otherwise), the mean rounded to float and divided as ggml divides it, the
 * deviations and their variance as ggml's kernel makes them (above), and each value scaled,
 * multiplied and added to in float, each result rounded as a node of its own would round it
 * (TOY_NO_CONTRACT). So the results are ggml's to the bit.
 */
TOY_NO_CONTRACT
void toy_layer_norm_mul_add(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const struct ggml_tensor * x = dst->src[0];
	const float * wr = (const float *) dst->src[1]->data;
	const float * br = (const float *) dst->src[2]->data;
	const float eps = *(const float *) userdata;
	const int64_t n = x->ne[0];
	int64_t first, last;
	toy_row_share(toy_rows(x), ith, nth, &first, &last);
	for (int64_t r = first; r < last; r++) {
		const float * xr = (const float *) toy_row_at(x, r);
		float * yr = (float *) toy_row_at(dst, r);
		double s = 0;
		for (int64_t i = 0; i < n; i++) {
			s += (double) xr[i];
		}
		const float mean = (float) s / (float) n;

		double var = 0;
		float sq[TOY_CVAR_BLOCK];
		int64_t i = 0;
		for (; i + TOY_CVAR_BLOCK <= n; i += TOY_CVAR_BLOCK) {
			for (int j = 0; j < TOY_CVAR_BLOCK; j++) {
				const float d = xr[i + j] - mean;
				yr[i + j] = d;
				sq[j] = d * d;
			}
			var += (double) toy_block_sum(sq);
		}
		for (; i < n; i++) {
			const float d = xr[i] - mean;
			yr[i] = d;
			var += (double) (d * d);
		}
		const float variance = (float) (var / (double) n);
		const float scale = 1.0f / sqrtf(variance + eps);
		for (int64_t k = 0; k < n; k++) {
			yr[k] = yr[k] * scale * wr[k] + br[k];
		}
	}
}
