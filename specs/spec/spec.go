// Package spec holds the primitive types of toy's spec language: the types a spec under specs/
// uses, beside Go's own, to say exactly which C type a parameter, result or field has.
// Spec packages import it with a dot import. See docs/SPECS.md for the whole language.
//
// Nothing here is used at run time: specs compile, but only cmd/kernelgen reads them.
package spec

// Const marks a pointer as pointing to const data: Const[Tensor] is `const struct ggml_tensor *`,
// Const[Ptr] is `const void *`, Const[[]int64] is `const int64_t *`.
type Const[T any] struct{}

// Ptr is C's `void *`; unsafe.Pointer on the Go side.
type Ptr struct{}

// Int is C's `int`; int on the Go side.
type Int int32

// Size is C's `size_t`; int on the Go side.
type Size uint64

// ULLong is C's `unsigned long long`; uint64 on the Go side (CUDA's CUdeviceptr).
type ULLong uint64

// Char is C's `char`, allowed only as the element of an array field (`char name[64]`) or of a
// slice parameter (`[]Char` is `char *`, a buffer C writes into).
type Char byte
