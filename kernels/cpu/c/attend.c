#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "toy_attend.h"

// The kernels of this module in toy's kernel table (kernels/README.md): each with the ggml
// types of the weights or cache it reads, where a lookup asks for one.
// toy:kernel attend_one types=f16,q8_0
// toy:kernel attend_blocks types=f16,q8_0
// toy:kernel attend_merge

int toy_attend_block(void) { return BLOCK_CELLS; }

#if TOY_VECTOR

void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	attend_jobs(dst, ith, nth, userdata != NULL ? *(const float *) userdata : 1.0f, 0, 0);
}

void toy_attend_blocks(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	attend_jobs(dst, ith, nth, userdata != NULL ? *(const float *) userdata : 1.0f, 0, 1);
}

void toy_attend_merge(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	attend_merge(dst, ith, nth);
}

#else

/* No vector unit this file knows: the Go layer asks toy_vectorized and leaves the
 * attention to ggml, so this is never called. */
void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
	fprintf(stderr, "toy_attend_one: built without a vector unit\n");
	abort();
}

void toy_attend_blocks(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	toy_attend_one(dst, ith, nth, userdata);
}

void toy_attend_merge(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	toy_attend_one(dst, ith, nth, userdata);
}

#endif
