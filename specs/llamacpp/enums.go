package llamacpp

// VocabType is the kind of a model's tokenizer (enum llama_vocab_type).
//
//kernelgen:enum enum llama_vocab_type prefix=LLAMA_VOCAB_TYPE_
type VocabType int32

const (
	// VocabTypeNone is a model without a vocabulary.
	VocabTypeNone VocabType = 0
	// VocabTypeSPM is SentencePiece-style BPE with byte fallback (LLaMA).
	VocabTypeSPM VocabType = 1
	// VocabTypeBPE is byte-level BPE (GPT-2).
	VocabTypeBPE VocabType = 2
	// VocabTypeWPM is WordPiece (BERT).
	VocabTypeWPM VocabType = 3
	// VocabTypeUGM is Unigram (T5).
	VocabTypeUGM VocabType = 4
	// VocabTypeRWKV is RWKV's greedy tokenizer.
	VocabTypeRWKV VocabType = 5
	// VocabTypePLAMO2 is PLaMo-2's tokenizer.
	VocabTypePLAMO2 VocabType = 6
)

// SplitMode says how a model is split across GPUs (enum llama_split_mode).
//
//kernelgen:enum enum llama_split_mode prefix=LLAMA_SPLIT_MODE_
type SplitMode int32

const (
	// SplitModeNone uses a single GPU.
	SplitModeNone SplitMode = 0
	// SplitModeLayer splits layers and KV across GPUs.
	SplitModeLayer SplitMode = 1
	// SplitModeRow splits rows across GPUs.
	SplitModeRow SplitMode = 2
)

// RopeScalingType is a RoPE scaling type (enum llama_rope_scaling_type).
//
//kernelgen:enum enum llama_rope_scaling_type prefix=LLAMA_ROPE_SCALING_TYPE_
type RopeScalingType int32

const (
	// RopeScalingTypeUnspecified takes the model's.
	RopeScalingTypeUnspecified RopeScalingType = -1
	// RopeScalingTypeNone scales nothing.
	RopeScalingTypeNone RopeScalingType = 0
	// RopeScalingTypeLinear is linear scaling.
	RopeScalingTypeLinear RopeScalingType = 1
	// RopeScalingTypeYarn is YaRN.
	RopeScalingTypeYarn RopeScalingType = 2
	// RopeScalingTypeLongrope is LongRoPE.
	RopeScalingTypeLongrope RopeScalingType = 3
)

// PoolingType pools embeddings by sequence (enum llama_pooling_type).
//
//kernelgen:enum enum llama_pooling_type prefix=LLAMA_POOLING_TYPE_
type PoolingType int32

const (
	// PoolingTypeUnspecified takes the model's.
	PoolingTypeUnspecified PoolingType = -1
	// PoolingTypeNone pools nothing.
	PoolingTypeNone PoolingType = 0
	// PoolingTypeMean is the mean over the sequence.
	PoolingTypeMean PoolingType = 1
	// PoolingTypeCLS is the first token's.
	PoolingTypeCLS PoolingType = 2
	// PoolingTypeLast is the last token's.
	PoolingTypeLast PoolingType = 3
	// PoolingTypeRank is a reranking head.
	PoolingTypeRank PoolingType = 4
)

// AttentionType is the attention type for embeddings (enum llama_attention_type).
//
//kernelgen:enum enum llama_attention_type prefix=LLAMA_ATTENTION_TYPE_
type AttentionType int32

const (
	// AttentionTypeUnspecified takes the model's.
	AttentionTypeUnspecified AttentionType = -1
	// AttentionTypeCausal is causal attention.
	AttentionTypeCausal AttentionType = 0
	// AttentionTypeNonCausal is bidirectional attention.
	AttentionTypeNonCausal AttentionType = 1
)

// FlashAttnType says when to use flash attention (enum llama_flash_attn_type).
//
//kernelgen:enum enum llama_flash_attn_type prefix=LLAMA_FLASH_ATTN_TYPE_ name=FlashAttnTypeName
type FlashAttnType int32

const (
	// FlashAttnTypeAuto lets llama.cpp decide.
	FlashAttnTypeAuto FlashAttnType = -1
	// FlashAttnTypeDisabled never uses it.
	FlashAttnTypeDisabled FlashAttnType = 0
	// FlashAttnTypeEnabled always uses it.
	FlashAttnTypeEnabled FlashAttnType = 1
)

// GGMLType is the ggml element type of a KV cache (enum ggml_type; generated/ggmlc has all of
// them, these are the ones a cache of the oracle uses).
//
//kernelgen:enum enum ggml_type prefix=GGML_TYPE_
type GGMLType int32

const (
	// GGMLTypeF32 is float32.
	GGMLTypeF32 GGMLType = 0
	// GGMLTypeF16 is float16.
	GGMLTypeF16 GGMLType = 1
)
