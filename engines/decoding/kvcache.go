package decoding

import "github.com/toyml/toy/ggml"

// KVCacheType is the element type of the decoder's key/value cache.
type KVCacheType int

const (
	// KVF16 stores keys and values as f16 (the default, as llama.cpp).
	KVF16 KVCacheType = iota
	// KVQ8_0 stores them as q8_0 (half of f16's memory); it needs flash attention, whose
	// kernel reads block-quantized keys and values, and head sizes that are multiples of 32.
	KVQ8_0
	// KVF32 stores them as f32: exact, for checking against a reference.
	KVF32
)

func (k KVCacheType) ggmlType() ggml.Type {
	switch k {
	case KVQ8_0:
		return ggml.Q8_0
	case KVF32:
		return ggml.F32
	}
	return ggml.F16
}

func (k KVCacheType) String() string { return ggml.TypeName(k.ggmlType()) }
