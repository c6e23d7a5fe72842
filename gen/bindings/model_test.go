package bindings

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCType(t *testing.T) {
	tensor := &handle{GoName: "Tensor", Struct: "struct ggml_tensor"}
	backend := &handle{GoName: "Backend", Struct: "struct ggml_backend", Typedef: "ggml_backend_t"}
	typ := &enum{GoName: "Type", CType: "enum ggml_type"}
	rope := &enum{GoName: "RopeMode", CType: "int"}
	i64 := &specType{Kind: kindNumber, Num: "int64"}
	for _, c := range []struct {
		t          *specType
		name, c, g string
	}{
		{&specType{Kind: kindHandle, Handle: tensor}, "a", "struct ggml_tensor *a", "Tensor"},
		{&specType{Kind: kindHandle, Handle: tensor, Const: true}, "a", "const struct ggml_tensor *a", "Tensor"},
		{&specType{Kind: kindHandle, Handle: backend}, "b", "ggml_backend_t b", "Backend"},
		{&specType{Kind: kindHandle, Handle: backend, Const: true}, "b", "const struct ggml_backend *b", "Backend"},
		{&specType{Kind: kindHandleSlice, Handle: backend}, "bs", "ggml_backend_t *bs", "[]Backend"},
		{&specType{Kind: kindHandleSlice, Handle: tensor}, "ts", "struct ggml_tensor **ts", "[]Tensor"},
		{&specType{Kind: kindHandlePtr, Handle: tensor}, "", "struct ggml_tensor **", "*Tensor"},
		{&specType{Kind: kindEnum, Enum: typ}, "t", "enum ggml_type t", "Type"},
		{&specType{Kind: kindEnum, Enum: rope}, "mode", "int mode", "RopeMode"},
		{&specType{Kind: kindInt}, "n", "int n", "int"},
		{&specType{Kind: kindSize}, "", "size_t", "int"},
		{i64, "x", "int64_t x", "int64"},
		{&specType{Kind: kindNumber, Num: "float32"}, "x", "float x", "float32"},
		{&specType{Kind: kindNumber, Num: "float64"}, "x", "double x", "float64"},
		{&specType{Kind: kindString}, "s", "const char *s", "string"},
		{&specType{Kind: kindStringSlice}, "s", "const char **s", "[]string"},
		{&specType{Kind: kindPtr}, "p", "void *p", "unsafe.Pointer"},
		{&specType{Kind: kindPtr, Const: true}, "p", "const void *p", "unsafe.Pointer"},
		{&specType{Kind: kindNumSlice, Elem: i64, Const: true}, "ne", "const int64_t *ne", "[]int64"},
		{&specType{Kind: kindArray, Elem: i64, Len: 4}, "ne", "int64_t ne[4]", "[4]int64"},
		{&specType{Kind: kindArray, Elem: &specType{Kind: kindHandle, Handle: tensor}, Len: 10}, "src", "struct ggml_tensor *src[10]", "[10]Tensor"},
		{&specType{Kind: kindArray, Elem: &specType{Kind: kindChar}, Len: 64}, "name", "char name[64]", "[64]byte"},
	} {
		assert.Equal(t, c.c, c.t.CType(c.name))
		assert.Equal(t, c.g, c.t.GoString())
	}
}
