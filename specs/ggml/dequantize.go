package ggml

import . "github.com/toyml/toy/specs/spec"

// Dequantize are ggml's reference dequantizers (ggml-quants.h, ggml's internal header whose
// functions ggml exports): each converts k values (whole blocks) of its block type at x to
// float32 in y. They are what ggml's type traits give as to_float for the block types, and
// what ggml's CPU backend calls to get rows of a quantized tensor. x is declared as a plain
// pointer to the blocks.
//
//kernelgen:functions prefix=ggml_
type Dequantize interface {
	// Bf16ToFp32Row converts n bfloat16 values at x to float32 in y.
	//kernelgen:c ggml_bf16_to_fp32_row
	//kernelgen:ctype x const ggml_bf16_t *
	Bf16ToFp32Row(x Ptr, y []float32, n int64)
	// DequantizeRowQ4_0 converts k q4_0 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q4_0
	//kernelgen:ctype x const block_q4_0 *
	DequantizeRowQ4_0(x Ptr, y []float32, k int64)
	// DequantizeRowQ4_1 converts k q4_1 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q4_1
	//kernelgen:ctype x const block_q4_1 *
	DequantizeRowQ4_1(x Ptr, y []float32, k int64)
	// DequantizeRowQ5_0 converts k q5_0 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q5_0
	//kernelgen:ctype x const block_q5_0 *
	DequantizeRowQ5_0(x Ptr, y []float32, k int64)
	// DequantizeRowQ5_1 converts k q5_1 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q5_1
	//kernelgen:ctype x const block_q5_1 *
	DequantizeRowQ5_1(x Ptr, y []float32, k int64)
	// DequantizeRowQ8_0 converts k q8_0 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q8_0
	//kernelgen:ctype x const block_q8_0 *
	DequantizeRowQ8_0(x Ptr, y []float32, k int64)
	// DequantizeRowMXFP4 converts k mxfp4 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_mxfp4
	//kernelgen:ctype x const block_mxfp4 *
	DequantizeRowMXFP4(x Ptr, y []float32, k int64)
	// DequantizeRowQ2_K converts k q2_K values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q2_K
	//kernelgen:ctype x const block_q2_K *
	DequantizeRowQ2_K(x Ptr, y []float32, k int64)
	// DequantizeRowQ3_K converts k q3_K values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q3_K
	//kernelgen:ctype x const block_q3_K *
	DequantizeRowQ3_K(x Ptr, y []float32, k int64)
	// DequantizeRowQ4_K converts k q4_K values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q4_K
	//kernelgen:ctype x const block_q4_K *
	DequantizeRowQ4_K(x Ptr, y []float32, k int64)
	// DequantizeRowQ5_K converts k q5_K values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q5_K
	//kernelgen:ctype x const block_q5_K *
	DequantizeRowQ5_K(x Ptr, y []float32, k int64)
	// DequantizeRowQ6_K converts k q6_K values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_q6_K
	//kernelgen:ctype x const block_q6_K *
	DequantizeRowQ6_K(x Ptr, y []float32, k int64)
	// DequantizeRowTQ1_0 converts k tq1_0 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_tq1_0
	//kernelgen:ctype x const block_tq1_0 *
	DequantizeRowTQ1_0(x Ptr, y []float32, k int64)
	// DequantizeRowTQ2_0 converts k tq2_0 values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_tq2_0
	//kernelgen:ctype x const block_tq2_0 *
	DequantizeRowTQ2_0(x Ptr, y []float32, k int64)
	// DequantizeRowIQ2_XXS converts k iq2_xxs values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq2_xxs
	//kernelgen:ctype x const block_iq2_xxs *
	DequantizeRowIQ2_XXS(x Ptr, y []float32, k int64)
	// DequantizeRowIQ2_XS converts k iq2_xs values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq2_xs
	//kernelgen:ctype x const block_iq2_xs *
	DequantizeRowIQ2_XS(x Ptr, y []float32, k int64)
	// DequantizeRowIQ2_S converts k iq2_s values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq2_s
	//kernelgen:ctype x const block_iq2_s *
	DequantizeRowIQ2_S(x Ptr, y []float32, k int64)
	// DequantizeRowIQ3_XXS converts k iq3_xxs values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq3_xxs
	//kernelgen:ctype x const block_iq3_xxs *
	DequantizeRowIQ3_XXS(x Ptr, y []float32, k int64)
	// DequantizeRowIQ1_S converts k iq1_s values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq1_s
	//kernelgen:ctype x const block_iq1_s *
	DequantizeRowIQ1_S(x Ptr, y []float32, k int64)
	// DequantizeRowIQ1_M converts k iq1_m values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq1_m
	//kernelgen:ctype x const block_iq1_m *
	DequantizeRowIQ1_M(x Ptr, y []float32, k int64)
	// DequantizeRowIQ4_NL converts k iq4_nl values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq4_nl
	//kernelgen:ctype x const block_iq4_nl *
	DequantizeRowIQ4_NL(x Ptr, y []float32, k int64)
	// DequantizeRowIQ4_XS converts k iq4_xs values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq4_xs
	//kernelgen:ctype x const block_iq4_xs *
	DequantizeRowIQ4_XS(x Ptr, y []float32, k int64)
	// DequantizeRowIQ3_S converts k iq3_s values at x (k/BlckSize blocks) to float32 in y.
	//kernelgen:c dequantize_row_iq3_s
	//kernelgen:ctype x const block_iq3_s *
	DequantizeRowIQ3_S(x Ptr, y []float32, k int64)
}
