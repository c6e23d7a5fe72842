package training

import (
	"math"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// Forward builds the logits [vocab, T·B] of B sequences of T tokens in ctx. tokens is i32
// [T·B] (sequence-major), pos i32 [T·B] (each token's position in its sequence), mask f32
// [T, T, 1, B] (0 where query j may attend key i, -∞ elsewhere: causal, and block-causal across
// packed documents). Attention is unfused, so the graph has a backward. Errors are recorded on
// ctx.
func (m *Model) Forward(ctx *ggml.Context, tokens, pos, mask *ggml.Tensor, T, B int) *ggml.Tensor {
	return m.trainable().forward(ctx, tokens, pos, mask, T, B, nil)
}

// trainable is the model as the trainer sees it: every weight is trained.
func (m *Model) trainable() *trainable {
	var params []*ggml.Tensor
	for _, t := range m.all {
		if !m.frozen[t] && m.roles[t] != transformer.RoleRopeFreqs {
			params = append(params, t)
		}
	}
	return &trainable{arch: &m.Arch, w: &m.w, backend: m.backend, params: params, matrix: m.IsMatrix}
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
