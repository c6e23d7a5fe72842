package ggml

// Type is a tensor element type (ggml_type): plain floats and ints, and block-quantized types
// whose rows are stored in blocks of BlckSize elements. Values are stored in GGUF files, so they
// never change; retired values (4, 5, 31-33, 36-38) are left out.
//
//kernelgen:enum enum ggml_type prefix=GGML_TYPE_ name=TypeName
type Type int32

const (
	// TypeF32 is IEEE 754 single precision.
	TypeF32 Type = 0
	// TypeF16 is IEEE 754 half precision.
	TypeF16 Type = 1
	// TypeQ4_0 is 4-bit quantization, blocks of 32 with one F16 scale.
	TypeQ4_0 Type = 2
	// TypeQ4_1 is 4-bit quantization, blocks of 32 with an F16 scale and minimum.
	TypeQ4_1 Type = 3
	// TypeQ5_0 is 5-bit quantization, blocks of 32 with one F16 scale.
	TypeQ5_0 Type = 6
	// TypeQ5_1 is 5-bit quantization, blocks of 32 with an F16 scale and minimum.
	TypeQ5_1 Type = 7
	// TypeQ8_0 is 8-bit quantization, blocks of 32 with one F16 scale.
	TypeQ8_0 Type = 8
	// TypeQ8_1 is 8-bit quantization, blocks of 32 with a scale and a sum (an intermediate
	// format for dot products).
	TypeQ8_1 Type = 9
	// TypeQ2_K is the 2-bit k-quant (super-blocks of 256).
	TypeQ2_K Type = 10
	// TypeQ3_K is the 3-bit k-quant (super-blocks of 256).
	TypeQ3_K Type = 11
	// TypeQ4_K is the 4-bit k-quant (super-blocks of 256).
	TypeQ4_K Type = 12
	// TypeQ5_K is the 5-bit k-quant (super-blocks of 256).
	TypeQ5_K Type = 13
	// TypeQ6_K is the 6-bit k-quant (super-blocks of 256).
	TypeQ6_K Type = 14
	// TypeQ8_K is the 8-bit k-quant (super-blocks of 256; an intermediate format for k-quant dot
	// products).
	TypeQ8_K Type = 15
	// TypeIQ2_XXS is the 2.06 bits-per-weight i-quant; it needs an importance matrix.
	TypeIQ2_XXS Type = 16
	// TypeIQ2_XS is the 2.31 bits-per-weight i-quant; it needs an importance matrix.
	TypeIQ2_XS Type = 17
	// TypeIQ3_XXS is the 3.06 bits-per-weight i-quant.
	TypeIQ3_XXS Type = 18
	// TypeIQ1_S is the 1.56 bits-per-weight i-quant; it needs an importance matrix.
	TypeIQ1_S Type = 19
	// TypeIQ4_NL is 4-bit non-linear quantization, blocks of 32.
	TypeIQ4_NL Type = 20
	// TypeIQ3_S is the 3.44 bits-per-weight i-quant.
	TypeIQ3_S Type = 21
	// TypeIQ2_S is the 2.5 bits-per-weight i-quant.
	TypeIQ2_S Type = 22
	// TypeIQ4_XS is the 4.25 bits-per-weight non-linear i-quant (super-blocks of 256).
	TypeIQ4_XS Type = 23
	// TypeI8 is a signed 8-bit integer.
	TypeI8 Type = 24
	// TypeI16 is a signed 16-bit integer.
	TypeI16 Type = 25
	// TypeI32 is a signed 32-bit integer (e.g. row indices for GetRows, rope positions).
	TypeI32 Type = 26
	// TypeI64 is a signed 64-bit integer (e.g. row indices for SetRows).
	TypeI64 Type = 27
	// TypeF64 is IEEE 754 double precision.
	TypeF64 Type = 28
	// TypeIQ1_M is the 1.75 bits-per-weight i-quant.
	TypeIQ1_M Type = 29
	// TypeBF16 is bfloat16 (the top 16 bits of an F32).
	TypeBF16 Type = 30
	// TypeTQ1_0 is ternary quantization at 1.69 bits per weight.
	TypeTQ1_0 Type = 34
	// TypeTQ2_0 is ternary quantization at 2.06 bits per weight.
	TypeTQ2_0 Type = 35
	// TypeMXFP4 is the OCP microscaling 4-bit float format (blocks of 32 with a shared E8M0
	// exponent).
	TypeMXFP4 Type = 39
	// TypeCount is the number of type values (one past the largest); not a type.
	TypeCount Type = 40
)

