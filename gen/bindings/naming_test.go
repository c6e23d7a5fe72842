package bindings

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"Add":          "add",
		"MulMat":       "mul_mat",
		"MulMatID":     "mul_mat_id",
		"NewTensor1D":  "new_tensor_1d",
		"View4D":       "view_4d",
		"GetValU8":     "get_val_u8",
		"GetValF32":    "get_val_f32",
		"RMSNorm":      "rms_norm",
		"SoftMaxExt":   "soft_max_ext",
		"GGUFInit":     "gguf_init",
		"Q4_K":         "q4_k",
		"BF16":         "bf16",
		"IQ2_XXS":      "iq2_xxs",
		"CrossEntropy": "cross_entropy",
		"GeluErf":      "gelu_erf",
		"Conv2D":       "conv_2d",
		"already_low":  "already_low",
	} {
		assert.Equal(t, want, snake(in), in)
	}
}

func TestEnumConstCName(t *testing.T) {
	for _, c := range []struct{ konst, typ, prefix, want string }{
		{"TypeF32", "Type", "GGML_TYPE_", "GGML_TYPE_F32"},
		{"TypeQ4_K", "Type", "GGML_TYPE_", "GGML_TYPE_Q4_K"},
		{"OpMulMat", "Op", "GGML_OP_", "GGML_OP_MUL_MAT"},
		{"OpCrossEntropyLossBack", "Op", "GGML_OP_", "GGML_OP_CROSS_ENTROPY_LOSS_BACK"},
		{"StatusAllocFailed", "Status", "GGML_STATUS_", "GGML_STATUS_ALLOC_FAILED"},
		{"RopeModeNeox", "RopeMode", "GGML_ROPE_TYPE_", "GGML_ROPE_TYPE_NEOX"},
	} {
		got, ok := enumConstCName(c.konst, c.typ, c.prefix)
		assert.True(t, ok, c.konst)
		assert.Equal(t, c.want, got, c.konst)
	}
	_, ok := enumConstCName("Weird", "Type", "GGML_TYPE_")
	assert.False(t, ok)
	_, ok = enumConstCName("Type", "Type", "GGML_TYPE_")
	assert.False(t, ok, "the bare type name is no constant")
}
