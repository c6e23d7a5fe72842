package ggml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/fsutil"
	"github.com/toyml/toy/internal/gguffile"
)

// GGUFTensor describes one tensor of a GGUF file.
type GGUFTensor struct {
	Name string
	Type Type
	// Ne is the shape; unused dimensions are 1. NDims is how many the file stores.
	Ne    [4]int64
	NDims int
	// Offset is the absolute byte offset of the data in the file; Size its length.
	Offset int64
	Size   int64
}

// GGUF is an open GGUF file: metadata and tensor table, parsed by ggml (through the bindings)
// after a strict pure-Go validation (internal/gguffile) has accepted it, so a hostile file is
// refused with an error instead of aborting the process.
type GGUF struct {
	path    string
	g       ggmlc.GGUF
	meta    *Context
	tensors []GGUFTensor
	index   map[string]int
}

// OpenGGUF reads the header of the GGUF file at path. Tensor data is not loaded.
func OpenGGUF(path string) (*GGUF, error) {
	if err := linkCheck(); err != nil {
		return nil, fmt.Errorf("ggml: the linked library disagrees with the bindings: %w", err)
	}
	f, err := gguffile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var meta ggmlc.Context
	g := ggmlc.GGUFInitFromFile(path, ggmlc.GGUFInitParams{NoAlloc: true, Ctx: &meta})
	if g.IsNil() {
		return nil, fmt.Errorf("gguf %s: ggml could not read the file", path)
	}
	file := &GGUF{path: path, g: g, meta: wrapContext(meta), index: map[string]int{}}
	if n := ggmlc.GGUFGetNKv(g); n != int64(len(f.KVs)) {
		file.Close()
		return nil, fmt.Errorf("gguf %s: ggml reads %d keys where the validator read %d", path, n, len(f.KVs))
	}
	n := ggmlc.GGUFGetNTensors(g)
	if n != int64(len(f.Tensors)) {
		file.Close()
		return nil, fmt.Errorf("gguf %s: ggml reads %d tensors where the validator read %d", path, n, len(f.Tensors))
	}
	base := int64(ggmlc.GGUFGetDataOffset(g))
	for i := int64(0); i < n; i++ {
		name := ggmlc.GGUFGetTensorName(g, i)
		t := ggmlc.GetTensor(meta, name)
		if t.IsNil() {
			file.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q is missing from ggml's context", path, name)
		}
		info := f.Tensors[i]
		file.tensors = append(file.tensors, GGUFTensor{
			Name: name, Type: ggmlc.GGUFGetTensorType(g, i), Ne: t.Ne(), NDims: info.NDims,
			Offset: base + int64(ggmlc.GGUFGetTensorOffset(g, i)), Size: int64(ggmlc.GGUFGetTensorSize(g, i)),
		})
		file.index[name] = int(i)
	}
	return file, nil
}

// Path is the file's path.
func (f *GGUF) Path() string { return f.path }

// Close releases the file's metadata. Safe to call more than once.
func (f *GGUF) Close() error {
	if f == nil || f.g.IsNil() {
		return nil
	}
	ggmlc.GGUFFree(f.g)
	f.g = ggmlc.GGUF{}
	f.meta.Close()
	return nil
}

// Version is the file's GGUF version.
func (f *GGUF) Version() uint32 { return ggmlc.GGUFGetVersion(f.g) }

// Alignment is the alignment of the tensor data.
func (f *GGUF) Alignment() int { return ggmlc.GGUFGetAlignment(f.g) }

// DataOffset is where the tensor data section starts in the file.
func (f *GGUF) DataOffset() int64 { return int64(ggmlc.GGUFGetDataOffset(f.g)) }

// Keys lists the metadata keys in file order.
func (f *GGUF) Keys() []string {
	n := ggmlc.GGUFGetNKv(f.g)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = ggmlc.GGUFGetKey(f.g, int64(i))
	}
	return keys
}

// ErrNoKey is returned (wrapped) for a key the file lacks.
var ErrNoKey = errors.New("no such key")