// Status is the result of a computation or allocation (ggml_status).
//
//kernelgen:enum enum ggml_status prefix=GGML_STATUS_
type Status int32

const (
	// StatusAllocFailed means a buffer could not be allocated.
	StatusAllocFailed Status = -2
	// StatusFailed means the computation failed.
	StatusFailed Status = -1
	// StatusSuccess means the computation finished.
	StatusSuccess Status = 0
	// StatusAborted means the computation was stopped by an abort callback.
	StatusAborted Status = 1
)

// Prec is the precision an operation computes in (ggml_prec), set with MulMatSetPrec or
// FlashAttnExtSetPrec.
//
//kernelgen:enum enum ggml_prec prefix=GGML_PREC_
type Prec int32

const (
	// PrecDefault lets the backend choose (it may accumulate in F16 on GPUs).
	PrecDefault Prec = 0
	// PrecF32 forces F32 accumulation.
	PrecF32 Prec = 10
)

// Op is the operation that computes a tensor (ggml_op), as found in Tensor.Op.
//
//kernelgen:enum enum ggml_op prefix=GGML_OP_ name=OpName
type Op int32

const (
	// OpNone marks a leaf: a tensor that is not computed (weights, inputs, constants).
	OpNone Op = 0
	// OpDup copies a tensor (Dup).
	OpDup Op = 1
	// OpAdd is element-wise addition with broadcasting (Add).
	OpAdd Op = 2
	// OpAddID adds rows of b selected by ids (AddID).
	OpAddID Op = 3
	// OpAdd1 adds a scalar tensor (Add1).
	OpAdd1 Op = 4 //kernelgen:c GGML_OP_ADD1
	// OpAcc adds b into a strided view of a (Acc).
	OpAcc Op = 5
	// OpSub is element-wise subtraction (Sub).
	OpSub Op = 6
	// OpMul is element-wise multiplication with broadcasting (Mul).
	OpMul Op = 7
	// OpDiv is element-wise division (Div).
	OpDiv Op = 8
	// OpSqr squares each element (Sqr).
	OpSqr Op = 9
	// OpSqrt takes the square root of each element (Sqrt).
	OpSqrt Op = 10
	// OpLog takes the natural logarithm of each element (Log).
	OpLog Op = 11
	// OpSin takes the sine of each element (Sin).
	OpSin Op = 12
	// OpCos takes the cosine of each element (Cos).
	OpCos Op = 13
	// OpSum sums all elements into a scalar (Sum).
	OpSum Op = 14
	// OpSumRows sums each row (SumRows).
	OpSumRows Op = 15
	// OpCumsum is the cumulative sum along rows (Cumsum).
	OpCumsum Op = 16
	// OpMean averages each row (Mean).
	OpMean Op = 17
	// OpArgmax finds the index of each row's maximum (Argmax).
	OpArgmax Op = 18
	// OpCountEqual counts equal elements (CountEqual).
	OpCountEqual Op = 19
	// OpRepeat tiles a tensor to a larger shape (Repeat).
	OpRepeat Op = 20
	// OpRepeatBack sums repetitions back into the smaller shape (the gradient of OpRepeat).
	OpRepeatBack Op = 21
	// OpConcat joins two tensors along a dimension (Concat).
	OpConcat Op = 22
	// OpSiluBack is the gradient of SiLU.
	OpSiluBack Op = 23
	// OpNorm normalizes each row to zero mean and unit variance (Norm).
	OpNorm Op = 24
	// OpRMSNorm divides each row by its root mean square (RMSNorm).
	OpRMSNorm Op = 25
	// OpRMSNormBack is the gradient of OpRMSNorm (RMSNormBack).
	OpRMSNormBack Op = 26
	// OpGroupNorm normalizes groups of channels (GroupNorm).
	OpGroupNorm Op = 27
	// OpL2Norm divides each row by its L2 norm (L2Norm).
	OpL2Norm Op = 28 //kernelgen:c GGML_OP_L2_NORM
	// OpMulMat is matrix multiplication (MulMat).
	OpMulMat Op = 29
	// OpMulMatID is matrix multiplication with per-row expert selection (MulMatID).
	OpMulMatID Op = 30
	// OpOutProd is the outer product (OutProd).
	OpOutProd Op = 31
	// OpScale multiplies by a scalar and adds a bias (Scale, ScaleBias).
	OpScale Op = 32
	// OpSet writes b into a strided view of a (Set).
	OpSet Op = 33
	// OpCpy copies a into b, converting the type (Cpy, Cast).
	OpCpy Op = 34
	// OpCont makes a contiguous copy (Cont).
	OpCont Op = 35
	// OpReshape is a reshaped view (Reshape1D..4D).
	OpReshape Op = 36
	// OpView is a strided view (View1D..4D).
	OpView Op = 37
	// OpPermute is a view with permuted axes (Permute).
	OpPermute Op = 38
	// OpTranspose is a view with the first two axes swapped (Transpose).
	OpTranspose Op = 39
	// OpGetRows gathers rows by index (GetRows).
	OpGetRows Op = 40
	// OpGetRowsBack is the gradient of OpGetRows.
	OpGetRowsBack Op = 41
	// OpSetRows scatters rows by index into a destination (SetRows).
	OpSetRows Op = 42
	// OpDiag makes a diagonal matrix from a vector.
	OpDiag Op = 43
	// OpDiagMaskInf sets elements above the diagonal to -inf (DiagMaskInf).
	OpDiagMaskInf Op = 44
	// OpDiagMaskZero sets elements above the diagonal to 0 (DiagMaskZero).
	OpDiagMaskZero Op = 45
	// OpSoftMax is the row-wise softmax, optionally scaled and masked (SoftMax, SoftMaxExt).
	OpSoftMax Op = 46
	// OpSoftMaxBack is the gradient of OpSoftMax.
	OpSoftMaxBack Op = 47
	// OpRope is rotary position embedding (RopeExt).
	OpRope Op = 48
	// OpRopeBack is the gradient of OpRope.
	OpRopeBack Op = 49
	// OpClamp clamps each element to a range (Clamp).
	OpClamp Op = 50
	// OpConvTranspose1D is a transposed 1-D convolution.
	OpConvTranspose1D Op = 51
	// OpIm2col unfolds convolution patches into rows (Im2col).
	OpIm2col Op = 52 //kernelgen:c GGML_OP_IM2COL
	// OpIm2colBack is the gradient of OpIm2col.
	OpIm2colBack Op = 53 //kernelgen:c GGML_OP_IM2COL_BACK
	// OpIm2col3D unfolds 3-D convolution patches into rows.
	OpIm2col3D Op = 54 //kernelgen:c GGML_OP_IM2COL_3D
	// OpConv2D is a direct 2-D convolution.
	OpConv2D Op = 55
	// OpConv3D is a direct 3-D convolution.
	OpConv3D Op = 56
	// OpConv2DDw is a direct depthwise 2-D convolution.
	OpConv2DDw Op = 57
	// OpConvTranspose2D is a transposed 2-D convolution.
	OpConvTranspose2D Op = 58
	// OpPool1D is 1-D max or average pooling.
	OpPool1D Op = 59
	// OpPool2D is 2-D max or average pooling (Pool2D).
	OpPool2D Op = 60
	// OpPool2DBack is the gradient of OpPool2D.
	OpPool2DBack Op = 61
	// OpUpscale resamples to a larger or smaller size (Upscale, Interpolate).
	OpUpscale Op = 62
	// OpPad pads with zeros (Pad).
	OpPad Op = 63
	// OpPadReflect1D pads the first dimension by reflection.
	OpPadReflect1D Op = 64
	// OpRoll rotates elements along each dimension (Roll).
	OpRoll Op = 65
	// OpArange fills a 1-D tensor with an arithmetic sequence (Arange).
	OpArange Op = 66
	// OpTimestepEmbedding is the sinusoidal timestep embedding of diffusion models.
	OpTimestepEmbedding Op = 67
	// OpArgsort sorts each row and returns the indices (Argsort).
	OpArgsort Op = 68
	// OpTopK returns the indices of each row's k largest elements (TopK).
	OpTopK Op = 69
	// OpLeakyRelu is the leaky ReLU (LeakyRelu).
	OpLeakyRelu Op = 70
	// OpTri zeroes a matrix outside a triangle (Tri).
	OpTri Op = 71
	// OpFill sets every element to a constant (Fill).
	OpFill Op = 72
	// OpFlashAttnExt is fused scaled-dot-product attention (FlashAttnExt).
	OpFlashAttnExt Op = 73
	// OpFlashAttnBack is the (unmaintained) gradient of flash attention.
	OpFlashAttnBack Op = 74
	// OpSsmConv is the convolution of state-space models (Mamba).
	OpSsmConv Op = 75
	// OpSsmScan is the selective scan of state-space models (Mamba).
	OpSsmScan Op = 76
	// OpWinPart partitions into windows (SAM).
	OpWinPart Op = 77
	// OpWinUnpart reverses OpWinPart.
	OpWinUnpart Op = 78
	// OpGetRelPos gathers relative positions (SAM).
	OpGetRelPos Op = 79
	// OpAddRelPos adds relative position terms (SAM).
	OpAddRelPos Op = 80
	// OpRwkvWkv6 is the RWKV v6 time mixing.
	OpRwkvWkv6 Op = 81 //kernelgen:c GGML_OP_RWKV_WKV6
	// OpGatedLinearAttn is gated linear attention.
	OpGatedLinearAttn Op = 82
	// OpRwkvWkv7 is the RWKV v7 time mixing.
	OpRwkvWkv7 Op = 83 //kernelgen:c GGML_OP_RWKV_WKV7
	// OpSolveTri solves a triangular system.
	OpSolveTri Op = 84
	// OpUnary is an element-wise activation; the UnaryOp is in the op params (Unary, Gelu, ...).
	OpUnary Op = 85
	// OpMapCustom1 is a user callback on one tensor.
	OpMapCustom1 Op = 86 //kernelgen:c GGML_OP_MAP_CUSTOM1
	// OpMapCustom2 is a user callback on two tensors.
	OpMapCustom2 Op = 87 //kernelgen:c GGML_OP_MAP_CUSTOM2
	// OpMapCustom3 is a user callback on three tensors.
	OpMapCustom3 Op = 88 //kernelgen:c GGML_OP_MAP_CUSTOM3
	// OpCustom is a user callback on any number of tensors.
	OpCustom Op = 89
	// OpCrossEntropyLoss is the mean cross-entropy of softmax(logits) against labels
	// (CrossEntropyLoss).
	OpCrossEntropyLoss Op = 90
	// OpCrossEntropyLossBack is the gradient of OpCrossEntropyLoss.
	OpCrossEntropyLossBack Op = 91
	// OpOptStepAdamW is one in-place AdamW update (OptStepAdamW).
	OpOptStepAdamW Op = 92 //kernelgen:c GGML_OP_OPT_STEP_ADAMW
	// OpOptStepSGD is one in-place SGD update (OptStepSGD).
	OpOptStepSGD Op = 93
	// OpGlu is a gated linear unit; the GluOp is in the op params (Glu, Swiglu, ...).
	OpGlu Op = 94
	// OpCount is the number of ops; not an op.
	OpCount Op = 95
)

