// Package cpuops declares toy's own CPU operations: C kernels, in kernels/cpu/c, that ggml runs
// as custom operations (ggml_map_custom1) where its own kernel for the same work is slow. It is
// a spec: cmd/kernelgen reads it, proves it against kernels/cpu/c/toy_cpu.h and emits
// generated/cpuops, which compiles the kernels and gives their addresses to the ggml layer. See
// docs/SPECS.md.
package cpuops

import . "github.com/toyml/toy/specs/spec"

// Tensor is a ggml tensor (struct ggml_tensor); the kernels read its shape, strides and data.
//
//kernelgen:handle struct ggml_tensor
type Tensor struct{}

// Ops are the kernels. Each has the signature of ggml's ggml_custom1_op_t: it fills dst from a,
// the share of thread ith of nth; userdata is what the operation was made with.
//
//kernelgen:functions prefix=toy_
type Ops interface {
	// ContF32 copies a, an f32 tensor with any strides (a transpose, a permutation), into dst,
	// a contiguous f32 tensor of the same shape, by tiles of 16 rows by 16 columns: ggml_cont's
	// result, several times faster on a transpose.
	//kernelgen:address
	ContF32(dst Tensor, a Const[Tensor], ith, nth Int, userdata Ptr)
	// MulMatCols is ggml_mul_mat(a, b) for a few columns, with the signature of
	// ggml_custom_op_t: dst->src[0] = a, f16, bf16, f32, q8_0 or q5_0 weights [k, n] (2-D, rows contiguous),
	// dst->src[1] = b, f32 columns [k, m] (2-D, rows contiguous), dst = f32 [n, m]. Each
	// weight row is read once for up to 8 columns, and each (row, column) dot product is
	// summed in the same order whatever m is, in f32.
	//kernelgen:address
	MulMatCols(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendOne is the attention of one query per sequence over a key/value cache, with the
	// signature of ggml_custom_op_t: dst->src[0] = q, f32 [hdk, H, S]; dst->src[1] = k, f16
	// [hdk, kvLen, Hkv, S]; dst->src[2] = v, f16 [kvLen, hdv, Hkv, S] (the transposed value
	// cache); dst->src[3] = mask, f32 or f16 [kvLen, S]; userdata points to the float scale of
	// the scores (NULL: 1); dst = f32 [hdv, H, S]. In f32.
	//kernelgen:address
	AttendOne(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendBlocks is AttendOne's attention a block of AttendBlock() cells at a time, each
	// block a job of its own: the same sources and userdata, dst = f32 [hdv + 2, H, S, NB],
	// row (h, s, b) block b's unnormalised weighted values, then its largest score and its
	// exponentials' sum.
	//kernelgen:address
	AttendBlocks(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendMerge joins AttendBlocks' blocks: dst->src[0] = the blocks, f32 [hdv + 2, H, S, NB],
	// dst->src[1] = the mask; dst = f32 [hdv, H, S], AttendOne's result.
	//kernelgen:address
	AttendMerge(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendOneSoftcap, AttendBlocksSoftcap and AttendMergeSoftcap are the gemma family's
	// AttendOne, AttendBlocks and AttendMerge (kernels/cpu/c/gemma), userdata pointing to
	// { float scale, cap }: the logits soft-capped, cap·tanh(scale·q·k/cap), where cap > 0.
	//kernelgen:address
	AttendOneSoftcap(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendBlocksSoftcap is AttendBlocks with AttendOneSoftcap's userdata and soft-cap.
	//kernelgen:address
	AttendBlocksSoftcap(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendMergeSoftcap is AttendMerge, joining AttendBlocksSoftcap's blocks.
	//kernelgen:address
	AttendMergeSoftcap(dst Tensor, ith, nth Int, userdata Ptr)
	// AttendBlock is the cells of one of AttendBlocks' blocks.
	AttendBlock() Int
	// MulMatPacked is ggml_mul_mat(a, b) as a packed GEMM, with the signature of
	// ggml_custom_op_t: dst->src[0] = a, f32, f16, bf16 or q8_0 [K, M, G, S], dst->src[1] = b,
	// f32 [K, N, G·r, S·r3], dst = f32 [M, N, G·r, S·r3]; 64 rows of a packed transposed in f32
	// at a time, no horizontal sums. userdata is NULL or points to an int32 Causality
	// (ggml.Causality): which values of a causal attention's product it may skip.
	//kernelgen:address
	MulMatPacked(dst Tensor, ith, nth Int, userdata Ptr)
	// SoftMax is ggml_soft_max_ext(x, mask, scale, 0), with the signature of ggml_custom_op_t:
	// dst->src[0] = x, f32 [n, r1, r2, r3] (rows contiguous), dst->src[1] = mask, f32 or f16
	// [n, ≥ r1, m2, m3] (broadcast over dims 2 and 3) or NULL, userdata points to the float
	// scale; dst = f32 [n, r1, r2, r3]. Two passes over each row in the core's cache and a third
	// that divides; a row the mask hides entirely becomes zeros.
	//kernelgen:address
	SoftMax(dst Tensor, ith, nth Int, userdata Ptr)
	// SwigluBack is the backward of SwiGLU, h = silu(g)·u, with the signature of
	// ggml_custom_op_t: dst->src[0] = g, dst->src[1] = u and dst->src[2] = h's gradient, f32
	// [n, rows] with contiguous rows; dst = f32 [n, rows, 2], g's gradient then u's. One pass,
	// vectorized, where ggml's autodiff makes four operations, one of them scalar.
	//kernelgen:address
	SwigluBack(dst Tensor, ith, nth Int, userdata Ptr)
	// StoreTransposed writes new values into a value cache stored transposed, with the
	// signature of ggml_custom_op_t, in place: dst->src[0] = dst = the cache, f16 or f32
	// [cells, C]; dst->src[1] = v, f32 [C, n] (rows contiguous), the values of n tokens;
	// dst->src[2] = cells, i32 [n], each token's cell (distinct, below the cache's cells).
	// Element c of token t goes to row c, column cells[t], rounded to nearest as ggml's set_rows
	// rounds it.
	//kernelgen:address
	StoreTransposed(dst Tensor, ith, nth Int, userdata Ptr)
	// RMSNormMul is ggml_mul(ggml_rms_norm(x, eps), w), with the signature of
	// ggml_custom_op_t: dst->src[0] = x, f32 [n, r1, r2, r3] (rows contiguous), dst->src[1] = w,
	// f32 [n] (contiguous), userdata points to the float eps; dst = f32 [n, r1, r2, r3]. One
	// node where ggml makes two, the squares summed in double eight at a time where ggml's
	// kernel adds them one after the other.
	//kernelgen:address
	RMSNormMul(dst Tensor, ith, nth Int, userdata Ptr)
	// LayerNormMulAdd is ggml_add(ggml_mul(ggml_norm(x, eps), w), b), GPT-2's LayerNorm, with
	// the signature of ggml_custom_op_t: dst->src[0] = x, f32 [n, r1, r2, r3] (rows contiguous),
	// dst->src[1] = w and dst->src[2] = b, f32 [n] (contiguous), userdata points to the float
	// eps; dst = f32 [n, r1, r2, r3]. One node where ggml makes three, the values summed in
	// double eight at a time where ggml's kernel adds them one after the other (kernels/cpu/c/gpt2).
	//kernelgen:address
	LayerNormMulAdd(dst Tensor, ith, nth Int, userdata Ptr)
	// RopeTable is the table RopeApply rotates by, with the signature of ggml_custom_op_t:
	// dst->src[0] = pos, i32 [n], dst->src[1] = freq_factors, f32 [≥ dims/2] or NULL, userdata
	// points to { int32 dims; float freq_base, freq_scale, attn_factor }; dst = f32 [dims, n],
	// each token's cosines and sines side by side, as ggml's ROPE computes them (no YaRN).
	//kernelgen:address
	RopeTable(dst Tensor, ith, nth Int, userdata Ptr)
	// RopeApply is ggml's ROPE by a RopeTable, with the signature of ggml_custom_op_t:
	// dst->src[0] = x, f32 [ne0, heads, n] (rows contiguous), dst->src[1] = the table, f32
	// [dims, n], userdata points to an int32 (1: NeoX's pairs, 0: adjacent ones); dst = f32
	// [ne0, heads, n].
	//kernelgen:address
	RopeApply(dst Tensor, ith, nth Int, userdata Ptr)
	// QuantizeQ32 rounds columns to 8-bit integers for MulMatQ32, with the signature of
	// ggml_custom_op_t: dst->src[0] = x, f32 [k, n] (k a multiple of 32), dst = i8 [k + k/4, n]:
	// each column's bytes (a block of 32 divided by its largest magnitude over 127), then each
	// block's f32 scale and int32 sum of bytes.
	//kernelgen:address
	QuantizeQ32(dst Tensor, ith, nth Int, userdata Ptr)
	// MulMatQ32 is ggml_mul_mat(a, x) over q8_0, q4_0, q5_0 or q5_1 weights, with the signature
	// of ggml_custom_op_t: dst->src[0] = a [k, n] (2-D, rows contiguous), dst->src[1] =
	// QuantizeQ32's columns of x, i8 [k + k/4, m]; dst = f32 [n, m]. 64 rows packed as unsigned
	// bytes at a time, multiplied by the columns' bytes with AVX-512 VNNI, no horizontal sums.
	//kernelgen:address
	MulMatQ32(dst Tensor, ith, nth Int, userdata Ptr)
	// VectorizedQ32 is 1 where MulMatQ32 was compiled with AVX-512 VNNI, 0 where it does nothing.
	VectorizedQ32() Int
	// Vectorized is 1 where the kernels were compiled with AVX-512 or AVX2 (with F16C and FMA),
	// 0 where they are plain loops or do nothing, and ggml keeps their work.
	Vectorized() Int
	// ISA is the vector unit the kernels were compiled for: 512 for AVX-512, 256 for AVX2 with
	// F16C and FMA, 0 for none (what the kernel table's cpu target says the build is).
	ISA() Int
	// MulMatKquant is ggml_mul_mat(w, x) for q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1 weights repacked by KquantRepack,
	// with the signature of ggml_custom_op_t: dst->src[0] = the repacked bytes, i8
	// [KquantBytes(type, k, n)], dst->src[1] = x, f32 [k, m] (rows contiguous), userdata points
	// to a struct toy_kquant_params {magic, type, k, n}; dst = f32 [n, m]. x quantized as
	// ggml's q8_K, integer dot products (AVX-512 VNNI), 16 rows interleaved.
	//kernelgen:address
	MulMatKquant(dst Tensor, ith, nth Int, userdata Ptr)
	// KquantBytes is the size of a [k, n] weight of ggml type typ (q4_K, q5_K, q6_K, q4_0, q5_0, q5_1) as KquantRepack
	// writes it, or -1 for a type or shape it does not take.
	KquantBytes(typ Int, k, n int64) int64
	// KquantRepack rewrites the [k, n] weight src of ggml type typ into dst (KquantBytes
	// bytes), the layout MulMatKquant reads: 0, or -1 for a type or shape it does not take.
	KquantRepack(typ Int, src Const[Ptr], k, n int64, dst Ptr) Int
	// KquantFast is 1 where MulMatKquant was compiled with AVX-512 VNNI, 0 where it is a
	// plain loop.
	KquantFast() Int
}
