#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kg_ggml.h"
#include "toy_claims.h"
#include "toy_cpu.h"
#include "toy_vec.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel mul_mat_cols types=f16,bf16,f32,q8_0,q5_0

/*
 * Each (row, column) dot product runs in its own vector accumulator over the whole row, in the
 * same order whatever the number of columns, then a fixed horizontal sum, then the scalar
 * tail: a column's result does not depend on which other columns share the call.
 */

/* The most columns one pass over a block of rows keeps in registers; more take another pass. */
enum { GROUP = 8 };

/*
 * Where a pass's packed columns would take more than X_L1_BYTES (8 columns of more than 768
 * values: SmolLM2's down projection, 1536), the columns are split into groups of SPLIT, each
 * passing over a chunk's rows in 4 lanes (the passes after the first read the rows from L2, as
 * for more than GROUP columns). The weights streaming through the 48 KiB L1 had pushed 8
 * packed columns of 1536 values out of it, and the loop read them from L2 at about 60 % of
 * its rate elsewhere: a C harness of the kernel on one core (2026-12-03), 576 rows of 1536
 * f16 weights against 8 columns, 99-105 GFLOP/s in one group, 129-130 in groups of 4 with 2
 * lanes, 142-147 with 4 (one group of 4 alone streams from memory best in 2: 146-150 against
 * 110). A column's result does not change: each (row, column) sum is its own accumulator's.
 */
enum { X_L1_BYTES = 24 << 10, SPLIT = 4 };

/* The weight types: a weight's kind is a constant wherever the vector loops load it. */
enum { KIND_F32, KIND_F16, KIND_BF16, KIND_Q8_0, KIND_Q5_0, KINDS };

/* weight_at is value i of a row of kind: a q8_0 or q5_0 value is its integer times its block's
 * scale, a product exact in f32 (11 bits by 8 or 5). */
static inline float weight_at(const char * row, int kind, int64_t i) {
	switch (kind) {
	case KIND_F16:
		return half_to_float(((const uint16_t *) row)[i]);
	case KIND_BF16:
		return bf16_to_float(((const uint16_t *) row)[i]);
	case KIND_Q8_0: {
		const char * b = row + i / Q8_0_BLOCK * Q8_0_BYTES;
		return q8_0_scale(b) * (float) (int8_t) b[2 + i % Q8_0_BLOCK];
	}
	case KIND_Q5_0: {
		const char * b = row + i / Q5_0_BLOCK * Q5_0_BYTES;
		const int j = (int) (i % Q5_0_BLOCK);
		const uint8_t byte = (uint8_t) b[6 + j % 16];
		const int q = ((j < 16 ? byte & 15 : byte >> 4) | (int) ((q5_0_high(b) >> j) & 1) << 4) - 16;
		return q8_0_scale(b) * (float) q;
	}
	}
	return ((const float *) row)[i];
}

/* weight_bytes is where value i of a row of kind starts (its block's for q8_0 and q5_0). */
static inline int64_t weight_bytes(int kind, int64_t i) {
	return kind == KIND_F32 ? i * 4 : kind == KIND_Q8_0 ? i / Q8_0_BLOCK * Q8_0_BYTES
		: kind == KIND_Q5_0 ? i / Q5_0_BLOCK * Q5_0_BYTES : i * 2;
}

#if TOY_VECTOR

/*
 * lanes_cols computes R·lane rows of the weights at w (each stride bytes apart) against the M
 * columns at x (each xs floats apart), k long, into y[j*n + r]; the loop reads the columns'
 * vector part from xp, where pack interleaved it (x itself when M is 1), and their tail from x.
 * The rows are taken as R lanes
 * of lane rows each, a contiguous run far from the others, one row of each lane at a time: on
 * the machines measured (docs/PERFORMANCE.md) the memory system streams R runs far apart at
 * full speed, but R adjacent rows at less than half. A lane streams its next rows in with
 * software prefetches PF bytes ahead when PF is not 0. KIND, R, M and PF are constants at every
 * call, so the loads are of one kind and the R·M accumulators stay in registers (with R
 * variable, as a recursive call made it, gcc compiled a loop that tested R and stored flags
 * every step).
 */