// UnaryOp is an element-wise activation (ggml_unary_op), the kind of an OpUnary node.
//
//kernelgen:enum enum ggml_unary_op prefix=GGML_UNARY_OP_ name=UnaryOpName
type UnaryOp int32

const (
	// UnaryOpAbs is |x|.
	UnaryOpAbs UnaryOp = 0
	// UnaryOpSgn is the sign of x (-1, 0 or 1).
	UnaryOpSgn UnaryOp = 1
	// UnaryOpNeg is -x.
	UnaryOpNeg UnaryOp = 2
	// UnaryOpStep is 1 for x > 0, else 0.
	UnaryOpStep UnaryOp = 3
	// UnaryOpTanh is tanh(x).
	UnaryOpTanh UnaryOp = 4
	// UnaryOpElu is the exponential linear unit.
	UnaryOpElu UnaryOp = 5
	// UnaryOpRelu is max(x, 0).
	UnaryOpRelu UnaryOp = 6
	// UnaryOpSigmoid is 1/(1+exp(-x)).
	UnaryOpSigmoid UnaryOp = 7
	// UnaryOpGelu is GELU, tanh approximation.
	UnaryOpGelu UnaryOp = 8
	// UnaryOpGeluQuick is GELU, sigmoid approximation x*sigmoid(1.702x).
	UnaryOpGeluQuick UnaryOp = 9
	// UnaryOpSilu is x*sigmoid(x).
	UnaryOpSilu UnaryOp = 10
	// UnaryOpHardswish is x*relu6(x+3)/6.
	UnaryOpHardswish UnaryOp = 11
	// UnaryOpHardsigmoid is relu6(x+3)/6.
	UnaryOpHardsigmoid UnaryOp = 12
	// UnaryOpExp is exp(x).
	UnaryOpExp UnaryOp = 13
	// UnaryOpExpm1 is exp(x)-1.
	UnaryOpExpm1 UnaryOp = 14 //kernelgen:c GGML_UNARY_OP_EXPM1
	// UnaryOpSoftplus is log(1+exp(x)).
	UnaryOpSoftplus UnaryOp = 15
	// UnaryOpGeluErf is exact GELU, x*Φ(x) with erf.
	UnaryOpGeluErf UnaryOp = 16
	// UnaryOpXielu is the xIELU activation.
	UnaryOpXielu UnaryOp = 17
	// UnaryOpFloor rounds down.
	UnaryOpFloor UnaryOp = 18
	// UnaryOpCeil rounds up.
	UnaryOpCeil UnaryOp = 19
	// UnaryOpRound rounds to nearest.
	UnaryOpRound UnaryOp = 20
	// UnaryOpTrunc rounds towards zero.
	UnaryOpTrunc UnaryOp = 21
	// UnaryOpCount is the number of unary ops; not an op.
	UnaryOpCount UnaryOp = 22
)

