package speculative

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestDFlashTensorLayout: the drafter's tensors, now its architecture's tensor table, are the
// drafter files' layout, written out here as the format defines it (fc, hidden_norm, per block
// the norms, a key/value head per query head of the target's head size and a SwiGLU of the
// target's width, output_norm; nothing of the target's biases, QK norms or RoPE factors), in
// file order, for a GQA llama target and a qwen3 one (QK norms, heads wider than d/H).
func TestDFlashTensorLayout(t *testing.T) {
	for _, variant := range []string{"llama", "qwen3"} {
		t.Run(variant, func(t *testing.T) {
			a := transformertest.TinyArch(variant)
			a.NLayers = 3
			m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 5), decoding.ModelOptions{})
			cfg := DFlashConfig{Gamma: 4, TargetLayers: []int{0, 1}, Layers: 2}
			df, err := NewDFlash(m, cfg, 1)
			require.NoError(t, err)
			defer df.Close()
			d, q, ff := int64(a.DModel), int64(a.NHeads*a.HeadDimK), int64(a.DFF)
			want := []string{fmt.Sprint("fc.weight ", []int64{2 * d, d}), fmt.Sprint("hidden_norm.weight ", []int64{d})}
			for il := range cfg.Layers {
				p := fmt.Sprintf("blk.%d.", il)
				for _, s := range []struct {
					name string
					ne   []int64
				}{{"attn_norm", []int64{d}}, {"attn_q", []int64{d, q}}, {"attn_k", []int64{d, q}}, {"attn_v", []int64{d, q}},
					{"attn_output", []int64{q, d}}, {"ffn_norm", []int64{d}}, {"ffn_gate", []int64{d, ff}},
					{"ffn_up", []int64{d, ff}}, {"ffn_down", []int64{ff, d}}} {
					want = append(want, fmt.Sprint(p+s.name+".weight ", s.ne))
				}
			}
			want = append(want, fmt.Sprint("output_norm.weight ", []int64{d}))
			var got []string
			for _, p := range df.params {
				got = append(got, fmt.Sprint(p.Name()+" ", p.Shape()))
			}
			assert.Equal(t, want, got)
		})
	}
}