static inline __attribute__((always_inline)) void lanes_cols(const char * w, size_t stride, const int KIND,
		const float * x, int64_t xs, const float * xp, int64_t k, float * y, int64_t n, int64_t lane, const int R, const int M,
		const int PF) {
	const int64_t kv = k - k % LANES;
	/* The vectors of a block of 32 q8_0 or q5_0 values (two of 16 with AVX-512) are made in
	 * one step, so that its scale is broadcast and converted once for both (the same values,
	 * the same products, the same sums). q8_0 on one core, 4 matrices of 2048×2048 in the L3
	 * cache (BenchmarkMulMatStep -step.cache, the best of 6-8 rounds alternating on a loaded
	 * machine, 2026-12-06): one column 33.6 GB/s before, 40.0 after; two 22.4, 31.8; eight
	 * 8.1, 11.7. */
	const int SUBS = (KIND == KIND_Q8_0 || KIND == KIND_Q5_0) && LANES == 16 ? 2 : 1;
	for (int64_t t = 0; t < lane; t++) {
		vec acc[4][GROUP];
		for (int q = 0; q < R; q++) {
			for (int j = 0; j < M; j++) {
				acc[q][j] = VZERO();
			}
		}
		for (int64_t i0 = 0; i0 < kv; i0 += SUBS * LANES) {
		vec sc[4];
		if (SUBS > 1) {
			for (int q = 0; q < R; q++) {
				sc[q] = VSETH(w + (q * lane + t) * stride + weight_bytes(KIND, i0));
			}
		}
		for (int h = 0; h < SUBS; h++) {
			const int64_t i = i0 + h * LANES;
			vec wv[4];
			for (int q = 0; q < R; q++) {
				/* Value i of the row, or the start of its block: a block's LANES
				 * values (LANES divides the block) are its integers times its scale,
				 * the same f32 values as weight_at's. */
				const char * at = w + (q * lane + t) * stride + weight_bytes(KIND, i);
				if (PF && h == 0) {
					_mm_prefetch(at + PF, _MM_HINT_T0);
				}
				wv[q] = KIND == KIND_Q8_0 ? VMUL(VLOADQ(at + 2 + i % Q8_0_BLOCK), SUBS > 1 ? sc[q] : VSETH(at))
					: KIND == KIND_Q5_0 ? VMUL(VLOADQ5(at + 6, q5_0_high(at), i % Q5_0_BLOCK), SUBS > 1 ? sc[q] : VSETH(at))
					: KIND == KIND_F16 ? VLOADH((const uint16_t *) at)
					: KIND == KIND_BF16 ? VLOADB((const uint16_t *) at) : VLOAD((const float *) at);
				if (KIND == KIND_F32 && M > 1) {
					/* One load for the M products: left alone, gcc folds an f32 row's
					 * load into each FMA for some M (2, 4), M loads of a vector that
					 * comes from memory, and 4 columns cost as much as 8. */
					__asm__("" : "+v"(wv[q]));
				}
			}
			for (int j = 0; j < M; j++) {
				vec xv = VLOAD(xp + i * M + j * LANES);
				if (R > 1 && M > 1) {
					/* One load for the R products: left alone, gcc folds the load into
					 * each FMA, R loads of the same vector. (With one column it would
					 * spill the vector instead.) */
					__asm__("" : "+v"(xv));
				}
				for (int q = 0; q < R; q++) {
					acc[q][j] = VFMA(wv[q], xv, acc[q][j]);
				}
			}
		}
		}
		/* The R·M sums, LANES at a time (unused vectors zero). */
		float sum[4 * GROUP];
		for (int c = 0; c < R * M; c += LANES) {
			vec v[LANES];
			for (int i = 0; i < LANES; i++) {
				v[i] = c + i < R * M ? acc[(c + i) / M][(c + i) % M] : VZERO();
			}
			vsums(v, sum + c);
		}
		for (int q = 0; q < R; q++) {
			const int64_t r = q * lane + t;
			for (int j = 0; j < M; j++) {
				float s = sum[q * M + j];
				for (int64_t i = kv; i < k; i++) {
					s += weight_at(w + r * stride, KIND, i) * x[j * xs + i];
				}
				y[j * n + r] = s;
			}
		}
	}
}