// GluOp is a gated linear unit (ggml_glu_op), the kind of an OpGlu node: act(x)*gate.
//
//kernelgen:enum enum ggml_glu_op prefix=GGML_GLU_OP_ name=GluOpName
type GluOp int32

const (
	// GluOpReglu is relu(x)*g.
	GluOpReglu GluOp = 0
	// GluOpGeglu is gelu(x)*g (tanh approximation).
	GluOpGeglu GluOp = 1
	// GluOpSwiglu is silu(x)*g (LLaMA's feed-forward).
	GluOpSwiglu GluOp = 2
	// GluOpSwigluOAI is gpt-oss's clamped swiglu variant with alpha and limit.
	GluOpSwigluOAI GluOp = 3
	// GluOpGegluErf is gelu(x)*g with exact (erf) GELU.
	GluOpGegluErf GluOp = 4
	// GluOpGegluQuick is gelu_quick(x)*g.
	GluOpGegluQuick GluOp = 5
	// GluOpCount is the number of GLU ops; not an op.
	GluOpCount GluOp = 6
)

// RopeMode selects how RopeExt pairs up the dimensions it rotates (the GGML_ROPE_TYPE_
// #defines, passed as C int).
//
//kernelgen:enum int prefix=GGML_ROPE_TYPE_
type RopeMode int32

