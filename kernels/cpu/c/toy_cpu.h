/*
 * toy's own CPU operations: kernels that ggml runs as custom operations (ggml_map_custom1)
 * where its own kernel for the same work is slow. Each has the signature of ggml_custom1_op_t:
 * it fills dst from a, the share of thread ith of nth. specs/cpuops binds them; the cpuops
 * package compiles them.
 */
#ifndef TOY_CPU_H
#define TOY_CPU_H

#include <stdint.h>

struct ggml_tensor;

/*
 * toy_cont_f32 copies a, an f32 tensor with any strides (a transpose, a permutation), into
 * dst, a contiguous f32 tensor of the same shape: ggml_cont's result. It copies tiles of 16
 * rows by 16 columns, so a transposed source is read a cache line at a time rather than an
 * element per cache line as ggml's strided copy reads it.
 */
void toy_cont_f32(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * userdata);

/*
 * toy_mul_mat_cols is ggml_mul_mat(a, b) for a few columns, as a ggml_custom_op_t over
 * dst->src[0] = a, f16, bf16, f32, q8_0 or q5_0 weights [k, n] (2-D, rows contiguous), and dst->src[1] = b, f32
 * columns [k, m] (2-D, rows contiguous): dst = f32 [n, m]. Each weight row is read once for up
 * to 8 columns, and each (row, column) dot product is summed in the same order whatever m is,
 * in f32 (ggml rounds the columns to f16, bf16 or q8_0 for such weights; this kernel does
 * not). The threads claim chunks of rows, each from its own region first, from counters kept
 * in dst->op_params (entries 6 to 13 and 15, past ggml_custom_4d's parameters), which the
 * last thread resets.
 */
