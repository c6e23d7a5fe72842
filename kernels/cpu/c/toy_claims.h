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

#endif
