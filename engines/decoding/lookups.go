package decoding

import (
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// The decoders reach toy's own CPU operations through the kernel table (generated/kernels,
// kernels/cpu): each use of one is a lookup (a kernelrt.Need), KernelNeeds lists those a model's
// decoders make, the table resolves them (by default the build's own modules; the commands'
// gate the model's entry, which may refuse), and a decoder runs toy's kernel for a lookup that
// resolved and ggml's operation for any other. The lookups below are the only ones the
// decoders make: what the gate audits is what runs.

// needColumns is toy's product of a few columns (ggml.MulMatCols) over weights of type t.
func needColumns(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUMulMatColsMulMatCols, Type: ggml.TypeName(t)}
}

// NeedPacked is toy's packed GEMM (ggml.MulMatPacked) over an operand a of type t: a lookup
// the decoders and training's graphs (engines/training) both make.
func NeedPacked(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUMulMatPackedMulMatPacked, Type: ggml.TypeName(t)}
}

// needQ32 lists toy's 8-bit integer product (ggml.MulMatQ32) over weights of type t: the
// rounding of the columns and the product.
func needQ32(t ggml.Type) []kernelrt.Need {
	return []kernelrt.Need{{Kernel: kernels.KernelCPUMulMatQ32QuantizeQ32}, {Kernel: kernels.KernelCPUMulMatQ32MulMatQ32, Type: ggml.TypeName(t)}}
}

// needStore is toy's store of new values into a transposed value cache of type t
// (ggml.StoreTransposed).
func needStore(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUStoreStoreTransposed, Type: ggml.TypeName(t)}
}

// NeedSoftMax is toy's softmax of attention's scores (ggml.SoftMaxCPU), which the decoders'
// unfused attention and training's attention look up.
var NeedSoftMax = kernelrt.Need{Kernel: kernels.KernelCPUSoftMaxSoftMax}

// packedWeight says whether the decoders multiply a prompt by weights of type t with toy's
// packed GEMM at all: the float types; block-quantized weights stay with ggml's integer kernels.
func packedWeight(t ggml.Type) bool { return t == ggml.F32 || t == ggml.F16 || t == ggml.BF16 }

// q32Weight says whether the decoders multiply by weights of type t with toy's 8-bit integer
// product where its few-column product does not take them (a prompt, or a step of a type
// MulMatCols does not read): the block types of 32 values.
func q32Weight(t ggml.Type) bool {
	return t == ggml.Q8_0 || t == ggml.Q4_0 || t == ggml.Q5_0 || t == ggml.Q5_1
}

// needKQuant is toy's k-quant product (ggml.MulMatKQuant) over weights of type t, repacked at
// load (ggml.RepackKQuants).
func needKQuant(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUMulMatKquantMulMatKquant, Type: ggml.TypeName(t)}
}

// kquantWeight says whether the decoders multiply weights of type t with toy's k-quant kernel
// where it resolves: the types it repacks (ggml.KQuantType: q4_K, q5_K, q6_K, q4_0, q5_0 and
// q5_1), in a build where the kernel has AVX-512 VNNI.
func kquantWeight(t ggml.Type) bool { return ggml.KQuantType(t) && ggml.KQuantFast() }

// needAttend lists toy's attention of one query per sequence (ggml.AttendOne: one node, or two
// over a long cache) over a cache of type t.
func needAttend(t ggml.Type) []kernelrt.Need {
	return []kernelrt.Need{
		{Kernel: kernels.KernelCPUAttendAttendOne, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUAttendAttendBlocks, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUAttendAttendMerge},
	}
}

var (
	needRMSNormMul = kernelrt.Need{Kernel: kernels.KernelCPURmsNormRmsNormMul}
	needRope       = []kernelrt.Need{{Kernel: kernels.KernelCPURopeRopeTable}, {Kernel: kernels.KernelCPURopeRopeApply}}
)