// Value returns the value of key as the Go type of its GGUF type: uint8 … float64, bool or
// string for scalars, and a slice of one of those for arrays (the types of gguffile.KV).
func (f *GGUF) Value(key string) (any, error) {
	if f.g.IsNil() {
		return nil, ErrClosed
	}
	id := ggmlc.GGUFFindKey(f.g, key)
	if id < 0 {
		return nil, fmt.Errorf("gguf %s: %q: %w", f.path, key, ErrNoKey)
	}
	typ := ggmlc.GGUFGetKvType(f.g, id)
	if typ == ggmlc.GGUFTypeArray {
		return f.array(id)
	}
	return f.scalar(id, typ)
}

func (f *GGUF) scalar(id int64, typ ggmlc.GGUFType) (any, error) {
	g := f.g
	switch typ {
	case ggmlc.GGUFTypeUint8:
		return ggmlc.GGUFGetValU8(g, id), nil
	case ggmlc.GGUFTypeInt8:
		return ggmlc.GGUFGetValI8(g, id), nil
	case ggmlc.GGUFTypeUint16:
		return ggmlc.GGUFGetValU16(g, id), nil
	case ggmlc.GGUFTypeInt16:
		return ggmlc.GGUFGetValI16(g, id), nil
	case ggmlc.GGUFTypeUint32:
		return ggmlc.GGUFGetValU32(g, id), nil
	case ggmlc.GGUFTypeInt32:
		return ggmlc.GGUFGetValI32(g, id), nil
	case ggmlc.GGUFTypeFloat32:
		return ggmlc.GGUFGetValF32(g, id), nil
	case ggmlc.GGUFTypeBool:
		return ggmlc.GGUFGetValBool(g, id), nil
	case ggmlc.GGUFTypeString:
		return ggmlc.GGUFGetValStr(g, id), nil
	case ggmlc.GGUFTypeUint64:
		return ggmlc.GGUFGetValU64(g, id), nil
	case ggmlc.GGUFTypeInt64:
		return ggmlc.GGUFGetValI64(g, id), nil
	case ggmlc.GGUFTypeFloat64:
		return ggmlc.GGUFGetValF64(g, id), nil
	}
	return nil, fmt.Errorf("gguf %s: key %q has unknown type %d", f.path, ggmlc.GGUFGetKey(g, id), typ)
}

func copyArray[E any](p unsafe.Pointer, n int) []E {
	out := make([]E, n)
	if n > 0 {
		copy(out, unsafe.Slice((*E)(p), n))
	}
	return out
}

func (f *GGUF) array(id int64) (any, error) {
	g := f.g
	n := ggmlc.GGUFGetArrN(g, id)
	elem := ggmlc.GGUFGetArrType(g, id)
	if elem == ggmlc.GGUFTypeString {
		out := make([]string, n)
		for i := range out {
			out[i] = ggmlc.GGUFGetArrStr(g, id, i)
		}
		return out, nil
	}
	var p unsafe.Pointer
	if n > 0 {
		p = ggmlc.GGUFGetArrData(g, id)
	}
	switch elem {
	case ggmlc.GGUFTypeUint8:
		return copyArray[uint8](p, n), nil
	case ggmlc.GGUFTypeInt8:
		return copyArray[int8](p, n), nil
	case ggmlc.GGUFTypeUint16:
		return copyArray[uint16](p, n), nil
	case ggmlc.GGUFTypeInt16:
		return copyArray[int16](p, n), nil
	case ggmlc.GGUFTypeUint32:
		return copyArray[uint32](p, n), nil
	case ggmlc.GGUFTypeInt32:
		return copyArray[int32](p, n), nil
	case ggmlc.GGUFTypeFloat32:
		return copyArray[float32](p, n), nil
	case ggmlc.GGUFTypeBool:
		return copyArray[bool](p, n), nil
	case ggmlc.GGUFTypeUint64:
		return copyArray[uint64](p, n), nil
	case ggmlc.GGUFTypeInt64:
		return copyArray[int64](p, n), nil
	case ggmlc.GGUFTypeFloat64:
		return copyArray[float64](p, n), nil
	}
	return nil, fmt.Errorf("gguf %s: key %q is an array of unknown type %d", f.path, ggmlc.GGUFGetKey(g, id), elem)
}

