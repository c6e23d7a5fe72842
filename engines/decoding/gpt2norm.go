package decoding

import (
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// needLayerNormMulAdd is GPT-2's LayerNorm with its scale and bias (ggml.LayerNormMulAddCPU), a
// kernel of the gpt2 family's own module (kernels/cpu/c/gpt2/rms_norm.c). That module shadows
// the common rms_norm module for the models whose table entry is gpt2: this lookup resolves for
// them alone, and rms_norm_mul does not (the audit says it was dropped by shadowing).
var needLayerNormMulAdd = kernelrt.Need{Kernel: kernels.KernelCPUGpt2RmsNormLayerNormMulAdd}

// needNorm is the lookup of the decoders' norm: RMS, or LayerNorm with a bias.
func (m *GGUFModel) needNorm() kernelrt.Need {
	if m.Arch.Norm == transformer.NormLayer {
		return needLayerNormMulAdd
	}
	return needRMSNormMul
}

// layerNormMulAdd is LayerNorm of x times its scale w plus its bias b, the decoders' norm of a
// GPT-2 model (transformer.ForwardPass.LayerNormMulAdd): one operation of toy's (ggml.LayerNormMulAddCPU)
// where its lookup resolved and it fits, ggml's Norm, Mul and Add elsewhere. The results are the
// same to the bit (TestLayerNormMulAddCPU); it saves two nodes and the barriers before them.
func (m *GGUFModel) layerNormMulAdd(ctx *ggml.Context, x, w, b *ggml.Tensor, eps float32) *ggml.Tensor {
	if m.kernels.Has(needLayerNormMulAdd) && x != nil && w != nil && b != nil && ggml.LayerNormMulAddCPUFits(x, w, b, eps) == nil {
		return ctx.LayerNormMulAddCPU(x, w, b, eps)
	}
	if b == nil {
		return ctx.Mul(ctx.Norm(x, eps), w)
	}
	return ctx.Add(ctx.Mul(ctx.Norm(x, eps), w), b)
}
