// Package reference is an independent, pure-Go float64 implementation of the
// ggml tensor operations that toy binds. Tests of every bound ggml op compare
// the C result against the function of the same name here, on random inputs.
//
// Everything follows ggml's conventions (ggml.h, ggml.c for shapes and the CPU
// kernels in ggml-cpu/ops.cpp and ggml-cpu/vec.h for the math, as vendored in
// github.com/ollama/ollama v0.17.4):
//
//   - A Tensor has four dimensions Ne[0..3]; Ne[0] varies fastest, and a "row"
//     is Ne[0] contiguous elements. Element (i0,i1,i2,i3) is stored at
//     i0 + Ne0*(i1 + Ne1*(i2 + Ne2*i3)). Unused dimensions are 1.
//   - Every function returns a new, contiguous Tensor (views such as
//     ggml_permute correspond to ggml_cont of the view).
//   - Shape rules are checked like GGML_ASSERT: a violation panics with a
//     message naming the ggml function.
//
// The arithmetic is done in float64, so results differ from ggml's float32
// kernels only by float32 rounding, except where a doc comment says that ggml
// itself approximates (for example the FP16 lookup table behind ggml_gelu on
// the CPU; see GeluTanhCPU). The number-format helpers in formats.go are
// bit-exact instead: they reproduce ggml's fp16/bf16 conversions and its
// reference Q8_0/Q4_0 quantizers byte for byte.
//
// The package has no dependencies beyond the standard library and no cgo.
package reference