// String returns the string value of key.
func (f *GGUF) String(key string) (string, error) { return valueAs[string](f, key) }

// Uint32 returns the uint32 value of key.
func (f *GGUF) Uint32(key string) (uint32, error) { return valueAs[uint32](f, key) }

// Float32 returns the float32 value of key.
func (f *GGUF) Float32(key string) (float32, error) { return valueAs[float32](f, key) }

// Strings returns the string-array value of key.
func (f *GGUF) Strings(key string) ([]string, error) { return valueAs[[]string](f, key) }

func valueAs[V any](f *GGUF, key string) (V, error) {
	var zero V
	v, err := f.Value(key)
	if err != nil {
		return zero, err
	}
	out, ok := v.(V)
	if !ok {
		return zero, fmt.Errorf("gguf %s: key %q holds %T, not %T", f.path, key, v, zero)
	}
	return out, nil
}

// Tensors lists the file's tensors in file order.
func (f *GGUF) Tensors() []GGUFTensor { return append([]GGUFTensor(nil), f.tensors...) }

// Tensor describes the tensor called name.
func (f *GGUF) Tensor(name string) (GGUFTensor, bool) {
	i, ok := f.index[name]
	if !ok {
		return GGUFTensor{}, false
	}
	return f.tensors[i], true
}

// ReadTensorData reads the raw bytes of the tensor called name from the file.
func (f *GGUF) ReadTensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf %s: no tensor %q", f.path, name)
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	buf := make([]byte, t.Size)
	if _, err := fh.ReadAt(buf, t.Offset); err != nil {
		return nil, fmt.Errorf("gguf %s: tensor %q: %w", f.path, name, err)
	}
	return buf, nil
}

// GGUFWriter builds a GGUF file through ggml's writer. Tensors are added by reference: their
// data is read when WriteFile runs, so they must stay allocated until then.
type GGUFWriter struct {
	g       ggmlc.GGUF
	names   map[string]bool
	tensors []*Tensor
}

// NewGGUFWriter starts an empty GGUF file.
func NewGGUFWriter() (*GGUFWriter, error) {
	if err := linkCheck(); err != nil {
		return nil, fmt.Errorf("ggml: the linked library disagrees with the bindings: %w", err)
	}
	return &GGUFWriter{g: ggmlc.GGUFInitEmpty(), names: map[string]bool{}}, nil
}

// Close frees the writer. Safe to call more than once.
func (w *GGUFWriter) Close() error {
	if w == nil || w.g.IsNil() {
		return nil
	}
	ggmlc.GGUFFree(w.g)
	w.g = ggmlc.GGUF{}
	return nil
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("gguf: empty key")
	}
	if len(key) > gguffile.MaxKeyLen {
		return fmt.Errorf("gguf: key of %d bytes (at most %d)", len(key), gguffile.MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return fmt.Errorf("gguf: key %q contains a NUL byte", key)
		}
	}
	return nil
}

func noNUL(key, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("gguf: %q: strings cannot contain NUL bytes (ggml's writer stops at them)", key)
		}
	}
	return nil
}