void toy_mul_mat_cols(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_attend_one is the attention of one query per sequence over a key/value cache, as a
 * ggml_custom_op_t over dst->src[0] = q, f32 [hdk, H, S] (rows contiguous; the queries, already
 * scaled), dst->src[1] = k, f16 [hdk, kvLen, Hkv, S] (a view of the key cache, elements
 * contiguous along hdk), dst->src[2] = v, f16 [kvLen, hdv, Hkv, S] (a view of the transposed value
 * cache, elements contiguous along kvLen) and dst->src[3] = mask, f32 or f16 [kvLen, S] (added to
 * the scores: 0 or -inf): dst = f32 [hdv, H, S], head h reading the keys and values of head
 * h / (H / Hkv). hdk and hdv are multiples of 16 and at most 256. In f32 throughout (ggml's
 * unfused attention rounds the queries and the probabilities to f16). The threads claim the
 * (sequence, heads) jobs from a counter in dst->op_params (entries 14 and 15), the sequences
 * that read the most cells first.
 */
void toy_attend_one(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_attend_blocks is toy_attend_one's attention a block of toy_attend_block() cells at a
 * time, each block a job of its own, for sequences too long for one thread's share: the same
 * sources, and dst = f32 [hdv + 2, H, S, NB], NB at least the most blocks of any sequence (the
 * cells its mask shows, rounded up to 16, in blocks). Row (h, s, b) holds block b's values
 * weighted by its exponentials relative to its largest score (not divided by their sum), then
 * that largest score and the sum; a sequence's blocks past its cells are not written.
 */
void toy_attend_blocks(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_attend_merge joins toy_attend_blocks' blocks, as a ggml_custom_op_t over dst->src[0] =
 * the blocks, f32 [hdv + 2, H, S, NB], and dst->src[1] = the mask they were made with: dst =
 * f32 [hdv, H, S], toy_attend_one's result (to the bit for a sequence of one block).
 */
void toy_attend_merge(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_attend_one_softcap, toy_attend_blocks_softcap and toy_attend_merge_softcap are the gemma
 * family's attention (kernels/cpu/c/gemma/attend.c): toy_attend_one's, toy_attend_blocks' and
 * toy_attend_merge's, with userdata pointing to { float scale, cap } and the logits soft-capped,
 * cap·tanh(scale·q·k/cap), where cap > 0.
 */
void toy_attend_one_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void toy_attend_blocks_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void toy_attend_merge_softcap(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/* toy_attend_block is the cells of one of toy_attend_blocks' blocks. */
int toy_attend_block(void);

/*
 * toy_mul_mat_packed is ggml_mul_mat(a, b) as a packed GEMM, as a ggml_custom_op_t over
 * dst->src[0] = a, f32, f16, bf16 or q8_0 [K, M, G, S] and dst->src[1] = b, f32 [K, N, G·r,
 * S·r3] (rows contiguous; b's head h of sequence s reads a's group h / r of sequence s / r3):
 * dst = f32 [M, N, G·r, S·r3]. It packs 64 rows of a at a time, transposed and in f32, and each
 * output vector holds rows of the result, each value of K one FMA with a broadcast of b's: no
 * horizontal sums. The threads claim jobs (a
 * head, 64 rows, a run of columns) from a counter in dst->op_params (entries 14 and 15).
 */
void toy_mul_mat_packed(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_soft_max is ggml_soft_max_ext(x, mask, scale, 0), as a ggml_custom_op_t over dst->src[0]
 * = x, f32 [n, r1, r2, r3] (rows contiguous), and dst->src[1] = mask, f32 or f16 [n, ≥ r1, m2,
 * m3] (rows contiguous; broadcast over dims 2 and 3, which m2 and m3 divide) or NULL, with
 * userdata pointing to the float scale: dst = f32 [n, r1, r2, r3], softmax(scale·x + mask) of
 * each row. A row the mask hides entirely becomes zeros (ggml's gives NaN).
 */
void toy_soft_max(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_swiglu_back is the backward of SwiGLU, h = silu(g)·u, as a ggml_custom_op_t over
 * dst->src[0] = g, dst->src[1] = u and dst->src[2] = h's gradient, f32 [n, rows] with contiguous
 * rows: dst = f32 [n, rows, 2], g's gradient then u's.
 */
void toy_swiglu_back(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_store_transposed writes new values into a value cache stored transposed (ggml's unfused
 * attention reads it so), as a ggml_custom_op_t in place over dst->src[0] = dst = the cache, f16
 * or f32 [cells, C], dst->src[1] = v, f32 [C, n] (rows contiguous) and dst->src[2] = cells, i32
 * [n] (distinct, each below the cache's cells): element c of token t goes to row c, column
 * cells[t]. Each element lands in a cache line of its own, so the threads take channels, and
 * each prefetches the lines of the channels ahead for writing: ggml's set_rows, one element a
 * row, waits for each line in turn.
 */
void toy_store_transposed(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_rms_norm_mul is ggml_mul(ggml_rms_norm(x, eps), w) as a ggml_custom_op_t over dst->src[0] =
 * x, f32 [n, r1, r2, r3] (rows contiguous), and dst->src[1] = w, f32 [n] (contiguous), with
 * userdata pointing to the float eps: dst = f32 [n, r1, r2, r3], each row of x divided by the
 * root of the mean of its squares plus eps, times w. Rows are shared out between the threads.
 */
void toy_rms_norm_mul(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_layer_norm_mul_add is ggml_add(ggml_mul(ggml_norm(x, eps), w), b), GPT-2's LayerNorm (its
 * module gpt2/rms_norm.c shadows rms_norm.c for that family), as a ggml_custom_op_t over
 * dst->src[0] = x, f32 [n, r1, r2, r3] (rows contiguous), dst->src[1] = w and dst->src[2] = b,
 * f32 [n] (contiguous), with userdata pointing to the float eps: dst = f32 [n, r1, r2, r3], each
 * row of x less its mean, divided by the root of its variance plus eps, times w, plus b. Rows
 * are shared out between the threads.
 */
void toy_layer_norm_mul_add(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_rope_table is the table toy_rope_apply rotates by, as a ggml_custom_op_t over dst->src[0] =
 * pos, i32 [n] (the tokens' positions), and dst->src[1] = freq_factors, f32 [≥ dims/2] or NULL,
 * with userdata pointing to { int32 dims; float freq_base, freq_scale, attn_factor }: dst = f32
 * [dims, n], token t's cos and sin of each pair of dimensions side by side, as ggml's ROPE
 * computes them without YaRN's extrapolation.
 */
void toy_rope_table(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_rope_apply is ggml's ROPE of x by a table of toy_rope_table, as a ggml_custom_op_t over
 * dst->src[0] = x, f32 [ne0, heads, n] (rows contiguous), and dst->src[1] = the table, f32
 * [dims, n], with userdata pointing to an int32, 1 for NeoX's pairs (i, i + dims/2), 0 for
 * adjacent ones: dst = f32 [ne0, heads, n], the values past dims copied.
 */
void toy_rope_apply(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_mul_mat_kquant is ggml_mul_mat(w, x) for q4_K, q5_K or q6_K weights repacked by
 * toy_kquant_repack, as a ggml_custom_op_t over dst->src[0] = the repacked bytes, an i8 tensor
 * [toy_kquant_bytes(type, k, n)], and dst->src[1] = x, f32 columns [k, m] (rows contiguous,
 * any m), with userdata pointing to a struct toy_kquant_params that describes the weights
 * (the kernel aborts on any other): dst = f32 [n, m]. x is quantized to 8 bits per block of
 * 256 values as ggml's q8_K, and every product is an integer dot product (AVX-512 VNNI). The
 * threads claim jobs (runs of 16-row groups, or a group and a run of columns) from a counter
 * in dst->op_params (entries 14 and 15).
 */
void toy_mul_mat_kquant(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/* toy_kquant_params describes repacked k-quant weights to toy_mul_mat_kquant: magic is
 * TOY_KQUANT_MAGIC, type the ggml type they were (q4_K, q5_K, q6_K), k and n their shape. */
struct toy_kquant_params {
	int32_t magic;
	int32_t type;
	int64_t k;
	int64_t n;
};
enum { KQUANT_MAGIC = 0x6b717431 };

/* toy_kquant_bytes is the size of a [k, n] weight of ggml type type (q4_K, q5_K or q6_K, k a
 * multiple of 256) as toy_kquant_repack writes it, or -1 for any other. */
int64_t toy_kquant_bytes(int type, int64_t k, int64_t n);

/* toy_kquant_repack rewrites the [k, n] weight src of ggml type type (ggml's blocks, rows
 * contiguous) into dst, toy_kquant_bytes(type, k, n) bytes in the layout toy_mul_mat_kquant
 * reads (mul_mat_kquant.c): 0, or -1 for a type or shape it does not take. */
int toy_kquant_repack(int type, const void * src, int64_t k, int64_t n, void * dst);

/* toy_kquant_fast is 1 where toy_mul_mat_kquant was compiled with AVX-512 VNNI, 0 where it is
 * a plain loop (the Go layer leaves k-quant weights to ggml there). */
int toy_kquant_fast(void);

/*
 * toy_quantize_q32 rounds columns to 8-bit integers for toy_mul_mat_q32, as a ggml_custom_op_t
 * over dst->src[0] = x, f32 [k, n] (2-D, rows contiguous, k a multiple of 32): dst = i8 [k +
 * k/4, n], column j's k signed bytes (each block of 32 values divided by its largest magnitude
 * over 127, rounded to nearest), then each block's f32 scale, then each block's int32 sum of its
 * bytes. The threads take every nth column.
 */
void toy_quantize_q32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/*
 * toy_mul_mat_q32 is ggml_mul_mat(a, x) over weights of a block type of 32 values, as a
 * ggml_custom_op_t over dst->src[0] = a, q8_0, q4_0, q5_0 or q5_1 [k, n] (2-D, rows contiguous),
 * and dst->src[1] = toy_quantize_q32's columns of x, i8 [k + k/4, m]: dst = f32 [n, m]. Over
 * 4 columns it packs 64 rows at a time as unsigned bytes, four values of 16 rows a vector, and
 * multiplies them by the columns' bytes with AVX-512 VNNI (vpdpbusd), each block's 32-bit sums
 * scaled into f32 sums: no horizontal sums; the threads claim jobs (64 rows, a run of columns)
 * from a counter in dst->op_params (entries 14 and 15). Up to 4 it reads the rows where they
 * are, two blocks a vector against each column, the threads claiming chunks of rows as
 * toy_mul_mat_cols does (entries 6 to 13 and 15). Without AVX-512 VNNI it does nothing
 * (toy_vectorized_q32 is 0).
 */
void toy_mul_mat_q32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

/* toy_vectorized_q32 is 1 where toy_mul_mat_q32 was compiled with AVX-512 VNNI, 0 where it does
 * nothing and the Go layer leaves its products to ggml. */
int toy_vectorized_q32(void);

/* toy_vectorized is 1 where the kernels were compiled with AVX-512 or AVX2 (with F16C and FMA),
 * 0 where they are plain loops (toy_mul_mat_cols, slower than ggml's kernels) or do nothing
 * (toy_attend_one aborts, toy_mul_mat_packed returns): the Go layer leaves such work to ggml. */
int toy_vectorized(void);

/* toy_isa is the vector unit the kernels were compiled for: 512 for AVX-512, 256 for AVX2 with F16C
 * and FMA, 0 for none. */
int toy_isa(void);

#endif
