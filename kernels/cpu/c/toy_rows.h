/*
 * Rows of a tensor of up to four dimensions, as toy's row-wise kernels (soft_max.c, rms_norm.c,
 * rope.c, swiglu_back.c, store.c) read and write them: row r counts along dimensions 1 to 3,
 * and each thread of an operation takes a contiguous share of them.
 */
#ifndef TOY_ROWS_H
#define TOY_ROWS_H

#include <stdint.h>

#include "kg_ggml.h"

/* toy_rows is the number of rows of t. */
static inline int64_t toy_rows(const struct ggml_tensor * t) {
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* toy_row_share sets [*first, *last) to thread ith's share of rows rows among nth. */
static inline void toy_row_share(int64_t rows, int ith, int nth, int64_t * first, int64_t * last) {
	const int64_t per = (rows + nth - 1) / nth;
	*first = ith * per;
	*last = *first + per < rows ? *first + per : rows;
	if (*first > *last) {
		*first = *last;
	}
}

/* toy_row_at is the address of row r of t, whose index along dimensions 1 to 3 is (i1, i2, i3)
 * with i1 = r mod ne[1], and so on. */
static inline char * toy_row_at(const struct ggml_tensor * t, int64_t r) {
	const int64_t r1 = t->ne[1], r2 = t->ne[2];
	const int64_t i1 = r % r1, i2 = r / r1 % r2, i3 = r / (r1 * r2);
	return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

#endif
