package transformer_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
)

// TestShapeRoundTrips draws random shapes of each family toy trains, in the family's view of
// the Llama shape, and checks that transformer.ArchitectureOf reads them as the family's model is built
// (the widths, heads and layers given; a key/value head per head where QKV is one projection;
// an image model's context its patches and class token, its classes the head's rows; the
// family's epsilon) and that transformer.ShapeOf gives the same view back.
func TestShapeRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 37))
	for i := 0; i < 200; i++ {
		heads := 1 + r.IntN(8)
		d, ff, layers := heads*(1+r.IntN(16)), 1+r.IntN(512), 1+r.IntN(12)
		eps := float32(r.IntN(100)) * 1e-7
		init := transformer.Init{Scale: float32(r.IntN(100)) / 1000, Seed: r.IntN(1000)}

		g := config.Gpt2{Vocab: 2 + r.IntN(5000), DModel: d, DFF: ff, NHeads: heads, NLayers: layers,
			Context: 1 + r.IntN(2048), LayerNormEps: eps, TiedOutput: r.IntN(2) == 0, InitScale: init.Scale, Seed: init.Seed}
		require.NoError(t, g.Validate())
		a := transformer.ArchitectureOf(transformer.GPT2Arch, g.Shape())
		assert.Equal(t, []int{g.Vocab, d, ff, heads, heads, layers, g.Context}, []int{a.Vocab, a.DModel, a.DFF, a.NHeads, a.NKVHeads, a.NLayers, a.Context})
		assert.Equal(t, eps, a.NormEps)
		assert.Equal(t, g.TiedOutput, a.TiedOutput)
		assert.Equal(t, transformer.NormLayer, a.Norm)
		assert.Equal(t, g, transformer.ShapeOf(&a, init).Gpt2())
		assert.Equal(t, transformer.ArchitectureFromGPT2(g), a)

		patch := 1 + r.IntN(16)
		side := patch * (1 + r.IntN(8))
		v := config.Vit{ImageSize: side, PatchSize: patch, Channels: 1 + r.IntN(4), DModel: d, DFF: ff, NHeads: heads,
			NLayers: layers, Classes: 2 + r.IntN(1000), LayerNormEps: eps, InitScale: init.Scale, Seed: init.Seed}
		require.NoError(t, v.Validate())
		a = transformer.ArchitectureOf(transformer.ViTArch, v.Shape())
		n := side / patch
		assert.Equal(t, []int{v.Classes, d, ff, heads, heads, layers, n*n + 1}, []int{a.Vocab, a.DModel, a.DFF, a.NHeads, a.NKVHeads, a.NLayers, a.Context})
		assert.Equal(t, []int{side, patch, v.Channels}, []int{a.ImageSize, a.PatchSize, a.Channels})
		assert.Equal(t, eps, a.NormEps)
		assert.False(t, a.TiedOutput)
		assert.Equal(t, transformer.InputPatches, a.Input)
		assert.Equal(t, v, transformer.ShapeOf(&a, init).Vit())
		assert.Equal(t, transformer.ArchitectureFromViT(v), a)

		kv := 1 + r.IntN(heads)
		for heads%kv != 0 {
			kv--
		}
		l := config.DefaultLlama()
		l.Vocab, l.DModel, l.DFF, l.NHeads, l.NKVHeads, l.NLayers, l.Context = 2+r.IntN(5000), d, ff, heads, kv, layers, 1+r.IntN(2048)
		l.RMSEps, l.TiedOutput, l.InitScale, l.Seed = eps, r.IntN(2) == 0, init.Scale, init.Seed
		a = transformer.ArchitectureOf(transformer.Arch, l.Shape())
		assert.Equal(t, transformer.ArchitectureFromConfig(l), a)
		assert.Equal(t, kv, a.NKVHeads)
		assert.Equal(t, l, transformer.ShapeOf(&a, init).Llama())
	}
}
