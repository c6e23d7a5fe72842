package transformer

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Arch is the GGUF general.architecture of this engine's checkpoints.
const Arch = "llama"

// ConfigFromGGUF reads the model configuration of a llama checkpoint (ReadCheckpoint); a file
// of another architecture is refused. The tied output and the QKV biases follow the tensors.
func ConfigFromGGUF(f *ggml.GGUF) (Config, map[string]any, error) {
	_, c, values, err := readFamilyCheckpoint(f, Arch)
	return c, values, err
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

// ArchitectureFromConfig is the architecture of a model of the training engine's
// configuration c: arch "llama", RoPE mode NORMAL, with c's RoPE scaling (linear or YaRN).
func ArchitectureFromConfig(c Config) Architecture { return FamilyArchitecture(Arch, c) }

// archFromConfig is the architecture that c describes for the member name of family f: the
// one conversion from the specs' parameters, which the trainer and DetectArchitecture share.
// Head sizes are DModel/NHeads (0 when that does not divide), as the spec's keys imply.
func archFromConfig(name string, f config.Transformer, c Config) Architecture {
	hd := 0
	if c.NHeads > 0 && c.DModel%c.NHeads == 0 {
		hd = c.DModel / c.NHeads
	}
	a := Architecture{Name: name, Vocab: c.Vocab, DModel: c.DModel, NLayers: c.NLayers, DFF: c.DFF,
		Context: c.Context, NHeads: c.NHeads, NKVHeads: c.NKVHeads, HeadDimK: hd, HeadDimV: hd,
		NormEps: c.RMSEps, RopeMode: ropeModes[f.RopeMode], RopeDims: hd, RopeBase: c.RopeBase, RopeScale: 1,
		TiedOutput: c.TiedOutput, QKVBias: c.QKVBias || f.QKVBias, EmbedScale: 1, FFN: f.FFN, PostNorms: f.PostNorms,
		Norm: f.Norm, Positions: f.Positions, FusedQKV: f.FusedQKV, OutBias: f.AllBiases, FFNBias: f.AllBiases,
		Input: f.Input, Head: f.Head}
	if hd > 0 {
		a.QueryScale = float32(1 / math.Sqrt(float64(hd)))
	}
	if c.RopeScaling != config.LlamaRopeScalingNone && c.RopeScaleFactor > 0 {
		a.RopeScale = 1 / c.RopeScaleFactor
		if c.RopeScaling == config.LlamaRopeScalingYarn {
			a.RopeYaRN, a.RopeOrigCtx = true, c.RopeOrigContext
		}
	}
	a.RopeBaseLocal, a.RopeScaleLocal = a.RopeBase, a.RopeScale
	return a
}
