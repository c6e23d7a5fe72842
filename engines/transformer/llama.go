package transformer

import (
	"fmt"

	"github.com/toyml/toy/generated/config"
)

// Arch is the GGUF general.architecture of this engine's checkpoints.
const Arch = "llama"

// HeadDim is the size of one attention head.
func HeadDim(c Config) int { return c.DModel / c.NHeads }

// Validate checks c beyond its generated bounds.
func Validate(c Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("llama config: %w", err)
	}
	if hd := HeadDim(c); hd%2 != 0 {
		return fmt.Errorf("llama config: head size d_model/n_heads = %d must be even for RoPE", hd)
	}
	return nil
}

// ConfigFromArch is the training configuration of an architecture's shared parameters, with
// the spec's defaults for the rest (initialisation): the inverse of archFromConfig.
func ConfigFromArch(a *Architecture) Config {
	c := config.DefaultLlama()
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads = a.Vocab, a.DModel, a.DFF, a.NHeads, a.NKVHeads
	c.NLayers, c.Context, c.RopeBase, c.RMSEps = a.NLayers, a.Context, a.RopeBase, a.NormEps
	c.TiedOutput, c.QKVBias = a.TiedOutput, a.QKVBias
	switch {
	case a.RopeYaRN:
		c.RopeScaling, c.RopeScaleFactor, c.RopeOrigContext = config.LlamaRopeScalingYarn, 1/a.RopeScale, a.RopeOrigCtx
	case a.RopeScale != 1 && a.RopeScale > 0:
		c.RopeScaling, c.RopeScaleFactor = config.LlamaRopeScalingLinear, 1/a.RopeScale
	}
	return c
}

// ArchitectureFromConfig is the architecture of a model of the training engine's
// configuration c: arch "llama", RoPE mode NORMAL, with c's RoPE scaling (linear or YaRN).
func ArchitectureFromConfig(c Config) Architecture { return FamilyArchitecture(Arch, c) }

// FamilyArchitecture is the architecture of a model of family name (a preset of the
// Transformer spec; the llama family's for a name without one) and of shape c.
func FamilyArchitecture(name string, c Config) Architecture {
	f, ok := Family(name)
	if !ok {
		f, _ = Family(Arch)
	}
	return archFromConfig(name, f, c)
}

// ArchitectureOf is the architecture of a model of family name (a preset of the Transformer
// spec; the llama family's for a name without one) and of shape s, read as the family's view
// of the Llama shape reads it: a family whose queries, keys and values are one fused projection
// (no n_kv_heads) has a key/value head per head, an image model's context is its class token
// and patches, a class-token head's rows are the classes (its output never tied), and a
// LayerNorm's epsilon is layer_norm_eps.
func ArchitectureOf(name string, s config.Shape) Architecture {
	f, ok := Family(name)
	if !ok {
		f, _ = Family(Arch)
	}
	c := s.Llama()
	if f.FusedQKV {
		c.NKVHeads = c.NHeads
	}
	if f.Input == InputPatches {
		n := s.ImageSize / s.PatchSize
		c.Context = n*n + 1
	}
	if f.Head == HeadClassToken {
		c.Vocab, c.TiedOutput = s.Classes, false
	}
	a := archFromConfig(name, f, c)
	if f.Norm == NormLayer {
		a.NormEps = s.LayerNormEps
	}
	if f.Input == InputPatches {
		a.ImageSize, a.PatchSize, a.Channels = s.ImageSize, s.PatchSize, s.Channels
	}
	return a
}

// ShapeOf is the shape of architecture a, with its initialisation: the inverse of
// ArchitectureOf, whose family's view (Shape's Gpt2, Vit, Llama) names the model as toy train
// does.
func ShapeOf(a *Architecture, init Init) config.Shape {
	s := ConfigFromArch(a).Shape()
	s.InitScale, s.Seed = init.Scale, init.Seed
	if a.Norm == NormLayer {
		s.LayerNormEps = a.NormEps
	}
	if a.Input == InputPatches {
		s.ImageSize, s.PatchSize, s.Channels = a.ImageSize, a.PatchSize, a.Channels
	}
	if a.Head == HeadClassToken {
		s.Classes = a.Vocab
	}
	return s
}
