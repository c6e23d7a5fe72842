// Package gguffile reads, validates and writes GGUF files in pure Go.
//
// GGUF is the model file format of ggml. ggml's own parser
// (gguf_init_from_file) kills the whole process on some hostile inputs: a
// "general.alignment" key of the wrong type, or a key with an embedded NUL
// that its strcmp lookup takes for it, trips an assertion; so does an empty
// key; a zero in dimensions 1 to 3 of a tensor divides by zero; a huge string
// length throws an uncaught std::bad_alloc; and huge counts or lengths make
// it allocate before it has read the bytes they promise. Read is meant to run
// before a file reaches ggml: it accepts a file only if it is well formed and
// ggml's parser accepts it too, with the same alignment, data offset and
// tensor offsets and sizes, and it never allocates much more than the bytes
// it has read.
//
// What Read checks:
//   - magic "GGUF", version 2 or 3 (ggml rejects 0, 1 and anything above 3);
//   - tensor and key-value counts that the rest of the file could hold;
//   - keys: non-empty, at most 65535 bytes, no NUL bytes, no duplicates;
//   - value types 0..12, arrays of any of them except arrays, string and
//     array lengths that fit in the file, booleans that are 0 or 1;
//   - "general.alignment", when present: a scalar uint32 that is a nonzero
//     power of two (default 32);
//   - tensor names: 1 to 63 bytes (GGML_MAX_NAME is 64 with the NUL), no NUL
//     bytes, no duplicates;
//   - 1 to 4 dimensions, ne[0] >= 0 and ne[1..3] >= 1, an element count that
//     ggml's overflow check accepts, a known type that is not one of the
//     removed ones, ne[0] a multiple of the type's block size;
//   - the layout ggml requires: the data section starts at the end of the
//     header rounded up to the alignment, the first tensor is at offset 0 of
//     it and each next one right after the previous one's data padded to the
//     alignment; every tensor's data lies inside the file;
//   - no tensor description after the counted ones: a tensor count that is
//     short makes the data section start inside the tensor table and shifts
//     every tensor's data, so the description of a next tensor, right where
//     the table ends and with the next data offset, is an error naming it.
//     Other bytes after the last tensor's data are allowed.
//
// Read does not require the zero padding after the last tensor's data, which
// some writers (ollama's among them) leave out; ggml's parser needs it only
// when it also loads the data (no_alloc false), and then merely fails.
//
// Writer builds GGUF version 3 files; it applies the same rules, so whatever
// it writes Read accepts.
//
// All integers are little-endian; big-endian GGUF files are rejected (their
// version reads as a huge number).
package gguffile

import (
	"fmt"
	"strconv"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version that Writer writes. Read accepts 2 and 3,
// which share one layout.
const Version = 3

// DefaultAlignment is the alignment of tensor data when the file has no
// "general.alignment" key.
const DefaultAlignment = 32

// AlignmentKey is the key whose uint32 value sets the alignment.
const AlignmentKey = "general.alignment"

// MaxNameLen is the longest tensor name ggml can hold (GGML_MAX_NAME - 1).
const MaxNameLen = 63

// MaxKeyLen is the longest key the GGUF specification allows.
const MaxKeyLen = 1<<16 - 1

// MaxDims is the largest number of dimensions of a tensor (GGML_MAX_DIMS).
const MaxDims = 4

// ValueType is the type of a metadata value, as stored in the file.
type ValueType uint32

// The metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

// String returns the type's name, e.g. "uint32".
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "ValueType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// size returns the encoded size of one value of a fixed-size type, the
// smallest encoded size (the length prefix) for strings, and 0 otherwise.
func (t ValueType) size() int64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64, ValueString:
		return 8
	}
	return 0
}

// KV is one metadata key-value pair.
//
// Value holds a scalar as the Go type of the same name (uint8, int8, uint16,
// int16, uint32, int32, float32, bool, string, uint64, int64, float64) and an
// array as a slice of one of them ([]uint8, ..., []string, []bool). Read
// returns non-nil slices, empty ones included.
type KV struct {
	Key   string
	Value any
}

