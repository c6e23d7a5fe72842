package decoding

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestBytesPerToken: the bytes a generated token streams, against a hand computation on tiny
// random models: the sum of the named matrices' ggml byte sizes (the output head, or the tied
// token embeddings), and the key/value cache of positions 0..p for the token at p, summed by
// hand over the test's positions.
func TestBytesPerToken(t *testing.T) {
	for _, c := range []struct {
		variant string
		typ     ggml.Type
	}{{"smollm2", ggml.F16}, {"llama", ggml.Q8_0}, {"llama", ggml.F32}} {
		a := transformertest.TinyArch(c.variant)
		path := filepath.Join(t.TempDir(), "m.gguf")
		require.NoError(t, transformer.WriteRandomGGUF(path, a, c.typ, 3))
		m, err := OpenModel(path, ModelOptions{Threads: 1})
		require.NoError(t, err)
		var want int64
		for il := range a.NLayers {
			for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
				want += int64(m.Tensor(fmt.Sprintf("blk.%d.%s.weight", il, n)).Bytes())
			}
		}
		head := "output.weight"
		if a.TiedOutput {
			head = "token_embd.weight"
		}
		want += int64(m.Tensor(head).Bytes())
		assert.Equal(t, want, m.MatrixBytesPerToken(), c.variant)

		for _, kv := range []struct {
			typ  KVCacheType
			size float64 // bytes of an element
		}{{KVF16, 2}, {KVF32, 4}, {KVQ8_0, 34.0 / 32}} {
			for _, depth := range []int{0, 7} {
				const tokens = 5
				perPosition := float64(a.NLayers) * float64(a.NKVHeads*(a.HeadDimK+a.HeadDimV)) * kv.size
				sum := 0.0
				for i := range tokens {
					sum += float64(depth+i+1) * perPosition
				}
				assert.InDelta(t, sum/tokens, m.KVBytesRead(kv.typ, depth, tokens), 1e-9, "%s %s d%d", c.variant, kv.typ, depth)
			}
		}
		assert.Zero(t, m.KVBytesRead(KVF16, 0, 0))
		require.NoError(t, m.Close())
	}
}

// TestKVBytesReadSliding: a sliding-window layer reads at most the window's positions.
func TestKVBytesReadSliding(t *testing.T) {
	a := transformertest.TinyArch("mistral")
	require.Positive(t, a.SlidingWindow)
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, transformer.WriteRandomGGUF(path, a, ggml.F16, 3))
	m, err := OpenModel(path, ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	perPosition := float64(a.NLayers) * float64(a.NKVHeads*(a.HeadDimK+a.HeadDimV)) * 2
	p := a.SlidingWindow + 10 // beyond the window: every layer reads the window
	assert.InDelta(t, float64(a.SlidingWindow)*perPosition, m.KVBytesRead(KVF16, p, 1), 1e-9)
	assert.InDelta(t, 3*perPosition, m.KVBytesRead(KVF16, 2, 1), 1e-9)
}

// TestMatrixBytesPerTokenMoE: of a mixture of experts, a token reads the router whole and the
// experts it uses: the expert tensors' bytes × used / experts, by hand.
func TestMatrixBytesPerTokenMoE(t *testing.T) {
	a := transformertest.TinyArch("qwen3moe")
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, transformer.WriteRandomGGUF(path, a, ggml.Q8_0, 3))
	m, err := OpenModel(path, ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	want := 0.0
	size := func(name string) float64 { return float64(m.Tensor(name).Bytes()) }
	for il := range a.NLayers {
		p := fmt.Sprintf("blk.%d.", il)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_inp"} {
			want += size(p + n + ".weight")
		}
		for _, n := range []string{"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"} {
			want += size(p+n+".weight") * float64(a.NExpertsUsed) / float64(a.NExperts)
		}
	}
	if a.TiedOutput {
		want += size("token_embd.weight")
	} else {
		want += size("output.weight")
	}
	assert.Equal(t, int64(want), m.MatrixBytesPerToken())
}