const (
	// RopeModeNormal rotates adjacent pairs (x[2i], x[2i+1]), as LLaMA GGUFs expect.
	RopeModeNormal RopeMode = 0
	// RopeModeNeox rotates pairs (x[i], x[i+n/2]), as GPT-NeoX and raw Hugging Face weights
	// expect.
	RopeModeNeox RopeMode = 2
	// RopeModeMRope is multimodal rope with position sections (Qwen2-VL).
	RopeModeMRope RopeMode = 8 //kernelgen:c GGML_ROPE_TYPE_MROPE
	// RopeModeVision is multimodal rope for vision encoders.
	RopeModeVision RopeMode = 24
	// RopeModeIMRope is interleaved multimodal rope (Qwen3-VL).
	RopeModeIMRope RopeMode = 40 //kernelgen:c GGML_ROPE_TYPE_IMROPE
)

// TensorFlag is a bit in Tensor.Flags (ggml_tensor_flag), set with SetInput, SetOutput,
// SetParam and SetLoss.
//
//kernelgen:enum enum ggml_tensor_flag prefix=GGML_TENSOR_FLAG_
type TensorFlag int32

const (
	// TensorFlagInput marks a graph input: allocators place inputs first, without overlap, so
	// they can be set before compute.
	TensorFlagInput TensorFlag = 1
	// TensorFlagOutput marks a graph output: allocators never reuse or overwrite its memory.
	TensorFlagOutput TensorFlag = 2
	// TensorFlagParam marks a trainable parameter: BuildBackwardExpand computes its gradient.
	TensorFlagParam TensorFlag = 4
	// TensorFlagLoss marks a loss (a scalar F32) that backpropagation starts from.
	TensorFlagLoss TensorFlag = 8
)

