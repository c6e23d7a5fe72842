package ggml

import (
	"fmt"

	"github.com/toyml/toy/generated/ggmlc"
)

// Type is a tensor element type (ggml_type).
type Type = ggmlc.Type

// The element types toy computes with; every ggml type is available as ggmlc.Type*.
const (
	F32  = ggmlc.TypeF32
	F16  = ggmlc.TypeF16
	BF16 = ggmlc.TypeBF16
	Q8_0 = ggmlc.TypeQ8_0
	Q4_0 = ggmlc.TypeQ4_0
	Q4_1 = ggmlc.TypeQ4_1
	Q5_0 = ggmlc.TypeQ5_0
	Q5_1 = ggmlc.TypeQ5_1
	Q2_K = ggmlc.TypeQ2_K
	Q3_K = ggmlc.TypeQ3_K
	Q4_K = ggmlc.TypeQ4_K
	Q5_K = ggmlc.TypeQ5_K
	Q6_K = ggmlc.TypeQ6_K
	Q8_1 = ggmlc.TypeQ8_1 // ggml's intermediate for dot products; no tensor is stored in it
	Q8_K = ggmlc.TypeQ8_K // likewise, for the k-quants
	I8   = ggmlc.TypeI8
	I16  = ggmlc.TypeI16
	I32  = ggmlc.TypeI32
	I64  = ggmlc.TypeI64
	F64  = ggmlc.TypeF64

	// IQ4_NL is a 32-element non-linear 4-bit type; llama.cpp's quantizer falls back to it for
	// q2_K and q3_K matrices whose rows do not split into 256-element super-blocks.
	IQ4_NL = ggmlc.TypeIQ4_NL
	// IQ4_XS is the 4.25-bit non-linear type of 256-element super-blocks (llama-quantize's
	// IQ4_XS, which needs no importance matrix).
	IQ4_XS = ggmlc.TypeIQ4_XS
	// IQ3_S and IQ3_XXS are 3-bit non-linear types of 256-element super-blocks (the IQ3 mixes of
	// llama-quantize, which need no importance matrix).
	IQ3_S   = ggmlc.TypeIQ3_S
	IQ3_XXS = ggmlc.TypeIQ3_XXS
	// TQ1_0 and TQ2_0 are ternary types of 256-element super-blocks.
	TQ1_0 = ggmlc.TypeTQ1_0
	TQ2_0 = ggmlc.TypeTQ2_0
	// MXFP4 is the 4-bit microscaling float type of 32-element blocks (gpt-oss's experts).
	MXFP4 = ggmlc.TypeMXFP4
)

// ValidType reports whether t is a ggml type this library can size (not retired, not out of
// range).
func ValidType(t Type) bool {
	if t < 0 || t >= ggmlc.TypeCount {
		return false
	}
	return ggmlc.BlckSize(t) > 0 && ggmlc.TypeSize(t) > 0
}

// TypeName is ggml's name for t ("f32", "q4_K"), or "Type(N)" for an invalid one.
func TypeName(t Type) string {
	if !ValidType(t) {
		return t.String()
	}
	return ggmlc.TypeName(t)
}

// BlockSize is the number of elements in one block of t (1 for unquantized types).
func BlockSize(t Type) int { return int(ggmlc.BlckSize(t)) }

// TypeSize is the size in bytes of one block of t.
func TypeSize(t Type) int { return ggmlc.TypeSize(t) }

// RowSize is the size in bytes of a row of n elements of type t; n must be a multiple of the
// block size.
func RowSize(t Type, n int64) (int, error) {
	if !ValidType(t) {
		return 0, fmt.Errorf("ggml: invalid type %v", t)
	}
	if n < 0 || n%int64(BlockSize(t)) != 0 {
		return 0, fmt.Errorf("ggml: a row of %s holds a multiple of %d elements, not %d", TypeName(t), BlockSize(t), n)
	}
	return ggmlc.RowSize(t, n), nil
}

// IsQuantized reports whether t is a block-quantized type.
func IsQuantized(t Type) bool { return ValidType(t) && ggmlc.IsQuantized(t) }

// Version is the version string of the linked ggml.
func Version() string { return ggmlc.Version() }
