package decoding

import (
	"github.com/toyml/toy/ggml"

	"github.com/toyml/toy/engines/transformer"
)

// OpenModel loads the GGUF checkpoint at path. The architecture is detected from the file;
// every tensor it implies must be present with llama.cpp's name and shape and a type ggml can
// compute with (norms and biases f32), checked before anything is allocated from the header's
// counts (a block_count larger than the file's tensors can hold is refused at once). A
// truncated or malformed file, an unknown architecture, a missing, misshapen or mistyped tensor
// are errors naming the file and the problem.
func OpenModel(path string, opts ModelOptions) (*GGUFModel, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values, err := transformer.Metadata(f) // the tokenizer's arrays included: read once
	if err != nil {
		return nil, err
	}
	a, err := transformer.DetectArchitectureMeta(f, values)
	if err != nil {
		return nil, err
	}
	if err := a.FitFile(f, "gguf", false); err != nil {
		return nil, err
	}
	m := &GGUFModel{Arch: a, path: path, backend: opts.Backend}
	specs := a.TensorTable(&m.Weights)
	m.Meta = values
	if m.backend == nil {
		if m.backend, err = ggml.NewBackend(opts.Threads); err != nil {
			return nil, err
		}
		m.ownBackend = true
	}
	m.mayOwnKernels = !opts.GGMLKernels && m.backend.IsCPU() && ggml.CPUKernelsFast()
	if m.mapped, err = ggml.MapGGUF(f, m.backend, ggml.MapOptions{Mmap: opts.Mmap, FileBacked: m.mayRepack}); err != nil {
		m.Close()
		return nil, err
	}
	for _, s := range specs {
		*s.Slot = m.mapped.Tensor(s.Name)
	}
	if err := m.prepareEmbeddings(opts.f16Embeddings); err != nil {
		m.Close()
		return nil, err
	}
	for _, ad := range opts.LoRA {
		if err := m.loadLoRA(ad, opts); err != nil {
			m.Close()
			return nil, err
		}
	}
	m.builtinKernels()
	return m, nil
}

// Path is the checkpoint's path.
func (m *GGUFModel) Path() string { return m.path }

// Mapped reports whether the weights are memory-mapped from the file (not copied).
func (m *GGUFModel) Mapped() bool { return m.mapped != nil && m.mapped.Mapped() }

// WeightBytes is the size of the weights in memory: the file's tensors as loaded
// (ggml.MappedGGUF.Bytes: the whole file when it is mapped), less the originals released once
// repacked for toy's k-quant kernel, plus the repacked copies.
func (m *GGUFModel) WeightBytes() int64 {
	n := m.mapped.Bytes()
	for _, s := range m.kquantSets {
		n += s.Bytes()
	}
	return n
}

// Backend is the backend the model computes on.
func (m *GGUFModel) Backend() *ggml.Backend { return m.backend }

// Tensor is the loaded tensor of that GGUF name, nil where the file has none.
func (m *GGUFModel) Tensor(name string) *ggml.Tensor { return m.mapped.Tensor(name) }

// LoRATerms are the low-rank updates of the loaded adapters (ModelOptions.LoRA), by the
// weight they update.
func (m *GGUFModel) LoRATerms() map[*ggml.Tensor][]LoRATerm { return m.lora }

// WeightType is the type of the attention query projection of the first block (its fused
// QKV projection in gpt2), the type a checkpoint is usually named by.
func (m *GGUFModel) WeightType() ggml.Type {
	if l := &m.Layers[0]; l.Wq != nil {
		return l.Wq.Type()
	}
	return m.Layers[0].Wqkv.Type()
}

// Params is the number of weights.
func (m *GGUFModel) Params() int64 {
	var n int64
	for _, s := range m.Arch.TensorSpecs() {
		if t := m.mapped.Tensor(s.Name); t != nil {
			n += t.Len()
		}
	}
	return n
}

// Close unmaps the weights and closes the backend the model opened. Decoders of the model
// must be closed first.
func (m *GGUFModel) Close() error {
	if m == nil {
		return nil
	}
	m.closeKQuants()
	err := m.mapped.Close()
	m.mapped = nil
	m.embBuf.Close()
	m.embCtx.Close()
	m.embBuf, m.embCtx, m.EmbLookup = nil, nil, nil
	for _, a := range m.adapters {
		a.Close()
	}
	m.adapters, m.lora = nil, nil
	if m.ownBackend {
		m.backend.Close()
		m.ownBackend = false
	}
	return err
}
