package ggml

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
)

// quantizable lists the types ggml_quantize_chunk handles (ggml.c); any other type would reach
// its assert(false).
var quantizable = map[Type]bool{
	F32: true, F16: true, BF16: true, Q4_0: true, Q4_1: true, Q5_0: true, Q5_1: true, Q8_0: true,
	Q2_K: true, Q3_K: true, Q4_K: true, Q5_K: true, Q6_K: true,
	ggmlc.TypeMXFP4: true, ggmlc.TypeTQ1_0: true, ggmlc.TypeTQ2_0: true,
	ggmlc.TypeIQ2_XXS: true, ggmlc.TypeIQ2_XS: true, ggmlc.TypeIQ3_XXS: true, ggmlc.TypeIQ3_S: true,
	ggmlc.TypeIQ2_S: true, ggmlc.TypeIQ1_S: true, ggmlc.TypeIQ1_M: true, ggmlc.TypeIQ4_NL: true,
	ggmlc.TypeIQ4_XS: true,
}

// Quantize converts rows of nPerRow f32 values to type typ with ggml's reference quantizer
// (ggml_quantize_chunk) and returns the encoded bytes. Types that need an importance matrix
// (the IQ family) are refused.
func Quantize(typ Type, src []float32, nPerRow int) ([]byte, error) {
	if !ValidType(typ) {
		return nil, fmt.Errorf("ggml: Quantize: invalid type %v", typ)
	}
	if nPerRow <= 0 || len(src)%nPerRow != 0 {
		return nil, fmt.Errorf("ggml: Quantize: %d values do not form rows of %d", len(src), nPerRow)
	}
	if nPerRow%BlockSize(typ) != 0 {
		return nil, fmt.Errorf("ggml: Quantize: a %s row holds a multiple of %d values, not %d", TypeName(typ), BlockSize(typ), nPerRow)
	}
	if !quantizable[typ] {
		return nil, fmt.Errorf("ggml: Quantize: ggml has no quantizer for %s", TypeName(typ))
	}
	if ggmlc.QuantizeRequiresImatrix(typ) {
		return nil, fmt.Errorf("ggml: Quantize: %s needs an importance matrix", TypeName(typ))
	}
	rows := len(src) / nPerRow
	row, _ := RowSize(typ, int64(nPerRow))
	out := make([]byte, rows*row)
	if rows == 0 {
		return out, nil
	}
	n := ggmlc.QuantizeChunk(typ, src, unsafe.Pointer(&out[0]), 0, int64(rows), int64(nPerRow), nil)
	if n != len(out) {
		return nil, fmt.Errorf("ggml: Quantize: ggml wrote %d bytes, expected %d", n, len(out))
	}
	return out, nil
}