// SortOrder is the direction of Argsort (ggml_sort_order).
//
//kernelgen:enum enum ggml_sort_order prefix=GGML_SORT_ORDER_
type SortOrder int32

const (
	// SortOrderAsc sorts smallest first.
	SortOrderAsc SortOrder = 0
	// SortOrderDesc sorts largest first.
	SortOrderDesc SortOrder = 1
)

// ScaleMode is the resampling filter of Upscale and Interpolate (ggml_scale_mode).
//
//kernelgen:enum enum ggml_scale_mode prefix=GGML_SCALE_MODE_
type ScaleMode int32

const (
	// ScaleModeNearest is nearest-neighbour sampling.
	ScaleModeNearest ScaleMode = 0
	// ScaleModeBilinear is bilinear interpolation over the first two dimensions.
	ScaleModeBilinear ScaleMode = 1
	// ScaleModeBicubic is bicubic interpolation over the first two dimensions.
	ScaleModeBicubic ScaleMode = 2
	// ScaleModeCount is the number of modes; not a mode.
	ScaleModeCount ScaleMode = 3
)

// PoolOp is the reduction of Pool2D (ggml_op_pool).
//
//kernelgen:enum enum ggml_op_pool prefix=GGML_OP_POOL_
type PoolOp int32

const (
	// PoolOpMax takes the maximum of each window.
	PoolOpMax PoolOp = 0
	// PoolOpAvg takes the mean of each window.
	PoolOpAvg PoolOp = 1
	// PoolOpCount is the number of pooling ops; not an op.
	PoolOpCount PoolOp = 2
)

// TriType selects the triangle that Tri keeps (ggml_tri_type).
//
//kernelgen:enum enum ggml_tri_type prefix=GGML_TRI_TYPE_
type TriType int32

