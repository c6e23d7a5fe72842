/*
 * Jobs claimed from a counter: the threads of one of toy's custom operations take its jobs in
 * turn from a counter, so that a thread slowed by whatever else the machine runs leaves its
 * jobs to the others instead of holding them at ggml's barrier after the node. The counter is
 * kept in the node's own op_params, past the ones ggml_custom_4d writes (its function, task
 * count and user data: the first 24 bytes; ggml zeroes the rest when it makes the node), and
 * the last thread to finish resets it for the node's next run. ggml runs a graph's nodes one at
 * a time with a barrier between them, so no other computation touches a node's counter while
 * it runs.
 */
#ifndef TOY_CLAIMS_H
#define TOY_CLAIMS_H

#include <stdint.h>

#include "kg_ggml.h"

/* The op_params entries of the counter, of the threads that finished, and of the first of the
 * per-region counters (toy_claim_in), of which there are TOY_REGIONS. */
enum { TOY_CLAIMED = 14, TOY_FINISHED = 15, TOY_REGION0 = 6, TOY_REGIONS = 8 };

/* toy_claim takes the next job from dst's counter. */
static inline int64_t toy_claim(struct ggml_tensor * dst) {
	return __atomic_fetch_add(&dst->op_params[TOY_CLAIMED], 1, __ATOMIC_RELAXED);
}

/* toy_claim_in takes the next job of region r (below TOY_REGIONS) from its own counter: a
 * node whose jobs fall into regions, one a thread, lets each thread take its own region's jobs
 * in order and then the others' that are left, so that each streams its own region while the
 * threads keep pace. */
static inline int64_t toy_claim_in(struct ggml_tensor * dst, int r) {
	return __atomic_fetch_add(&dst->op_params[TOY_REGION0 + r], 1, __ATOMIC_RELAXED);
}

/* toy_claims_done is called by each of the nth threads that claim from dst's counters once it
 * has claimed past the last job; the last of them resets the counters. */
static inline void toy_claims_done(struct ggml_tensor * dst, int nth) {
	if (__atomic_add_fetch(&dst->op_params[TOY_FINISHED], 1, __ATOMIC_ACQ_REL) == nth) {
		__atomic_store_n(&dst->op_params[TOY_CLAIMED], 0, __ATOMIC_RELAXED);
		for (int r = 0; r < TOY_REGIONS; r++) {
			__atomic_store_n(&dst->op_params[TOY_REGION0 + r], 0, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&dst->op_params[TOY_FINISHED], 0, __ATOMIC_RELEASE);
	}
}

/* The chunks of rows the threads of a few-column product claim (mul_mat_cols.c, mul_mat_q32.c):
 * TOY_CHUNKS_PER_THREAD a thread and at least TOY_MIN_CHUNK rows. More chunks balance the threads
 * better, fewer stream better: each chunk starts new streams of weights from memory, which a
 * decoding step's weights come from. Four a thread made an 8-sequence step of SmolLM2-135M 8-12 %
 * shorter than sixteen (BenchmarkBatchDecode), its products alone 15-25 %
 * (BenchmarkMulMatColsLayers); cache-resident products timed level. With more than one group of
 * columns a chunk holds at most TOY_GROUP_PASS_BYTES of weights (a quarter of the smallest L2
 * cache measured, 1 MiB), which the passes of the later groups read from there. */
enum { TOY_CHUNKS_PER_THREAD = 4, TOY_MIN_CHUNK = 16, TOY_GROUP_PASS_BYTES = 256 << 10 };

/* toy_row_chunk is the rows in a chunk of n rows of stride bytes multiplied by m columns in
 * groups of group, among nth threads: one column streams best when each thread takes one
 * contiguous share of the rows, more are shared in chunks (a multiple of 4 rows). */
static inline int64_t toy_row_chunk(int64_t n, int64_t m, int64_t group, int nth, size_t stride) {
	const int per_thread = m == 1 ? 1 : TOY_CHUNKS_PER_THREAD;
	int64_t chunk = (n + (int64_t) nth * per_thread - 1) / ((int64_t) nth * per_thread);
	if (m > group && chunk * (int64_t) stride > TOY_GROUP_PASS_BYTES) {
		/* Each column group passes over the chunk's rows again: keep them in the core's cache. */
		chunk = TOY_GROUP_PASS_BYTES / (int64_t) stride;
	}
	return chunk < TOY_MIN_CHUNK ? TOY_MIN_CHUNK : (chunk + 3) / 4 * 4;
}

#endif
