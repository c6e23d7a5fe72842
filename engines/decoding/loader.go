package decoding

import (
	"github.com/toyml/toy/ggml"

	"github.com/toyml/toy/engines/transformer"
)

// ModelOptions tune OpenModel.
type ModelOptions struct {
	// Backend computes the model; nil opens the build's backend (ggml.NewBackend: the CPU
	// with Threads threads, 0 for one per core; the GPU in a cuda build), which the model owns.
	Backend *ggml.Backend
	Threads int
	// Mmap memory-maps the file on the CPU instead of reading the weights into memory
	// (ggml.MapOptions.Mmap: reading decodes faster, mapping starts faster and shares pages).
	Mmap bool
	// LoRA adapters to apply (in order) to the weights, as llama.cpp does at run time.
	LoRA []LoRA
	// GGMLKernels computes everything with ggml's kernels, never toy's own CPU kernels for the
	// products of a few columns (ggml.MulMatCols) and the attention of one query per sequence
	// (ggml.AttendOne): what benchmarks compare them with.
	GGMLKernels bool

	// f16Embeddings makes the decoder gather from an f16 copy of token_embd even where the
	// backend can gather its type (tests of the path GPU backends take).
	f16Embeddings bool
}

// GGUFModel is an inference model loaded from a GGUF checkpoint of one of the supported
// architectures (SupportedArchitectures): its detected Architecture and its weights, each of
// the file's own type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, the k-quants, ...), read
// into memory or, with ModelOptions.Mmap on the CPU, memory-mapped from the file. Decoders run
// it.
type GGUFModel struct {
	Arch transformer.Architecture
	// Meta is every metadata key of the file (the tokenizer included).
	Meta map[string]any
	// Warnings are what a user should hear about the model as loaded, though it runs: a LoRA
	// adapter trained on another base (checkAdapterBase).
	Warnings []string
	// fingerprint is ModelFingerprint of the file, once an adapter asked for it.
	fingerprint string

	path       string
	backend    *ggml.Backend
	ownBackend bool
	mapped     *ggml.MappedGGUF
	adapters   []*ggml.MappedGGUF          // LoRA adapter files
	lora       map[*ggml.Tensor][]LoRATerm // their updates, by weight
	// mayOwnKernels: toy's own CPU operations may run for this model (the CPU backend, a build
	// where they are vectorized, no ModelOptions.GGMLKernels); kernels is what the kernel table
	// resolved of the lookups its decoders make (KernelNeeds, UseKernels).
	mayOwnKernels bool
	kernels       KernelSet
	// kquant holds the copies of q4_K and q6_K matrices repacked for toy's k-quant kernel, by
	// the file's tensor (repackKQuants).
	kquant     map[*ggml.Tensor]*ggml.KQuantWeights
	kquantSets []*ggml.KQuantSet

	transformer.Weights

	// embCtx and embBuf hold the f16 copy of token_embd made where the backend cannot gather
	// token_embd's type (prepareEmbeddings).
	embCtx *ggml.Context
	embBuf *ggml.Buffer
}

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
	if m.mapped, err = ggml.MapGGUF(f, m.backend, ggml.MapOptions{Mmap: opts.Mmap}); err != nil {
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

// WeightBytes is the size of the weights in memory.
func (m *GGUFModel) WeightBytes() int64 { return m.mapped.Bytes() }

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
