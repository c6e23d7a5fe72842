// Package cblas declares the single-precision GEMM of a CBLAS library (cblas.h, as OpenBLAS's
// libopenblas.so.0 provides it), which `toy bench` times as the best sgemm on the machine, next
// to ggml's own GEMM. It is a spec: cmd/kernelgen reads it and emits generated/cblas, whose Load
// opens the library with dlopen, so toy starts, and runs everything else, without it. See
// docs/SPECS.md.
package cblas

import . "github.com/toyml/toy/specs/spec"

// Order is the storage order of the matrices (enum CBLAS_ORDER).
//
//kernelgen:enum enum CBLAS_ORDER prefix=Cblas
type Order int32

const (
	OrderRowMajor Order = 101 //kernelgen:c CblasRowMajor
	OrderColMajor Order = 102 //kernelgen:c CblasColMajor
)

// Transpose says whether a GEMM operand is used as stored or transposed (enum
// CBLAS_TRANSPOSE).
//
//kernelgen:enum enum CBLAS_TRANSPOSE prefix=Cblas
type Transpose int32

const (
	TransposeNo  Transpose = 111 //kernelgen:c CblasNoTrans
	TransposeYes Transpose = 112 //kernelgen:c CblasTrans
)

// Funcs are the CBLAS calls toy binds.
//
//kernelgen:functions prefix=cblas_
type Funcs interface {
	// Sgemm computes C = alpha·op(A)·op(B) + beta·C for the m×k op(A), the k×n op(B) and the
	// m×n C, in the given storage order with leading dimensions lda, ldb and ldc.
	//kernelgen:c cblas_sgemm
	Sgemm(order Order, transA, transB Transpose, m, n, k Int, alpha float32, a Const[[]float32], lda Int,
		b Const[[]float32], ldb Int, beta float32, c []float32, ldc Int)
	// OpenblasSetNumThreads sets the threads OpenBLAS computes with (an OpenBLAS extension).
	//kernelgen:c openblas_set_num_threads
	OpenblasSetNumThreads(n Int)
}
