package decoding

import (
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
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

// LoRA names a LoRA adapter to apply to a model at load: a GGUF file as llama.cpp writes them
// (general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for each adapted weight
// W a pair <W>.lora_a [in, r] and <W>.lora_b [r, out]), with a user scale (1 when 0).
type LoRA struct {
	Path  string
	Scale float32
}

// LoRATerm is one adapter's low-rank update of a weight: W·x + scale·B·(A·x), as llama.cpp
// applies it (scale = user scale · alpha / rank, or the user scale when alpha is 0).
type LoRATerm struct {
	A, B  *ggml.Tensor
	Scale float32
}

// GGUFModel is an inference model loaded from a GGUF checkpoint of one of the supported
// architectures (SupportedArchitectures): its detected Architecture and its weights, each of
// the file's own type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, the k-quants, ...), read
// into memory or, with ModelOptions.Mmap on the CPU, memory-mapped from the file (the q4_K, q5_K
// and q6_K matrices toy's k-quant kernel multiplies are mapped either way, and held as the
// kernel's repacked copies: repackKQuants). Decoders run it.
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
	// kquant holds the copies of q4_K, q5_K, q6_K, q4_0, q5_0 and q5_1 matrices repacked for toy's k-quant
	// kernel, by the file's tensor, which is mapped from the file and released once copied
	// (repackKQuants).
	kquant     map[*ggml.Tensor]*ggml.KQuantWeights
	kquantSets []*ggml.KQuantSet

	transformer.Weights

	// embCtx and embBuf hold the f16 copy of token_embd made where the backend cannot gather
	// token_embd's type (prepareEmbeddings).
	embCtx *ggml.Context
	embBuf *ggml.Buffer
}

// KernelSet is what the table resolved of a model's lookups: its decoders (and a training
// graph, engines/training) run toy's kernel for a lookup in the set.
type KernelSet map[kernelrt.Need]bool

// Has says whether every lookup in ns resolved (false for none).
func (s KernelSet) Has(ns ...kernelrt.Need) bool {
	for _, n := range ns {
		if !s[n] {
			return false
		}
	}
	return len(ns) > 0
}
