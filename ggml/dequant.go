package ggml

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
)

// dequantizers are ggml's to_float of each type Dequantize converts (ggml's type traits):
// what ggml's CPU backend runs to get rows of a tensor of the type, called directly.
var dequantizers = map[Type]func(x unsafe.Pointer, y []float32, k int64){
	F16: func(x unsafe.Pointer, y []float32, k int64) {
		ggmlc.Fp16ToFp32Row(unsafe.Slice((*uint16)(x), k), y, k)
	},
	BF16: ggmlc.Bf16ToFp32Row,
	Q4_0: ggmlc.DequantizeRowQ4_0, Q4_1: ggmlc.DequantizeRowQ4_1, Q5_0: ggmlc.DequantizeRowQ5_0,
	Q5_1: ggmlc.DequantizeRowQ5_1, Q8_0: ggmlc.DequantizeRowQ8_0, MXFP4: ggmlc.DequantizeRowMXFP4,
	Q2_K: ggmlc.DequantizeRowQ2_K, Q3_K: ggmlc.DequantizeRowQ3_K, Q4_K: ggmlc.DequantizeRowQ4_K,
	Q5_K: ggmlc.DequantizeRowQ5_K, Q6_K: ggmlc.DequantizeRowQ6_K,
	TQ1_0: ggmlc.DequantizeRowTQ1_0, TQ2_0: ggmlc.DequantizeRowTQ2_0,
	ggmlc.TypeIQ2_XXS: ggmlc.DequantizeRowIQ2_XXS, ggmlc.TypeIQ2_XS: ggmlc.DequantizeRowIQ2_XS,
	ggmlc.TypeIQ2_S: ggmlc.DequantizeRowIQ2_S, IQ3_XXS: ggmlc.DequantizeRowIQ3_XXS,
	ggmlc.TypeIQ1_S: ggmlc.DequantizeRowIQ1_S, ggmlc.TypeIQ1_M: ggmlc.DequantizeRowIQ1_M,
	IQ4_NL: ggmlc.DequantizeRowIQ4_NL, IQ4_XS: ggmlc.DequantizeRowIQ4_XS, IQ3_S: ggmlc.DequantizeRowIQ3_S,
}

// CanDequantize reports whether Dequantize converts data of type typ: f32, f16, bf16 and every
// block type ggml stores tensors in.
func CanDequantize(typ Type) bool {
	_, ok := dequantizers[typ]
	return ok || typ == F32
}

// Dequantize converts src, whole rows (or blocks) of type typ, to float32 in dst, whose length
// is the number of values src holds, with ggml's own conversion (its type traits' to_float):
// the values ggml's CPU backend computes with, without building a graph. Safe for concurrent
// use on disjoint data.
func Dequantize(typ Type, src []byte, dst []float32) error {
	if !CanDequantize(typ) {
		return fmt.Errorf("ggml: Dequantize: ggml has no conversion of %s to f32", TypeName(typ))
	}
	k := int64(len(dst))
	if k%int64(BlockSize(typ)) != 0 {
		return fmt.Errorf("ggml: Dequantize: %d values are not whole %s blocks of %d", k, TypeName(typ), BlockSize(typ))
	}
	if size, _ := RowSize(typ, k); size != len(src) {
		return fmt.Errorf("ggml: Dequantize: %d bytes of %s for %d values, which take %d", len(src), TypeName(typ), k, size)
	}
	if k == 0 {
		return nil
	}
	if typ == F32 {
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), k))
		return nil
	}
	dequantizers[typ](unsafe.Pointer(&src[0]), dst, k)
	return nil
}