/* rows_cols computes rows [0, rows) as lanes_cols does, in R lanes, and the rows the lanes
 * leave over one at a time. */
static inline __attribute__((always_inline)) void rows_cols(const char * w, size_t stride, const int KIND,
		const float * x, int64_t xs, const float * xp, int64_t k, float * y, int64_t n, int64_t rows, const int R, const int M,
		const int PF) {
	const int64_t lane = rows / R;
	lanes_cols(w, stride, KIND, x, xs, xp, k, y, n, lane, R, M, PF);
	if (R > 1 && rows > R * lane) {
		lanes_cols(w + R * lane * stride, stride, KIND, x, xs, xp, k, y + R * lane, n, rows - R * lane, 1, M, PF);
	}
}

/*
 * ROWS_M(KIND, M) defines rows_KIND_M (by ROWS_FN, a function of rows_cols with its lanes R and
 * prefetch distance PF), which computes rows [0, rows) against M columns, in the
 * lanes and with the prefetches that measured fastest for M (BenchmarkMulMatCols, 2026-12-02):
 * 2 lanes for one column (memory-bound), 4 for two, 2 for more (the accumulators fill the
 * registers), prefetching from 3 columns on. (3 and 4 columns took 4 lanes until then, and
 * streamed f32 rows at about half the rate of 2 lanes: 4 columns cost as much as 8.) One
 * column of q8_0 takes 4 lanes: its half-size values stream faster than 2 chains of dependent
 * FMAs consume them (0.59 ms against 0.71 for SmolLM2's head), and prefetches 4 KiB ahead: a
 * generation step of the llama3.2-1b shape in q8_0 (2 threads, its 1.3 GB from memory; steps
 * alternating in one process, two rounds, 2026-12-06) took 25.2 and 19.6 ms against 28.6 and
 * 24.2 without, 2 KiB ahead 25.7 and 20.3, 8 KiB 25.8 and 20.0, 2 lanes at 4 KiB 26.6 and 22.0:
 * without, the down projection (8192 values a row) had streamed at 45 GB/s, the gate and up
 * (2048) at 63. One column of q5_0 (where mul_mat_kquant.c, which repacks q5_0 since, is not looked up)
 * prefetches 2 KiB ahead: SmolLM2-135M in q5_0 (576 values a row), the same alternating
 * steps (2026-12-06), 3.47, 3.64, 3.61, 3.71 ms against 3.69, 3.94, 3.58, 3.77 without (4 KiB
 * 3.59, 3.68, 3.63, 3.86), tg32 on 2 threads 315-337 t/s against 288-318 (4 rounds). f16 4 KiB
 * ahead shortened the alternating steps by 4-10 % but not tg32 (179-192 t/s against 189-193,
 * 4 rounds; the file streams at 93-96 % of the DRAM rate without): not taken. Each is a
 * function of its own, so that gcc allocates the registers of each loop alone: inlined together
 * into one function, the one-column loop stored its column to the stack every step.
 */
#define ROWS_FN(NAME, KIND, M, R, PF) \
	static __attribute__((noinline)) void NAME(const char * w, size_t stride, const float * x, int64_t xs, \
			const float * xp, int64_t k, float * y, int64_t n, int64_t rows) { \
		rows_cols(w, stride, KIND, x, xs, xp, k, y, n, rows, R, M, PF); \
	}
#define ROWS_M(KIND, M) ROWS_FN(rows_##KIND##_##M, KIND, M, \
	M == 2 || (M == 1 && (KIND == KIND_Q8_0 || KIND == KIND_Q5_0)) ? 4 : 2, \
	M >= 3 ? 8192 : M == 1 && KIND == KIND_Q8_0 ? 4096 : M == 1 && KIND == KIND_Q5_0 ? 2048 : 0)
#define ROWS_KIND(KIND) ROWS_M(KIND, 1) ROWS_M(KIND, 2) ROWS_M(KIND, 3) ROWS_M(KIND, 4) ROWS_M(KIND, 5) \
	ROWS_M(KIND, 6) ROWS_M(KIND, 7) ROWS_M(KIND, 8)