const (
	// TriTypeUpperDiag keeps the upper triangle including the diagonal.
	TriTypeUpperDiag TriType = 0
	// TriTypeUpper keeps the strict upper triangle.
	TriTypeUpper TriType = 1
	// TriTypeLowerDiag keeps the lower triangle including the diagonal.
	TriTypeLowerDiag TriType = 2
	// TriTypeLower keeps the strict lower triangle.
	TriTypeLower TriType = 3
)

// GGUFType is the type of a GGUF metadata value or array element (gguf_type).
//
//kernelgen:enum enum gguf_type prefix=GGUF_TYPE_
type GGUFType int32

const (
	// GGUFTypeUint8 is uint8.
	GGUFTypeUint8 GGUFType = 0 //kernelgen:c GGUF_TYPE_UINT8
	// GGUFTypeInt8 is int8.
	GGUFTypeInt8 GGUFType = 1 //kernelgen:c GGUF_TYPE_INT8
	// GGUFTypeUint16 is uint16.
	GGUFTypeUint16 GGUFType = 2 //kernelgen:c GGUF_TYPE_UINT16
	// GGUFTypeInt16 is int16.
	GGUFTypeInt16 GGUFType = 3 //kernelgen:c GGUF_TYPE_INT16
	// GGUFTypeUint32 is uint32.
	GGUFTypeUint32 GGUFType = 4 //kernelgen:c GGUF_TYPE_UINT32
	// GGUFTypeInt32 is int32.
	GGUFTypeInt32 GGUFType = 5 //kernelgen:c GGUF_TYPE_INT32
	// GGUFTypeFloat32 is float32.
	GGUFTypeFloat32 GGUFType = 6 //kernelgen:c GGUF_TYPE_FLOAT32
	// GGUFTypeBool is a bool, stored as one byte.
	GGUFTypeBool GGUFType = 7
	// GGUFTypeString is a length-prefixed UTF-8 string.
	GGUFTypeString GGUFType = 8
	// GGUFTypeArray is an array; its element type is read with GGUFGetArrType.
	GGUFTypeArray GGUFType = 9
	// GGUFTypeUint64 is uint64.
	GGUFTypeUint64 GGUFType = 10 //kernelgen:c GGUF_TYPE_UINT64
	// GGUFTypeInt64 is int64.
	GGUFTypeInt64 GGUFType = 11 //kernelgen:c GGUF_TYPE_INT64
	// GGUFTypeFloat64 is float64.
	GGUFTypeFloat64 GGUFType = 12 //kernelgen:c GGUF_TYPE_FLOAT64
	// GGUFTypeCount is the number of types; not a type.
	GGUFTypeCount GGUFType = 13
)

// BackendBufferUsage tells the scheduler what a buffer holds (ggml_backend_buffer_usage).
//
//kernelgen:enum enum ggml_backend_buffer_usage prefix=GGML_BACKEND_BUFFER_USAGE_
type BackendBufferUsage int32

const (
	// BackendBufferUsageAny is the default: no particular use.
	BackendBufferUsageAny BackendBufferUsage = 0
	// BackendBufferUsageWeights marks model weights: the scheduler runs ops on the backend that
	// holds their weights.
	BackendBufferUsageWeights BackendBufferUsage = 1
	// BackendBufferUsageCompute marks intermediate (compute) tensors.
	BackendBufferUsageCompute BackendBufferUsage = 2
)

// DeviceType is the kind of a Device (ggml_backend_dev_type).
//
//kernelgen:enum enum ggml_backend_dev_type prefix=GGML_BACKEND_DEVICE_TYPE_
type DeviceType int32

const (
	// DeviceTypeCPU is the CPU, using system memory.
	DeviceTypeCPU DeviceType = 0
	// DeviceTypeGPU is a GPU with dedicated memory.
	DeviceTypeGPU DeviceType = 1
	// DeviceTypeIGPU is an integrated GPU using host memory.
	DeviceTypeIGPU DeviceType = 2
	// DeviceTypeAccel is an accelerator used together with the CPU backend (e.g. BLAS, AMX).
	DeviceTypeAccel DeviceType = 3
)
