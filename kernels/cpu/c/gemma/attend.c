#include <stdio.h>
#include <stdlib.h>

#include "../toy_attend.h"

// The gemma family's namesake of the common attend module (kernels/README.md, "shadowing"): the
// attention of one query per sequence with soft-capped logits, cap·tanh(scale·q·k/cap) before the
// mask and the softmax, which Gemma 2 computes (attn_logit_softcapping) and the common kernels do
// not. For a model whose table entry is gemma this file replaces ../attend.c whole: attend_one,
// attend_blocks and attend_merge do not resolve for it (the audit says "dropped by shadowing"),
// and these do, for gemma alone; a cap of 0 leaves the logits uncapped (Gemma 3), the common
// kernels' arithmetic to the bit. The arithmetic is toy_attend.h's, shared with ../attend.c.
// toy:kernel attend_one_softcap types=f16,q8_0
// toy:kernel attend_blocks_softcap types=f16,q8_0
// toy:kernel attend_merge_softcap

#if TOY_VECTOR

/* userdata points to { float scale, cap }. */
void toy_attend_one_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const float * sc = (const float *) userdata;
	attend_jobs(dst, ith, nth, sc[0], sc[1], 0);
}

void toy_attend_blocks_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	const float * sc = (const float *) userdata;
	attend_jobs(dst, ith, nth, sc[0], sc[1], 1);
}

void toy_attend_merge_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) userdata;
	attend_merge(dst, ith, nth);
}

#else

/* No vector unit this file knows: the Go layer leaves the attention to ggml, so this is never
 * called. */
void toy_attend_one_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	(void) dst, (void) ith, (void) nth, (void) userdata;
	fprintf(stderr, "toy_attend_one_softcap: built without a vector unit\n");
	abort();
}

void toy_attend_blocks_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	toy_attend_one_softcap(dst, ith, nth, userdata);
}

void toy_attend_merge_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
	toy_attend_one_softcap(dst, ith, nth, userdata);
}

#endif