ROWS_KIND(KIND_F32)
ROWS_KIND(KIND_F16)
ROWS_KIND(KIND_BF16)
ROWS_KIND(KIND_Q8_0)
ROWS_KIND(KIND_Q5_0)

/* ROWS_SPLIT_M(KIND, M) defines rows_split_KIND_M, the pass of a group of M ≤ SPLIT columns
 * where the columns are split (see SPLIT): 4 lanes, prefetching. */
#define ROWS_SPLIT_M(KIND, M) ROWS_FN(rows_split_##KIND##_##M, KIND, M, 4, 8192)
#define ROWS_SPLIT_KIND(KIND) ROWS_SPLIT_M(KIND, 1) ROWS_SPLIT_M(KIND, 2) ROWS_SPLIT_M(KIND, 3) ROWS_SPLIT_M(KIND, 4)
ROWS_SPLIT_KIND(KIND_F32)
ROWS_SPLIT_KIND(KIND_F16)
ROWS_SPLIT_KIND(KIND_BF16)
ROWS_SPLIT_KIND(KIND_Q8_0)
ROWS_SPLIT_KIND(KIND_Q5_0)

typedef void (*rows_fn)(const char * w, size_t stride, const float * x, int64_t xs, const float * xp, int64_t k,
		float * y, int64_t n, int64_t rows);

#define ROWS_FNS(KIND) { rows_##KIND##_1, rows_##KIND##_2, rows_##KIND##_3, rows_##KIND##_4, rows_##KIND##_5, \
	rows_##KIND##_6, rows_##KIND##_7, rows_##KIND##_8 }

/* rows_fns[kind][m-1] computes m columns of weights of kind; rows_split_fns[kind][m-1] a group
 * of m where the columns are split. */
static const rows_fn rows_fns[KINDS][GROUP] = { ROWS_FNS(KIND_F32), ROWS_FNS(KIND_F16), ROWS_FNS(KIND_BF16), ROWS_FNS(KIND_Q8_0),
	ROWS_FNS(KIND_Q5_0) };

#define ROWS_SPLIT_FNS(KIND) { rows_split_##KIND##_1, rows_split_##KIND##_2, rows_split_##KIND##_3, rows_split_##KIND##_4 }
static const rows_fn rows_split_fns[KINDS][SPLIT] = { ROWS_SPLIT_FNS(KIND_F32), ROWS_SPLIT_FNS(KIND_F16),
	ROWS_SPLIT_FNS(KIND_BF16), ROWS_SPLIT_FNS(KIND_Q8_0), ROWS_SPLIT_FNS(KIND_Q5_0) };

/* block computes rows [0, rows) of w against m (1..GROUP, or 1..SPLIT where split) columns x,
 * packed at xp, into y[j*n + r]. */
static void block(const char * w, size_t stride, int kind, const float * x, int64_t xs, const float * xp, int64_t k,
		float * y, int64_t n, int64_t rows, int m, int split) {
	(split ? rows_split_fns[kind][m - 1] : rows_fns[kind][m - 1])(w, stride, x, xs, xp, k, y, n, rows);
}

/* packed_size is the floats pack writes for m columns of length k. */
static int64_t packed_size(int64_t k, int64_t m) { return (k - k % LANES) * m; }

/* pack copies the vector part (k rounded down to LANES) of the m columns at x, xs floats apart,
 * to xp, group columns at a time, each group interleaved: the LANES values of each column at
 * element i follow each other, so that the product's loop reads its columns from one pointer
 * (with a pointer per column, gcc keeps some of them in vector registers and moves them back
 * every step). */
static void pack(const float * x, int64_t xs, int64_t k, int64_t m, int group, float * xp) {
	const int64_t kv = k - k % LANES;
	for (int64_t j0 = 0; j0 < m; j0 += group) {
		const int64_t mc = m - j0 < group ? m - j0 : group;
		float * g = xp + j0 * kv;
		for (int64_t i = 0; i < kv; i += LANES) {
			for (int64_t j = 0; j < mc; j++) {
				VSTORE(g + i * mc + j * LANES, VLOAD(x + (j0 + j) * xs + i));
			}
		}
	}
}