// Set stores key = value, replacing an earlier value. value is one of the types Value returns
// (uint8 … float64, bool, string, or a slice of one of them).
func (w *GGUFWriter) Set(key string, value any) error {
	if w.g.IsNil() {
		return ErrClosed
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if key == gguffile.AlignmentKey {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: %s must be a uint32 power of two, not %v (%T)", key, value, value)
		}
	}
	g := w.g
	switch v := value.(type) {
	case uint8:
		ggmlc.GGUFSetValU8(g, key, v)
	case int8:
		ggmlc.GGUFSetValI8(g, key, v)
	case uint16:
		ggmlc.GGUFSetValU16(g, key, v)
	case int16:
		ggmlc.GGUFSetValI16(g, key, v)
	case uint32:
		ggmlc.GGUFSetValU32(g, key, v)
	case int32:
		ggmlc.GGUFSetValI32(g, key, v)
	case float32:
		ggmlc.GGUFSetValF32(g, key, v)
	case bool:
		ggmlc.GGUFSetValBool(g, key, v)
	case string:
		if err := noNUL(key, v); err != nil {
			return err
		}
		ggmlc.GGUFSetValStr(g, key, v)
	case uint64:
		ggmlc.GGUFSetValU64(g, key, v)
	case int64:
		ggmlc.GGUFSetValI64(g, key, v)
	case float64:
		ggmlc.GGUFSetValF64(g, key, v)
	case []string:
		for _, s := range v {
			if err := noNUL(key, s); err != nil {
				return err
			}
		}
		ggmlc.GGUFSetArrStr(g, key, v, len(v))
	case []uint8:
		setArray(g, key, ggmlc.GGUFTypeUint8, v)
	case []int8:
		setArray(g, key, ggmlc.GGUFTypeInt8, v)
	case []uint16:
		setArray(g, key, ggmlc.GGUFTypeUint16, v)
	case []int16:
		setArray(g, key, ggmlc.GGUFTypeInt16, v)
	case []uint32:
		setArray(g, key, ggmlc.GGUFTypeUint32, v)
	case []int32:
		setArray(g, key, ggmlc.GGUFTypeInt32, v)
	case []float32:
		setArray(g, key, ggmlc.GGUFTypeFloat32, v)
	case []bool:
		setArray(g, key, ggmlc.GGUFTypeBool, v)
	case []uint64:
		setArray(g, key, ggmlc.GGUFTypeUint64, v)
	case []int64:
		setArray(g, key, ggmlc.GGUFTypeInt64, v)
	case []float64:
		setArray(g, key, ggmlc.GGUFTypeFloat64, v)
	default:
		return fmt.Errorf("gguf: %q: %T is not a GGUF value type", key, value)
	}
	return nil
}

func setArray[E any](g ggmlc.GGUF, key string, typ ggmlc.GGUFType, v []E) {
	var p unsafe.Pointer
	if len(v) > 0 {
		p = unsafe.Pointer(&v[0])
	}
	ggmlc.GGUFSetArrData(g, key, typ, p, len(v))
}

// AddTensor adds t (named, contiguous, with memory) to the file.
func (w *GGUFWriter) AddTensor(t *Tensor) error {
	if w.g.IsNil() {
		return ErrClosed
	}
	if t == nil {
		return fmt.Errorf("gguf: AddTensor: invalid tensor")
	}
	name := t.Name()
	switch {
	case name == "":
		return fmt.Errorf("gguf: AddTensor: %s has no name", t.describe())
	case w.names[name]:
		return fmt.Errorf("gguf: AddTensor: a tensor named %q is already in the file", name)
	case !t.IsContiguous():
		return fmt.Errorf("gguf: AddTensor: %s is not contiguous", t.describe())
	case !t.HasMemory():
		return fmt.Errorf("gguf: AddTensor: %s has no memory", t.describe())
	}
	ggmlc.GGUFAddTensor(w.g, t.t)
	w.names[name] = true
	w.tensors = append(w.tensors, t)
	return nil
}

// WriteFile writes the file atomically: to a temporary name in path's directory, then renamed
// over path, so a failed write never leaves a half-written file behind.
func (w *GGUFWriter) WriteFile(path string) error {
	if w.g.IsNil() {
		return ErrClosed
	}
	for _, t := range w.tensors {
		if t.ctx.c.IsNil() || !t.HasMemory() {
			return fmt.Errorf("gguf %s: tensor %q lost its memory before the write", path, t.Name())
		}
	}
	tmp, err := fsutil.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*") // 0666 less the umask; ggml keeps the mode
	if err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	if !ggmlc.GGUFWriteToFile(w.g, name, false) {
		return fmt.Errorf("gguf %s: ggml could not write the file", path)
	}
	if err := syncFile(name); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	return nil
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
