package llama

import (
	"math"

	"github.com/toyml/toy/ggml"
)

// rope returns the RoPE parameters of the configuration.
func (m *Model) rope() ggml.Rope {
	c := m.Cfg
	r := ggml.Rope{Dims: HeadDim(c), Mode: ggml.RopeNormal, FreqBase: c.RopeBase, FreqScale: 1,
		AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: c.Context}
	switch c.RopeScaling {
	case "linear":
		r.FreqScale = 1 / c.RopeScaleFactor
	case "yarn":
		r.FreqScale = 1 / c.RopeScaleFactor
		r.ExtFactor = 1
		if c.RopeOrigContext > 0 {
			r.OrigCtx = c.RopeOrigContext
		}
	}
	return r
}

// Forward builds the logits [vocab, T·B] of B sequences of T tokens in ctx. tokens is i32
// [T·B] (sequence-major), pos i32 [T] (the positions of one sequence), mask f32 [T, T, 1, B]
// (0 where query j may attend key i, -∞ elsewhere: causal, and block-causal across packed
// documents). Attention is unfused, so the graph has a backward. Errors are recorded on ctx.
func (m *Model) Forward(ctx *ggml.Context, tokens, pos, mask *ggml.Tensor, T, B int) *ggml.Tensor {
	return m.forward(ctx, tokens, pos, mask, T, B, ctx.MulMat)
}

// forward is Forward with the weight products made by linear(w, x), so the trainer can see
// (and differentiate itself) every weight matrix's product.
func (m *Model) forward(ctx *ggml.Context, tokens, pos, mask *ggml.Tensor, T, B int, linear func(w, x *ggml.Tensor) *ggml.Tensor) *ggml.Tensor {
	c := m.Cfg
	hd, H, Hkv := int64(HeadDim(c)), int64(c.NHeads), int64(c.NKVHeads)
	t, b, d := int64(T), int64(B), int64(c.DModel)
	r := m.rope()
	scale := float32(1 / math.Sqrt(float64(hd)))

	x := ctx.GetRows(m.TokEmbd, tokens) // [d, T·B]
	for _, l := range m.Layers {
		h := ctx.Mul(ctx.RMSNorm(x, c.RMSEps), l.AttnNorm)
		q, k, v := linear(l.Wq, h), linear(l.Wk, h), linear(l.Wv, h)
		if l.Bq != nil {
			q, k, v = ctx.Add(q, l.Bq), ctx.Add(k, l.Bk), ctx.Add(v, l.Bv)
		}
		q = ctx.RopeExt(ctx.Reshape(q, hd, H, t, b), pos, nil, r)
		k = ctx.RopeExt(ctx.Reshape(k, hd, Hkv, t, b), pos, nil, r)
		v = ctx.Reshape(v, hd, Hkv, t, b)
		// Fold the batch into the head dimension ([hd, T, heads·B]) so the GQA broadcast of k
		// and v over query heads stays within ggml's backward (GGML-NOTES §1.1).
		q = ctx.Reshape(ctx.Cont(ctx.Permute(q, [4]int{0, 2, 1, 3})), hd, t, H*b)
		k = ctx.Reshape(ctx.Cont(ctx.Permute(k, [4]int{0, 2, 1, 3})), hd, t, Hkv*b)
		vt := ctx.Reshape(ctx.Cont(ctx.Permute(v, [4]int{1, 2, 0, 3})), t, hd, Hkv*b) // vᵀ per head
		kq := ctx.Reshape(ctx.MulMat(k, q), t, t, H, b)                               // [keys, queries, H, B]
		kq = ctx.Reshape(ctx.SoftMaxExt(kq, mask, scale, 0), t, t, H*b)
		o := ctx.Reshape(ctx.MulMat(vt, kq), hd, t, H, b) // [hd, queries, H, B]
		o = ctx.Reshape(ctx.Cont(ctx.Permute(o, [4]int{0, 2, 1, 3})), d, t*b)
		x = ctx.Add(x, linear(l.Wo, o))

		h = ctx.Mul(ctx.RMSNorm(x, c.RMSEps), l.FFNNorm)
		x = ctx.Add(x, linear(l.Down, ctx.SwigluSplit(linear(l.Gate, h), linear(l.Up, h))))
	}
	x = ctx.Mul(ctx.RMSNorm(x, c.RMSEps), m.OutNorm)
	out := m.Output
	if out == nil {
		out = m.TokEmbd
	}
	return linear(out, x)
}

// BlockCausalMask fills mask ([T·T·B] floats, layout [key, query, 1, sequence]) for B
// sequences of T tokens: query j attends key i when i ≤ j and no document boundary lies
// between them. A boundary follows every token equal to sep (sep < 0: none, plain causal).
func BlockCausalMask(mask []float32, tokens []int32, T, B int, sep int32) {
	inf := float32(math.Inf(-1))
	for s := 0; s < B; s++ {
		seq := tokens[s*T : (s+1)*T]
		doc := make([]int, T) // document index of each position
		for i := 1; i < T; i++ {
			doc[i] = doc[i-1]
			if sep >= 0 && seq[i-1] == sep {
				doc[i]++
			}
		}
		for j := 0; j < T; j++ {
			row := mask[(s*T+j)*T : (s*T+j+1)*T]
			for i := range row {
				if i <= j && doc[i] == doc[j] {
					row[i] = 0
				} else {
					row[i] = inf
				}
			}
		}
	}
}

// graphSize bounds the nodes of a training graph for the model (forward, backward, AdamW).
func (m *Model) graphSize() int {
	perLayer := 64
	fwd := 16 + perLayer*m.Cfg.NLayers
	return 4*fwd + 4*len(m.all) + 256
}
