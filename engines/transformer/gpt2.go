package transformer

import (
	"fmt"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// GPT2Arch is the GGUF general.architecture of GPT-2 checkpoints.
const GPT2Arch = "gpt2"

// ValidateGPT2 checks a GPT-2 configuration against its spec's bounds.
func ValidateGPT2(c config.Gpt2) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("gpt2 config: %w", err)
	}
	return nil
}

// GPT2Core is c in the terms of the core's own parameters (the llama spec's): its shape, one
// key/value head per query head, LayerNorm's epsilon in the norm's place, and the
// initialisation's scale and seed. With the gpt2 family (Family) it gives the Architecture; as a
// Model's Cfg it carries what the training code reads (Init's scale and seed, the context).
func GPT2Core(c config.Gpt2) Config {
	l := config.DefaultLlama()
	l.Vocab, l.DModel, l.DFF, l.NHeads, l.NKVHeads, l.NLayers = c.Vocab, c.DModel, c.DFF, c.NHeads, c.NHeads, c.NLayers
	l.Context, l.RMSEps, l.TiedOutput, l.QKVBias = c.Context, c.LayerNormEps, c.TiedOutput, true
	l.InitScale, l.Seed = c.InitScale, c.Seed
	return l
}

// ArchitectureFromGPT2 is the architecture of a GPT-2 model of configuration c: the gpt2
// choices of the one core (LayerNorm with biases, learned positions, fused QKV, biases
// everywhere, GELU MLP), as DetectArchitecture reads it back from the checkpoint.
func ArchitectureFromGPT2(c config.Gpt2) Architecture {
	return FamilyArchitecture(GPT2Arch, GPT2Core(c))
}

// GPT2ConfigFromGGUF reads the model configuration of a gpt2 checkpoint; a file of another
// architecture is refused. The tied output follows the tensors (no output.weight), and a file
// without gpt2.vocab_size (llama.cpp's converter writes none) takes token_embd's rows.
func GPT2ConfigFromGGUF(f *ggml.GGUF) (config.Gpt2, map[string]any, error) {
	values, err := Metadata(f)
	if err != nil {
		return config.Gpt2{}, nil, err
	}
	if arch, _ := values["general.architecture"].(string); arch != GPT2Arch {
		return config.Gpt2{}, nil, fmt.Errorf("checkpoint %s: architecture %q, want %q", f.Path(), arch, GPT2Arch)
	}
	c := config.DefaultGpt2()
	if err := c.FromGGUF(values); err != nil {
		return c, nil, fmt.Errorf("checkpoint %s: %w", f.Path(), err)
	}
	if _, ok := values["gpt2.vocab_size"]; !ok {
		if emb, ok := f.Tensor("token_embd.weight"); ok {
			c.Vocab = int(emb.Ne[1])
		}
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedOutput = !hasOutput
	if err := ValidateGPT2(c); err != nil {
		return c, nil, fmt.Errorf("checkpoint %s: %w", f.Path(), err)
	}
	return c, values, nil
}
