package training

import (
	"fmt"
	"strings"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Save writes the model as a GGUF checkpoint llama.cpp can load: the configuration under
// llama.cpp's keys, extra metadata (the tokenizer, general.name, ...) and every weight. The
// write is atomic.
func (m *Model) Save(path string, extra []transformer.KV) error {
	w, err := ggml.NewGGUFWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	kvs := []transformer.KV{
		{Key: "general.architecture", Value: m.Arch.Name},
		{Key: "general.file_type", Value: uint32(0)}, // all f32
	}
	// The architecture's keys, as the decoder reads them back, then toy's training options
	// from the spec that made the model.
	if m.ViT != nil {
		// No llama.cpp architecture to follow: the vit spec's keys are the format.
		kvs = append(kvs, m.ViT.ToGGUF()...)
	} else {
		kvs = append(kvs, m.Arch.Metadata()...)
		options := m.Cfg.ToGGUF(m.Arch.Name)
		if m.GPT2 != nil {
			options = m.GPT2.ToGGUF()
		}
		for _, kv := range options {
			if strings.HasPrefix(kv.Key, "toy.") {
				kvs = append(kvs, kv)
			}
		}
	}
	kvs = append(kvs, extra...)
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("checkpoint %s: %w", path, err)
		}
	}
	for _, t := range m.all {
		if err := w.AddTensor(t); err != nil {
			return fmt.Errorf("checkpoint %s: %w", path, err)
		}
	}
	return w.WriteFile(path)
}

// Load reads a llama, gpt2 or vit checkpoint onto backend b. Every tensor the configuration implies
// must be present, f32, with the right shape; otherwise nothing is loaded (nor allocated) and the
// error names the file and the tensor.
func Load(path string, b *ggml.Backend) (*Model, map[string]any, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// The architecture the configuration implies is checked against the file's tensors before
	// the model is allocated from the configuration's counts.
	var a transformer.Architecture
	var alloc func() (*Model, error)
	var values map[string]any
	switch arch, _ := f.String("general.architecture"); arch {
	case transformer.GPT2Arch:
		var c config.Gpt2
		if c, values, err = transformer.GPT2ConfigFromGGUF(f); err == nil {
			a, alloc = transformer.ArchitectureFromGPT2(c), func() (*Model, error) { return NewGPT2(c, b) }
		}
	case transformer.ViTArch:
		var c config.Vit
		if c, values, err = transformer.ViTConfigFromGGUF(f); err == nil {
			a, alloc = transformer.ArchitectureFromViT(c), func() (*Model, error) { return NewViT(c, b) }
		}
	case transformer.Arch:
		var c transformer.Config
		if c, values, err = transformer.ConfigFromGGUF(f); err == nil {
			a, alloc = transformer.ArchitectureFromConfig(c), func() (*Model, error) { return New(c, b) }
		}
	default:
		err = fmt.Errorf("checkpoint %s: architecture %q, want %q, %q or %q", f.Path(), arch, transformer.Arch, transformer.GPT2Arch, transformer.ViTArch)
	}
	if err == nil {
		err = a.FitFile(f, "checkpoint", true)
	}
	var m *Model
	if err == nil {
		m, err = alloc()
	}
	if err != nil {
		return nil, nil, err
	}
	if err := transformer.ReadTensors(f, m.all, ""); err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, values, nil
}

// SaveState writes the optimizer state — both AdamW moments of every weight — and extra
// metadata (the step, the schedule, the data position) to a GGUF file beside the checkpoint.
func (tr *Trainer) SaveState(path string, extra []transformer.KV) error {
	w, err := ggml.NewGGUFWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	kvs := append([]transformer.KV{{Key: "general.architecture", Value: "toy.optimizer"}}, extra...)
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("optimizer state %s: %w", path, err)
		}
	}
	for _, t := range tr.m.params {
		mv := tr.moments[t]
		for _, x := range mv {
			if err := w.AddTensor(x); err != nil {
				return fmt.Errorf("optimizer state %s: %w", path, err)
			}
		}
	}
	return w.WriteFile(path)
}

// LoadState restores the AdamW moments written by SaveState and returns the file's metadata.
func (tr *Trainer) LoadState(path string) (map[string]any, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values, err := transformer.Metadata(f)
	if err != nil {
		return nil, err
	}
	if arch, _ := values["general.architecture"].(string); arch != "toy.optimizer" {
		return nil, fmt.Errorf("optimizer state %s: not a toy optimizer file (architecture %q)", path, arch)
	}
	var ts []*ggml.Tensor
	for _, t := range tr.m.params {
		mv := tr.moments[t]
		ts = append(ts, mv[0], mv[1])
	}
	if err := transformer.ReadTensors(f, ts, ""); err != nil {
		return nil, err
	}
	return values, nil
}
