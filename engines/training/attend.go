package training

import (
	"github.com/toyml/toy/ggml"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
)

// attendPacked is the attention of B packed sequences of T tokens (n = T·B, sequence-major)
// under a mask [T, T, 1, B] (0 where a query may attend a key, -∞ elsewhere): unfused
// (k·q, softmax, v·p), so the graph has a backward. The batch is folded into the head
// dimension ([hd, T, heads·B]) so that the GQA broadcast of keys and values over query heads
// stays within ggml's backward (docs/GGML.md, "Autodiff: which ops have a backward"). In a
// training graph gb builds the attention
// and its backward (gemmBackward.attention; the trainer refuses soft-capped attention). Without
// gb, the products and the probabilities are computed as a training graph on the CPU does, by
// toy's kernels in ks (cpuProduct, attentionProbs), for a pass whose activations must be those
// of such a graph to the bit (recompute).
func attendPacked(ctx *ggml.Context, a *transformer.Architecture, mask *ggml.Tensor, T, B int, gb *gemmBackward, ks decoding.KernelSet) func(il int, q, k, v *ggml.Tensor) *ggml.Tensor {
	hdk, hdv, H, Hkv := int64(a.HeadDimK), int64(a.HeadDimV), int64(a.NHeads), int64(a.NKVHeads)
	t, b := int64(T), int64(B)
	causal := a.Input != transformer.InputPatches // a language model's mask is (block-)causal; an image model's hides nothing
	scores, probs, _ := attentionModes(causal)
	return func(_ int, q, k, v *ggml.Tensor) *ggml.Tensor {
		q = ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(q, hdk, H, t, b), [4]int{0, 2, 1, 3})), hdk, t, H*b)
		k = ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(k, hdk, Hkv, t, b), [4]int{0, 2, 1, 3})), hdk, t, Hkv*b)
		vt := ctx.Reshape(ctx.Cont(ctx.Permute(ctx.Reshape(v, hdv, Hkv, t, b), [4]int{1, 2, 0, 3})), t, hdv, Hkv*b) // vᵀ per head
		var o *ggml.Tensor                                                                                          // [hdv, queries, H·B]
		if gb != nil {
			o = gb.attention(k, q, vt, mask, a.QueryScale, H, b, causal)
		} else {
			kq := cpuProduct(ctx, ks, k, q, scores) // [keys, queries, H·B]
			scale := a.QueryScale
			if c := a.AttnSoftcap; c > 0 {
				kq = ctx.Scale(ctx.Tanh(ctx.Scale(kq, scale/c)), c)
				scale = 1
			}
			o = cpuProduct(ctx, ks, vt, attentionProbs(ctx, ks, kq, mask, scale, H, b), probs)
		}
		o = ctx.Reshape(o, hdv, t, H, b)
		return ctx.Reshape(ctx.Cont(ctx.Permute(o, [4]int{0, 2, 1, 3})), hdv*H, t*b)
	}
}