// Type returns the value's type: ValueArray for arrays. It returns false if
// Value is not one of the Go types listed on KV.
func (kv KV) Type() (ValueType, bool) {
	t, elem, ok := typeOf(kv.Value)
	if elem {
		return ValueArray, ok
	}
	return t, ok
}

// ElemType returns the type of an array's elements, or of a scalar value
// itself. It returns false if Value is not one of the Go types listed on KV.
func (kv KV) ElemType() (ValueType, bool) {
	t, _, ok := typeOf(kv.Value)
	return t, ok
}

// typeOf maps a Go value to its GGUF type; array reports whether it is a slice.
func typeOf(v any) (t ValueType, array, ok bool) {
	switch v.(type) {
	case uint8:
		return ValueUint8, false, true
	case int8:
		return ValueInt8, false, true
	case uint16:
		return ValueUint16, false, true
	case int16:
		return ValueInt16, false, true
	case uint32:
		return ValueUint32, false, true
	case int32:
		return ValueInt32, false, true
	case float32:
		return ValueFloat32, false, true
	case bool:
		return ValueBool, false, true
	case string:
		return ValueString, false, true
	case uint64:
		return ValueUint64, false, true
	case int64:
		return ValueInt64, false, true
	case float64:
		return ValueFloat64, false, true
	case []uint8:
		return ValueUint8, true, true
	case []int8:
		return ValueInt8, true, true
	case []uint16:
		return ValueUint16, true, true
	case []int16:
		return ValueInt16, true, true
	case []uint32:
		return ValueUint32, true, true
	case []int32:
		return ValueInt32, true, true
	case []float32:
		return ValueFloat32, true, true
	case []bool:
		return ValueBool, true, true
	case []string:
		return ValueString, true, true
	case []uint64:
		return ValueUint64, true, true
	case []int64:
		return ValueInt64, true, true
	case []float64:
		return ValueFloat64, true, true
	}
	return 0, false, false
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// NDims is the number of dimensions stored in the file, 1 to 4.
	NDims int
	// Ne holds the number of elements along each dimension, innermost
	// first; the dimensions from NDims on are 1.
	Ne [MaxDims]int64
	// Type is the ggml type (TypeF32, TypeQ4_K, ...).
	Type uint32
	// Offset is where the data starts, relative to File.DataOffset.
	Offset uint64
	// Size is the number of bytes of data, without padding.
	Size int64
}

// Elements returns the number of elements of the tensor.
func (t *TensorInfo) Elements() int64 {
	return t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3]
}

// Shape returns the dimensions stored in the file: Ne[:NDims].
func (t *TensorInfo) Shape() []int64 {
	return append([]int64(nil), t.Ne[:t.NDims]...)
}

// File is the parsed header of a GGUF file.
type File struct {
	Version uint32
	KVs     []KV
	Tensors []TensorInfo
	// Alignment is the alignment of the data section and of each tensor's
	// data in it.
	Alignment int64
	// DataOffset is where the data section starts in the file.
	DataOffset int64
}

// Get returns the value of key.
func (f *File) Get(key string) (any, bool) {
	for i := range f.KVs {
		if f.KVs[i].Key == key {
			return f.KVs[i].Value, true
		}
	}
	return nil, false
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i], true
		}
	}
	return nil, false
}

// Error is the error Read and ReadFile return once the file is open.
type Error struct {
	// Path is the file's name; ReadFile sets it, Read leaves it empty.
	Path string
	// Offset is the byte offset in the file of the offending field, or -1.
	Offset int64
	// Msg says what is wrong, naming the key or tensor concerned.
	Msg string
	// Err is the underlying I/O error, or nil when the file is malformed.
	Err error
}

func (e *Error) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	if e.Offset >= 0 {
		s += "offset " + strconv.FormatInt(e.Offset, 10) + ": "
	}
	s += e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func formatErr(off int64, format string, args ...any) *Error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}
