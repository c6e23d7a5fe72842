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
	if err := checkQuantize(typ, src, nPerRow); err != nil {
		return nil, err
	}
	row, _ := RowSize(typ, int64(nPerRow))
	out := make([]byte, len(src)/nPerRow*row)
	return out, QuantizeInto(typ, src, nPerRow, out)
}

// QuantizeInto is Quantize into dst, which must be exactly the encoded size of src. Safe for
// concurrent use on disjoint data (each row is quantized on its own).
func QuantizeInto(typ Type, src []float32, nPerRow int, dst []byte) error {
	if err := checkQuantize(typ, src, nPerRow); err != nil {
		return err
	}
	rows := len(src) / nPerRow
	row, _ := RowSize(typ, int64(nPerRow))
	if len(dst) != rows*row {
		return fmt.Errorf("ggml: Quantize: %d bytes for %d rows of %s, which take %d", len(dst), rows, TypeName(typ), rows*row)
	}
	if rows == 0 {
		return nil
	}
	n := ggmlc.QuantizeChunk(typ, src, unsafe.Pointer(&dst[0]), 0, int64(rows), int64(nPerRow), nil)
	if n != len(dst) {
		return fmt.Errorf("ggml: Quantize: ggml wrote %d bytes, expected %d", n, len(dst))
	}
	return nil
}

func checkQuantize(typ Type, src []float32, nPerRow int) error {
	if !ValidType(typ) {
		return fmt.Errorf("ggml: Quantize: invalid type %v", typ)
	}
	if nPerRow <= 0 || len(src)%nPerRow != 0 {
		return fmt.Errorf("ggml: Quantize: %d values do not form rows of %d", len(src), nPerRow)
	}
	if nPerRow%BlockSize(typ) != 0 {
		return fmt.Errorf("ggml: Quantize: a %s row holds a multiple of %d values, not %d", TypeName(typ), BlockSize(typ), nPerRow)
	}
	if !quantizable[typ] {
		return fmt.Errorf("ggml: Quantize: ggml has no quantizer for %s", TypeName(typ))
	}
	if ggmlc.QuantizeRequiresImatrix(typ) {
		return fmt.Errorf("ggml: Quantize: %s needs an importance matrix", TypeName(typ))
	}
	return nil
}
