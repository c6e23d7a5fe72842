package ggml

import . "github.com/toyml/toy/specs/spec"

// CPUOps are the CPU backend's extras from ggml-cpu.h: computing a graph directly in a context
// with data, element access to tensors in host memory, and the SIMD features the library was
// compiled with.
//
//kernelgen:functions prefix=ggml_
type CPUOps interface {
	// GraphComputeWithCtx computes g on the CPU with nThreads threads, taking its work buffer
	// from ctx; all tensors must have data in host memory (a context without NoAlloc).
	GraphComputeWithCtx(ctx Context, g Graph, nThreads Int) Status
	// NewI32 makes an I32 scalar holding value (ctx must allocate data).
	NewI32(ctx Context, value int32) Tensor
	// NewF32 makes an F32 scalar holding value (ctx must allocate data).
	NewF32(ctx Context, value float32) Tensor
	// SetI32 sets every element of the host tensor t to value and returns t.
	SetI32(t Tensor, value int32) Tensor
	// SetF32 sets every element of the host tensor t to value and returns t.
	SetF32(t Tensor, value float32) Tensor
	// GetI32_1D reads element i (flat index, innermost dimension first) of the host tensor t,
	// converted to int32.
	GetI32_1D(t Const[Tensor], i Int) int32
	// SetI32_1D writes value, converted to t's type, to element i of the host tensor t.
	SetI32_1D(t Const[Tensor], i Int, value int32)
	// GetI32ND reads element [i0, i1, i2, i3] of the host tensor t, converted to int32.
	//kernelgen:c ggml_get_i32_nd
	GetI32ND(t Const[Tensor], i0, i1, i2, i3 Int) int32
	// SetI32ND writes value, converted to t's type, to element [i0, i1, i2, i3] of the host
	// tensor t.
	//kernelgen:c ggml_set_i32_nd
	SetI32ND(t Const[Tensor], i0, i1, i2, i3 Int, value int32)
	// GetF32_1D reads element i (flat index, innermost dimension first) of the host tensor t,
	// converted to float32.
	GetF32_1D(t Const[Tensor], i Int) float32
	// SetF32_1D writes value, converted to t's type, to element i of the host tensor t.
	SetF32_1D(t Const[Tensor], i Int, value float32)
	// GetF32ND reads element [i0, i1, i2, i3] of the host tensor t, converted to float32.
	//kernelgen:c ggml_get_f32_nd
	GetF32ND(t Const[Tensor], i0, i1, i2, i3 Int) float32
	// SetF32ND writes value, converted to t's type, to element [i0, i1, i2, i3] of the host
	// tensor t.
	//kernelgen:c ggml_set_f32_nd
	SetF32ND(t Const[Tensor], i0, i1, i2, i3 Int, value float32)

	// CPUHasSSE3 is 1 when the library was compiled with SSE3.
	CPUHasSSE3() Int
	// CPUHasAVX is 1 when the library was compiled with AVX.
	CPUHasAVX() Int
	// CPUHasAVX2 is 1 when the library was compiled with AVX2 (the cgo build needs -march for
	// this).
	CPUHasAVX2() Int
	// CPUHasBMI2 is 1 when the library was compiled with BMI2.
	CPUHasBMI2() Int
	// CPUHasF16C is 1 when the library was compiled with F16C.
	CPUHasF16C() Int
	// CPUHasFMA is 1 when the library was compiled with FMA.
	CPUHasFMA() Int
	// CPUHasAVX512 is 1 when the library was compiled with AVX-512F.
	CPUHasAVX512() Int
	// CPUHasNEON is 1 when the library was compiled with ARM NEON.
	CPUHasNEON() Int
	// CPUHasArmFma is 1 when the library was compiled with ARM FMA.
	CPUHasArmFma() Int
	// CPUHasDotprod is 1 when the library was compiled with ARM dot-product instructions.
	CPUHasDotprod() Int
	// CPUHasMatmulInt8 is 1 when the library was compiled with ARM int8 matrix multiply.
	//kernelgen:c ggml_cpu_has_matmul_int8
	CPUHasMatmulInt8() Int
	// CPUHasSVE is 1 when the library was compiled with ARM SVE.
	CPUHasSVE() Int
	// CPUHasLlamafile is 1 when the library was compiled with llamafile's tinyBLAS kernels.
	CPUHasLlamafile() Int
}
