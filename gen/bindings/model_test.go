package bindings

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCType(t *testing.T) {
	tensor := &Handle{GoName: "Tensor", Struct: "struct ggml_tensor"}
	backend := &Handle{GoName: "Backend", Struct: "struct ggml_backend", Typedef: "ggml_backend_t"}
	typ := &Enum{GoName: "Type", CType: "enum ggml_type"}
	rope := &Enum{GoName: "RopeMode", CType: "int"}
	i64 := &Type{Kind: KindNumber, Num: "int64"}
	for _, c := range []struct {
		t          *Type
		name, c, g string
	}{
		{&Type{Kind: KindHandle, Handle: tensor}, "a", "struct ggml_tensor *a", "Tensor"},
		{&Type{Kind: KindHandle, Handle: tensor, Const: true}, "a", "const struct ggml_tensor *a", "Tensor"},
		{&Type{Kind: KindHandle, Handle: backend}, "b", "ggml_backend_t b", "Backend"},
		{&Type{Kind: KindHandle, Handle: backend, Const: true}, "b", "const struct ggml_backend *b", "Backend"},
		{&Type{Kind: KindHandleSlice, Handle: backend}, "bs", "ggml_backend_t *bs", "[]Backend"},
		{&Type{Kind: KindHandleSlice, Handle: tensor}, "ts", "struct ggml_tensor **ts", "[]Tensor"},
		{&Type{Kind: KindHandlePtr, Handle: tensor}, "", "struct ggml_tensor **", "*Tensor"},
		{&Type{Kind: KindEnum, Enum: typ}, "t", "enum ggml_type t", "Type"},
		{&Type{Kind: KindEnum, Enum: rope}, "mode", "int mode", "RopeMode"},
		{&Type{Kind: KindInt}, "n", "int n", "int"},
		{&Type{Kind: KindSize}, "", "size_t", "int"},
		{i64, "x", "int64_t x", "int64"},
		{&Type{Kind: KindNumber, Num: "float32"}, "x", "float x", "float32"},
		{&Type{Kind: KindNumber, Num: "float64"}, "x", "double x", "float64"},
		{&Type{Kind: KindString}, "s", "const char *s", "string"},
		{&Type{Kind: KindStringSlice}, "s", "const char **s", "[]string"},
		{&Type{Kind: KindPtr}, "p", "void *p", "unsafe.Pointer"},
		{&Type{Kind: KindPtr, Const: true}, "p", "const void *p", "unsafe.Pointer"},
		{&Type{Kind: KindNumSlice, Elem: i64, Const: true}, "ne", "const int64_t *ne", "[]int64"},
		{&Type{Kind: KindArray, Elem: i64, Len: 4}, "ne", "int64_t ne[4]", "[4]int64"},
		{&Type{Kind: KindArray, Elem: &Type{Kind: KindHandle, Handle: tensor}, Len: 10}, "src", "struct ggml_tensor *src[10]", "[10]Tensor"},
		{&Type{Kind: KindArray, Elem: &Type{Kind: KindChar}, Len: 64}, "name", "char name[64]", "[64]byte"},
	} {
		assert.Equal(t, c.c, c.t.CType(c.name))
		assert.Equal(t, c.g, c.t.GoString())
	}
}
