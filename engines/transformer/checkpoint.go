package transformer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// trainedFamilies are the families whose checkpoints toy train writes and resumes, each with
// the check of a checkpoint's shape against the bounds of the spec its models are made from
// (c is the Llama spec's configuration the file's keys gave).
var trainedFamilies = map[string]func(a *Architecture, c Config) error{
	Arch:     func(_ *Architecture, c Config) error { return Validate(c) },
	GPT2Arch: func(a *Architecture, c Config) error { return ValidateGPT2(GPT2Config(a, initOf(c))) },
	ViTArch:  func(a *Architecture, c Config) error { return ValidateViT(ViTConfig(a, initOf(c))) },
}

// checkpointOptions are the training options (the Llama spec's toy.<arch>.* keys) that the
// checkpoints of the families listed hold; every other family's hold all of them. GPT-2's have
// no QKV-bias or weight-type option, and ViT's no tied output either.
var checkpointOptions = map[string][]string{
	GPT2Arch: {"tied_output", "init_scale", "seed"},
	ViTArch:  {"init_scale", "seed"},
}

// CheckpointMetadata lists the metadata of a training checkpoint of a model of architecture a
// whose weights started with init: the architecture's keys (Metadata), then the training
// options its family's checkpoints hold, under toy.<arch>.*.
func (a *Architecture) CheckpointMetadata(init Init) []KV {
	c := ConfigFromArch(a)
	c.InitScale, c.Seed = init.Scale, init.Seed
	kvs := a.Metadata()
	options, some := checkpointOptions[a.Name]
	for _, kv := range c.ToGGUF(a.Name) {
		option, ok := strings.CutPrefix(kv.Key, "toy."+a.Name+".")
		if ok && (!some || slices.Contains(options, option)) {
			kvs = append(kvs, kv)
		}
	}
	return kvs
}

// ReadCheckpoint reads the architecture and the initialisation of a training checkpoint of a
// family toy trains (llama, gpt2 or vit), checked against the bounds of the spec its models are
// made from, and returns the file's metadata. The architecture is the one reader's
// (DetectArchitecture's), so a checkpoint is the model the decoder runs; the tensors are for
// FitFile to check.
func ReadCheckpoint(f *ggml.GGUF) (Architecture, Init, map[string]any, error) {
	a, c, values, err := readCheckpoint(f)
	return a, initOf(c), values, err
}

// readCheckpoint is ReadCheckpoint with the Llama spec's configuration the keys gave.
func readCheckpoint(f *ggml.GGUF) (Architecture, Config, map[string]any, error) {
	values, err := Metadata(f)
	if err != nil {
		return Architecture{}, Config{}, nil, err
	}
	name, _ := values["general.architecture"].(string)
	check, ok := trainedFamilies[name]
	tr, known := Family(name)
	if !ok || !known {
		return Architecture{}, Config{}, nil, fmt.Errorf("checkpoint %s: architecture %q, want %q, %q or %q", f.Path(), name, Arch, GPT2Arch, ViTArch)
	}
	// The keys are first held to the Llama spec's bounds, whose shared fields every trained
	// family's spec bounds alike (an absurd block_count is n_layers above its maximum).
	a, c, err := readArchitecture(f, values, name, tr, func(c Config) error { return c.Validate() })
	if err == nil {
		err = check(&a, c)
	}
	if err != nil {
		return a, c, nil, fmt.Errorf("checkpoint %s: %w", f.Path(), err)
	}
	return a, c, values, nil
}

// readFamilyCheckpoint is readCheckpoint for a file that must be of family name.
func readFamilyCheckpoint(f *ggml.GGUF, name string) (Architecture, Config, map[string]any, error) {
	if arch, _ := f.String("general.architecture"); arch != name {
		return Architecture{}, Config{}, nil, fmt.Errorf("checkpoint %s: architecture %q, want %q", f.Path(), arch, name)
	}
	return readCheckpoint(f)
}

// ConfigFromGGUF reads the model configuration of a llama checkpoint (ReadCheckpoint); a file
// of another architecture is refused. The tied output and the QKV biases follow the tensors.
func ConfigFromGGUF(f *ggml.GGUF) (Config, map[string]any, error) {
	_, c, values, err := readFamilyCheckpoint(f, Arch)
	return c, values, err
}

// GPT2ConfigFromGGUF reads the model configuration of a gpt2 checkpoint (ReadCheckpoint); a
// file of another architecture is refused. The tied output follows the tensors (no
// output.weight), and a file without gpt2.vocab_size (llama.cpp's converter writes none)
// takes token_embd's rows.
func GPT2ConfigFromGGUF(f *ggml.GGUF) (config.Gpt2, map[string]any, error) {
	a, c, values, err := readFamilyCheckpoint(f, GPT2Arch)
	if err != nil {
		return config.Gpt2{}, nil, err
	}
	return GPT2Config(&a, initOf(c)), values, nil
}

// ViTConfigFromGGUF reads the configuration of a vit checkpoint (ReadCheckpoint); a file of
// another architecture is refused.
func ViTConfigFromGGUF(f *ggml.GGUF) (config.Vit, map[string]any, error) {
	a, c, values, err := readFamilyCheckpoint(f, ViTArch)
	if err != nil {
		return config.Vit{}, nil, err
	}
	return ViTConfig(&a, initOf(c)), values, nil
}