#else

/* No vector unit this file knows: a plain loop, for correctness only (the Go layer asks
 * toy_vectorized and leaves the products to ggml). */
static void block(const char * w, size_t stride, int kind, const float * x, int64_t xs, const float * xp, int64_t k,
		float * y, int64_t n, int64_t rows, int m, int split) {
	(void) xp, (void) split;
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

static int64_t packed_size(int64_t k, int64_t m) { (void) k, (void) m; return 0; }
static void pack(const float * x, int64_t xs, int64_t k, int64_t m, int group, float * xp) {
	(void) x, (void) xs, (void) k, (void) m, (void) group, (void) xp;
}

#endif

/* The threads of a product take chunks of rows from counters (toy_claims.h). */

/* Columns whose packed copy is at most this many floats (32 KiB: 8 columns of 1024) are packed
 * on the stack (a thread's stack may be as small as musl's 128 KiB), larger ones on the heap. */
enum { STACK_PACK = 8192 };

void toy_mul_mat_cols(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	const struct ggml_tensor * a = dst->src[0];
	const struct ggml_tensor * b = dst->src[1];
	const int kind = a->type == GGML_TYPE_F16 ? KIND_F16 : a->type == GGML_TYPE_BF16 ? KIND_BF16
		: a->type == GGML_TYPE_Q8_0 ? KIND_Q8_0 : a->type == GGML_TYPE_Q5_0 ? KIND_Q5_0 : KIND_F32;
	const int64_t k = a->ne[0], n = a->ne[1], m = b->ne[1];
	const size_t stride = a->nb[1];
	const int64_t xs = (int64_t) (b->nb[1] / sizeof(float));
	const float * x = (const float *) b->data;
	float * y = (float *) dst->data;

	const int split = m > SPLIT && k * (m < GROUP ? m : GROUP) * (int64_t) sizeof(float) > X_L1_BYTES;
	const int group = split ? SPLIT : GROUP;

	/* Each thread packs the columns for itself: k·m floats, against k·n weights to multiply. */
	float stack[STACK_PACK] __attribute__((aligned(64)));
	const int64_t size = packed_size(k, m);
	float * xp = m == 1 ? (float *) x : size <= STACK_PACK ? stack : (float *) malloc((size_t) size * sizeof(float));
	if (xp == NULL) {
		fprintf(stderr, "toy_mul_mat_cols: out of memory packing %lld columns of %lld\n", (long long) m, (long long) k);
		abort();
	}
	if (m > 1) {
		pack(x, xs, k, m, group, xp);
	}

	/* dst is [n, m]: element (row, column) at y[column*n + row]. A chunk is a contiguous range
	 * of rows (one stream of weights), with every column group. One column is bound by
	 * memory, which streams best when each thread takes one contiguous share of the rows (as
	 * measured: 10 % slower in chunks; with each thread's own region first, two chunks a thread
	 * 1 % and four 4 % slower, 32.5M f32 Go model, 2026-12-02); more are bound by the vector
	 * units, which the chunks keep busy on every thread. */
	const int64_t chunk = toy_row_chunk(n, m, group, nth, stride);
	const int64_t chunks = (n + chunk - 1) / chunk;
	/* The chunks fall into regions of consecutive rows, one a thread (threads share them past
	 * TOY_REGIONS); each thread takes its own region's chunks in order, then the others'
	 * (toy_claim_in), so that while the threads keep pace each streams its own region, far
	 * from the others' (adjacent streams are slower, as above). */
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
			for (int64_t j0 = 0; j0 < m; j0 += group) {
				const int mc = (int) (m - j0 < group ? m - j0 : group);
				block((const char *) a->data + r0 * stride, stride, kind, x + j0 * xs, xs, xp + j0 * packed_size(k, 1), k,
					y + j0 * n + r0, n, r1 - r0, mc, split);
			}
		}
	}
	if (nth > 1) {
		toy_claims_done(dst, nth);
	}
	if (m > 1 && xp != stack) {
		free(xp);
	}
}
