package training

import (
	"fmt"

	"github.com/toyml/toy/engines/transformer"
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
	// The architecture's keys, as the decoder reads them back, then toy's training options.
	kvs := []transformer.KV{
		{Key: "general.architecture", Value: m.Arch.Name},
		{Key: "general.file_type", Value: uint32(0)}, // all f32
	}
	kvs = append(kvs, m.Arch.CheckpointMetadata(m.Initial)...)
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
	// The architecture is checked against the file's tensors before the model is allocated
	// from its counts.
	a, init, values, err := transformer.ReadCheckpoint(f)
	if err == nil {
		err = a.FitFile(f, "checkpoint", true)
	}
	var m *Model
	if err == nil {
		m, err = newModel(a, init, b)
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
