// Package llamacpp declares the part of llama.cpp's C API (llama.h) that toy's differential
// oracle (internal/oracle) calls: loading a model from a GGUF, tokenizing with its vocabulary,
// decoding a batch and reading the logits, and applying a LoRA adapter. It is linked from
// github.com/ollama/ollama/llama/llama.cpp/src (the same ggml as toy's own), and only tests and
// benchmarks import the bindings, so the product binary never carries llama.cpp. It is a spec:
// cmd/kernelgen reads it and emits generated/llamacpp; see docs/SPECS.md and docs/ORACLE.md.
package llamacpp

import . "github.com/toyml/toy/specs/spec"

// Model is a loaded llama.cpp model: hyperparameters, weights and vocabulary. ModelFree
// releases it (and the LoRA adapters loaded for it).
//
//kernelgen:handle struct llama_model
type Model struct{}

// Context is an inference context over a Model: its KV cache (memory), compute buffers and
// the outputs of the last Decode. Free releases it.
//
//kernelgen:handle struct llama_context
type Context struct{}

// Vocab is a model's vocabulary and tokenizer; it lives as long as its Model.
//
//kernelgen:handle struct llama_vocab
type Vocab struct{}

// Memory is a context's sequence memory (the KV cache).
//
//kernelgen:handle llama_memory_t = struct llama_memory_i
type Memory struct{}

// AdapterLora is a LoRA adapter loaded for a Model; it is freed with its model, or earlier by
// AdapterLoraFree.
//
//kernelgen:handle struct llama_adapter_lora
type AdapterLora struct{}

// ModelParams say how a model is loaded (struct llama_model_params); start from
// ModelDefaultParams. The pointer fields are opaque here and left as the defaults have them
// (NULL).
//
//kernelgen:struct struct llama_model_params
type ModelParams struct {
	// Devices is a NULL-terminated list of devices to offload to (NULL: all).
	Devices Ptr //kernelgen:ctype ggml_backend_dev_t *
	// TensorBuftOverrides is a NULL-terminated list of buffer-type overrides by tensor pattern.
	TensorBuftOverrides Ptr //kernelgen:ctype const struct llama_model_tensor_buft_override *
	// NGpuLayers is the number of layers stored in device memory (0: all on the CPU).
	NGpuLayers int32
	// SplitMode says how the model is split across GPUs.
	SplitMode SplitMode
	// MainGpu is the GPU used for the whole model when SplitMode is SplitModeNone.
	MainGpu int32
	// TensorSplit is the proportion of the model offloaded to each GPU.
	TensorSplit Ptr //kernelgen:ctype const float *
	// ProgressCallback is called during loading (NULL: none).
	ProgressCallback Ptr //kernelgen:ctype llama_progress_callback
	// ProgressCallbackUserData is passed to ProgressCallback.
	ProgressCallbackUserData Ptr
	// KvOverrides override metadata key-value pairs of the model.
	KvOverrides Ptr //kernelgen:ctype const struct llama_model_kv_override *
	// VocabOnly loads only the vocabulary, no weights.
	VocabOnly bool
	// UseMmap maps the file instead of reading it, where possible.
	UseMmap bool
	// UseMlock keeps the model in RAM.
	UseMlock bool
	// CheckTensors validates the tensor data.
	CheckTensors bool
	// UseExtraBufts uses extra buffer types (weight repacking).
	UseExtraBufts bool
	// NoHost bypasses the host buffer.
	NoHost bool
	// NoAlloc only loads metadata and simulates memory allocations.
	NoAlloc bool
}

// ContextParams say how a context is made (struct llama_context_params); start from
// ContextDefaultParams.
//
//kernelgen:struct struct llama_context_params
type ContextParams struct {
	// NCtx is the context size in tokens (0: the model's training context).
	NCtx uint32
	// NBatch is the most tokens one Decode may be given.
	NBatch uint32
	// NUbatch is the physical batch size.
	NUbatch uint32
	// NSeqMax is the number of distinct sequences.
	NSeqMax uint32
	// NThreads is the number of threads for generation.
	NThreads int32
	// NThreadsBatch is the number of threads for batch processing.
	NThreadsBatch int32
	// RopeScalingType is the RoPE scaling type (unspecified: from the model).
	RopeScalingType RopeScalingType
	// PoolingType pools embeddings by sequence.
	PoolingType PoolingType
	// AttentionType is the attention type for embeddings.
	AttentionType AttentionType
	// FlashAttnType says when to use flash attention.
	FlashAttnType FlashAttnType
	// RopeFreqBase is the RoPE base frequency (0: from the model).
	RopeFreqBase float32
	// RopeFreqScale is the RoPE frequency scaling factor (0: from the model).
	RopeFreqScale float32
	// YarnExtFactor is YaRN's extrapolation mix factor (negative: from the model).
	YarnExtFactor float32
	// YarnAttnFactor is YaRN's magnitude scaling factor.
	YarnAttnFactor float32
	// YarnBetaFast is YaRN's low correction dimension.
	YarnBetaFast float32
	// YarnBetaSlow is YaRN's high correction dimension.
	YarnBetaSlow float32
	// YarnOrigCtx is YaRN's original context size.
	YarnOrigCtx uint32
	// DefragThold is deprecated.
	DefragThold float32
	// CbEval is the scheduler's evaluation callback (NULL: none).
	CbEval Ptr //kernelgen:ctype ggml_backend_sched_eval_callback
	// CbEvalUserData is passed to CbEval.
	CbEvalUserData Ptr
	// TypeK is the element type of the K cache.
	TypeK GGMLType
	// TypeV is the element type of the V cache.
	TypeV GGMLType
	// AbortCallback aborts a Decode when it returns true (NULL: none).
	AbortCallback Ptr //kernelgen:ctype ggml_abort_callback
	// AbortCallbackData is passed to AbortCallback.
	AbortCallbackData Ptr
	// Embeddings extracts embeddings (with the logits).
	Embeddings bool
	// OffloadKqv offloads the KQV ops and the KV cache to the GPU.
	OffloadKqv bool
	// NoPerf turns off performance timings.
	NoPerf bool
	// OpOffload offloads host tensor operations to the device.
	OpOffload bool
	// SwaFull uses a full-size sliding-window cache.
	SwaFull bool
	// KvUnified uses one KV buffer across sequences.
	KvUnified bool
}

// Batch is the input of Decode (struct llama_batch): NTokens tokens, with optional positions,
// sequence ids and output flags. A NULL Pos numbers the tokens after the memory's last
// position; a NULL SeqID puts them in sequence 0; a NULL Logits outputs only the last token's
// logits. What the pointers point to must stay valid (pinned, for Go memory) until Decode
// returns.
//
//kernelgen:struct struct llama_batch
type Batch struct {
	// NTokens is the number of tokens.
	NTokens int32
	// Token points to NTokens token ids.
	Token Ptr //kernelgen:ctype llama_token *
	// Embd points to input embeddings, used when Token is NULL.
	Embd Ptr //kernelgen:ctype float *
	// Pos points to NTokens positions.
	Pos Ptr //kernelgen:ctype llama_pos *
	// NSeqID points to the number of sequence ids of each token.
	NSeqID Ptr //kernelgen:ctype int32_t *
	// SeqID points to each token's sequence ids.
	SeqID Ptr //kernelgen:ctype llama_seq_id **
	// Logits points to NTokens int8 flags: non-zero outputs that token's logits.
	Logits Ptr //kernelgen:ctype int8_t *
}
