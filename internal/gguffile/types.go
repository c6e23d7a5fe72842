package gguffile

import "fmt"

// ggml tensor types, with the numeric ids of ggml's enum ggml_type.
// Ids 4, 5, 31, 32, 33, 36, 37 and 38 belonged to types that ggml has removed;
// they are rejected like any unknown id.
const (
	TypeF32     uint32 = 0
	TypeF16     uint32 = 1
	TypeQ4_0    uint32 = 2
	TypeQ4_1    uint32 = 3
	TypeQ5_0    uint32 = 6
	TypeQ5_1    uint32 = 7
	TypeQ8_0    uint32 = 8
	TypeQ8_1    uint32 = 9
	TypeQ2_K    uint32 = 10
	TypeQ3_K    uint32 = 11
	TypeQ4_K    uint32 = 12
	TypeQ5_K    uint32 = 13
	TypeQ6_K    uint32 = 14
	TypeQ8_K    uint32 = 15
	TypeIQ2_XXS uint32 = 16
	TypeIQ2_XS  uint32 = 17
	TypeIQ3_XXS uint32 = 18
	TypeIQ1_S   uint32 = 19
	TypeIQ4_NL  uint32 = 20
	TypeIQ3_S   uint32 = 21
	TypeIQ2_S   uint32 = 22
	TypeIQ4_XS  uint32 = 23
	TypeI8      uint32 = 24
	TypeI16     uint32 = 25
	TypeI32     uint32 = 26
	TypeI64     uint32 = 27
	TypeF64     uint32 = 28
	TypeIQ1_M   uint32 = 29
	TypeBF16    uint32 = 30
	TypeTQ1_0   uint32 = 34
	TypeTQ2_0   uint32 = 35
	TypeMXFP4   uint32 = 39

	// typeCount is GGML_TYPE_COUNT: every valid id is below it.
	typeCount uint32 = 40
)

type typeTraits struct {
	name      string
	blockSize int // elements per block; 0 for removed types
	typeSize  int // bytes per block; 0 for removed types
}

// traits mirrors the blck_size and type_size columns of ggml.c's type_traits
// table (type_size is sizeof the block struct in ggml-common.h).
var traits = [typeCount]typeTraits{
	TypeF32:     {"f32", 1, 4},
	TypeF16:     {"f16", 1, 2},
	TypeQ4_0:    {"q4_0", 32, 18},
	TypeQ4_1:    {"q4_1", 32, 20},
	4:           {"q4_2", 0, 0},
	5:           {"q4_3", 0, 0},
	TypeQ5_0:    {"q5_0", 32, 22},
	TypeQ5_1:    {"q5_1", 32, 24},
	TypeQ8_0:    {"q8_0", 32, 34},
	TypeQ8_1:    {"q8_1", 32, 36},
	TypeQ2_K:    {"q2_K", 256, 84},
	TypeQ3_K:    {"q3_K", 256, 110},
	TypeQ4_K:    {"q4_K", 256, 144},
	TypeQ5_K:    {"q5_K", 256, 176},
	TypeQ6_K:    {"q6_K", 256, 210},
	TypeQ8_K:    {"q8_K", 256, 292},
	TypeIQ2_XXS: {"iq2_xxs", 256, 66},
	TypeIQ2_XS:  {"iq2_xs", 256, 74},
	TypeIQ3_XXS: {"iq3_xxs", 256, 98},
	TypeIQ1_S:   {"iq1_s", 256, 50},
	TypeIQ4_NL:  {"iq4_nl", 32, 18},
	TypeIQ3_S:   {"iq3_s", 256, 110},
	TypeIQ2_S:   {"iq2_s", 256, 82},
	TypeIQ4_XS:  {"iq4_xs", 256, 136},
	TypeI8:      {"i8", 1, 1},
	TypeI16:     {"i16", 1, 2},
	TypeI32:     {"i32", 1, 4},
	TypeI64:     {"i64", 1, 8},
	TypeF64:     {"f64", 1, 8},
	TypeIQ1_M:   {"iq1_m", 256, 56},
	TypeBF16:    {"bf16", 1, 2},
	31:          {"q4_0_4_4", 0, 0},
	32:          {"q4_0_4_8", 0, 0},
	33:          {"q4_0_8_8", 0, 0},
	TypeTQ1_0:   {"tq1_0", 256, 54},
	TypeTQ2_0:   {"tq2_0", 256, 66},
	36:          {"iq4_nl_4_4", 0, 0},
	37:          {"iq4_nl_4_8", 0, 0},
	38:          {"iq4_nl_8_8", 0, 0},
	TypeMXFP4:   {"mxfp4", 32, 17},
}

// validType reports whether t is a ggml type that may appear in a GGUF file.
func validType(t uint32) bool {
	return t < typeCount && traits[t].blockSize != 0
}

// TypeSize returns the size in bytes of one block of ggml type t, and false
// if t is not a valid (known, not removed) type.
func TypeSize(t uint32) (int, bool) {
	if !validType(t) {
		return 0, false
	}
	return traits[t].typeSize, true
}

// BlockSize returns the number of elements in one block of ggml type t
// (1 for the plain types, 32 or 256 for the quantized ones), and false if t is
// not a valid type.
func BlockSize(t uint32) (int, bool) {
	if !validType(t) {
		return 0, false
	}
	return traits[t].blockSize, true
}

// TypeName returns ggml's name of type t ("f32", "q4_K", ...). Removed types
// get their old name followed by " (removed)", unknown ids "type(N)".
func TypeName(t uint32) string {
	switch {
	case validType(t):
		return traits[t].name
	case t < typeCount:
		return traits[t].name + " (removed)"
	default:
		return fmt.Sprintf("type(%d)", t)
	}
}

// RowSize returns the number of bytes taken by n elements of type t, and
// false if t is not a valid type, n is negative or not a multiple of the
// type's block size, or the size does not fit in an int64.
func RowSize(t uint32, n int64) (int64, bool) {
	if !validType(t) || n < 0 {
		return 0, false
	}
	tr := traits[t]
	if n%int64(tr.blockSize) != 0 {
		return 0, false
	}
	return mulInt64(n/int64(tr.blockSize), int64(tr.typeSize))
}

// mulInt64 returns a*b for non-negative a and b, and false on overflow.
func mulInt64(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > (1<<63-1)/b {
		return 0, false
	}
	return a * b, true
}
