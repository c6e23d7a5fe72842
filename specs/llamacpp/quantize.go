package llamacpp

import . "github.com/toyml/toy/specs/spec"

// The oracle quantizes a model with llama.cpp's own quantizer (what llama-quantize runs), so
// that toy export's choices of per-tensor types, and its bytes, can be compared with it.

// Ftype is a model file's weight type as llama-quantize names it (enum llama_ftype): a plain
// type, or a mix that gives some tensors more bits. The constants are the ones toy export
// writes.
//
//kernelgen:enum enum llama_ftype prefix=LLAMA_FTYPE_
type Ftype int32

const (
	// FtypeAllF32 stores every weight as f32.
	FtypeAllF32 Ftype = 0 //kernelgen:c LLAMA_FTYPE_ALL_F32
	// FtypeMostlyF16 stores the matrices as f16.
	FtypeMostlyF16 Ftype = 1 //kernelgen:c LLAMA_FTYPE_MOSTLY_F16
	// FtypeMostlyQ4_0 stores the matrices as q4_0.
	FtypeMostlyQ4_0 Ftype = 2 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q4_0
	// FtypeMostlyQ4_1 stores the matrices as q4_1.
	FtypeMostlyQ4_1 Ftype = 3 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q4_1
	// FtypeMostlyQ8_0 stores the matrices as q8_0.
	FtypeMostlyQ8_0 Ftype = 7 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q8_0
	// FtypeMostlyQ5_0 stores the matrices as q5_0.
	FtypeMostlyQ5_0 Ftype = 8 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q5_0
	// FtypeMostlyQ5_1 stores the matrices as q5_1.
	FtypeMostlyQ5_1 Ftype = 9 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q5_1
	// FtypeMostlyQ2_K is the q2_K mix.
	FtypeMostlyQ2_K Ftype = 10 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q2_K
	// FtypeMostlyQ3_K_S is the small q3_K mix.
	FtypeMostlyQ3_K_S Ftype = 11 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q3_K_S
	// FtypeMostlyQ3_K_M is the medium q3_K mix.
	FtypeMostlyQ3_K_M Ftype = 12 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q3_K_M
	// FtypeMostlyQ3_K_L is the large q3_K mix.
	FtypeMostlyQ3_K_L Ftype = 13 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q3_K_L
	// FtypeMostlyQ4_K_S is the small q4_K mix.
	FtypeMostlyQ4_K_S Ftype = 14 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q4_K_S
	// FtypeMostlyQ4_K_M is the medium q4_K mix.
	FtypeMostlyQ4_K_M Ftype = 15 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q4_K_M
	// FtypeMostlyQ5_K_S is the small q5_K mix.
	FtypeMostlyQ5_K_S Ftype = 16 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q5_K_S
	// FtypeMostlyQ5_K_M is the medium q5_K mix.
	FtypeMostlyQ5_K_M Ftype = 17 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q5_K_M
	// FtypeMostlyQ6_K stores the matrices as q6_K.
	FtypeMostlyQ6_K Ftype = 18 //kernelgen:c LLAMA_FTYPE_MOSTLY_Q6_K
	// FtypeMostlyIQ3_XS is the extra-small iq3 mix.
	FtypeMostlyIQ3_XS Ftype = 22 //kernelgen:c LLAMA_FTYPE_MOSTLY_IQ3_XS
	// FtypeMostlyIQ4_NL stores the matrices as iq4_nl.
	FtypeMostlyIQ4_NL Ftype = 25 //kernelgen:c LLAMA_FTYPE_MOSTLY_IQ4_NL
	// FtypeMostlyIQ3_S is the small iq3 mix.
	FtypeMostlyIQ3_S Ftype = 26 //kernelgen:c LLAMA_FTYPE_MOSTLY_IQ3_S
	// FtypeMostlyIQ3_M is the medium iq3 mix.
	FtypeMostlyIQ3_M Ftype = 27 //kernelgen:c LLAMA_FTYPE_MOSTLY_IQ3_M
	// FtypeMostlyIQ4_XS stores the matrices as iq4_xs.
	FtypeMostlyIQ4_XS Ftype = 30 //kernelgen:c LLAMA_FTYPE_MOSTLY_IQ4_XS
	// FtypeMostlyBF16 stores the matrices as bf16.
	FtypeMostlyBF16 Ftype = 32 //kernelgen:c LLAMA_FTYPE_MOSTLY_BF16
	// FtypeMostlyTQ1_0 stores the matrices as tq1_0.
	FtypeMostlyTQ1_0 Ftype = 36 //kernelgen:c LLAMA_FTYPE_MOSTLY_TQ1_0
	// FtypeMostlyTQ2_0 stores the matrices as tq2_0.
	FtypeMostlyTQ2_0 Ftype = 37 //kernelgen:c LLAMA_FTYPE_MOSTLY_TQ2_0
	// FtypeMostlyMXFP4Moe stores a mixture's experts as mxfp4, the rest as q8_0.
	FtypeMostlyMXFP4Moe Ftype = 38 //kernelgen:c LLAMA_FTYPE_MOSTLY_MXFP4_MOE
)

// ModelQuantizeParams say how ModelQuantize converts a model (struct
// llama_model_quantize_params); start from ModelQuantizeDefaultParams. The pointer fields are
// opaque here and left NULL.
//
//kernelgen:struct struct llama_model_quantize_params
type ModelQuantizeParams struct {
	// Nthread is the number of threads (0 or less: the hardware's).
	Nthread int32
	// Ftype is the type or mix to quantize to.
	Ftype Ftype
	// OutputTensorType overrides output.weight's type (GGML_TYPE_COUNT: the mix's).
	OutputTensorType GGMLType
	// TokenEmbeddingType overrides token_embd.weight's type (GGML_TYPE_COUNT: the mix's).
	TokenEmbeddingType GGMLType
	// AllowRequantize converts tensors that are already block-quantized.
	AllowRequantize bool
	// QuantizeOutputTensor quantizes output.weight.
	QuantizeOutputTensor bool
	// OnlyCopy copies every tensor as it is.
	OnlyCopy bool
	// Pure gives every tensor the mix's default type.
	Pure bool
	// KeepSplit writes as many shards as the input has.
	KeepSplit bool
	// Imatrix points to an importance matrix (NULL: none).
	Imatrix Ptr
	// KvOverrides points to metadata overrides (NULL: none).
	KvOverrides Ptr
	// TensorTypes points to per-tensor type overrides (NULL: none).
	TensorTypes Ptr
	// PruneLayers points to layers to drop (NULL: none).
	PruneLayers Ptr
}

// QuantizeAPI quantizes a GGUF model file. Each method binds llama_NAME.
//
//kernelgen:functions prefix=llama_
type QuantizeAPI interface {
	// ModelQuantizeDefaultParams are the default ModelQuantizeParams (q5_1, every tensor's
	// type chosen by the mix, no requantizing).
	ModelQuantizeDefaultParams() ModelQuantizeParams
	// ModelQuantize writes fnameOut, the model at fnameInp converted as params say: 0 on
	// success (llama.cpp logs why not).
	ModelQuantize(fnameInp string, fnameOut string, params Const[*ModelQuantizeParams]) uint32
}
