package transformer

import (
	"fmt"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Arch is the GGUF general.architecture of this engine's checkpoints.
const Arch = "llama"

// ConfigFromGGUF reads the model configuration of a llama checkpoint; a file of another
// architecture is refused.
func ConfigFromGGUF(f *ggml.GGUF) (Config, map[string]any, error) {
	values, err := Metadata(f)
	if err != nil {
		return Config{}, nil, err
	}
	if arch, _ := values["general.architecture"].(string); arch != Arch {
		return Config{}, nil, fmt.Errorf("checkpoint %s: architecture %q, want %q", f.Path(), arch, Arch)
	}
	c := config.DefaultLlama()
	if err := c.FromGGUF(Arch, values); err != nil {
		return c, nil, fmt.Errorf("checkpoint %s: %w", f.Path(), err)
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedOutput = !hasOutput
	_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
	if err := Validate(c); err != nil {
		return c, nil, fmt.Errorf("checkpoint %s: %w", f.Path(), err)
	}
	return c, values, nil
}

// Config is the engine's configuration, generated from specs/engines.
type Config = config.Llama

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
