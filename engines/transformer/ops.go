package transformer

import "github.com/toyml/toy/ggml"

// CPUSoftMax is SoftMaxExt(x, mask, scale, 0) by toy's own kernel (ggml.SoftMaxCPU) where cpu
// (its lookup resolved) allows it and the operands fit it, by ggml's otherwise:
// the one choice of training's attention (attentionProbs) and the decoder's unfused attention
// (kvCache.attend).
func CPUSoftMax(ctx *ggml.Context, cpu bool, x, mask *ggml.Tensor, scale float32) *ggml.Tensor {
	if cpu && x != nil && mask != nil && ggml.CPUKernelsFast() && ggml.SoftMaxCPUFits(x, mask, scale) == nil {
		return ctx.SoftMaxCPU(x, mask, scale)
	}
	return ctx.SoftMaxExt(x, mask, scale, 0)
}
