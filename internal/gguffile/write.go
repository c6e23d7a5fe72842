package gguffile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/toyml/toy/internal/fsutil"
)

// Writer builds a GGUF version 3 file from key-value pairs and tensors, in
// the order they are added. The zero value is ready to use.
//
// The data section and each tensor's data are aligned to the value of the
// "general.alignment" key (a uint32), or to 32 without it; every tensor's
// data is followed by zero padding up to the alignment, the last one's too,
// as ggml writes it; so is the header. Writer keeps the slices passed to it; do not modify them
// before writing.
type Writer struct {
	kvs     []KV
	keys    map[string]struct{}
	tensors []writerTensor
	names   map[string]struct{}
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// AddKV adds a key-value pair. value must be one of the Go types listed on
// KV. Empty, duplicate or over-long keys, keys with NUL bytes, and an
// alignment key that is not a power-of-two uint32, are refused.
func (w *Writer) AddKV(key string, value any) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, dup := w.keys[key]; dup {
		return fmt.Errorf("gguf: duplicate key %q", key)
	}
	if err := checkValue(key, value); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if w.keys == nil {
		w.keys = make(map[string]struct{})
	}
	w.keys[key] = struct{}{}
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
	return nil
}

// AddTensor adds a tensor of ggml type typ with dimensions ne (1 to 4 of
// them, innermost first) whose data is data. The data must be exactly as long
// as the type and shape require.
func (w *Writer) AddTensor(name string, typ uint32, ne []int64, data []byte) error {
	full, size, err := checkTensor(name, typ, ne)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, dup := w.names[name]; dup {
		return fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, type %s and shape %v need %d", name, len(data), TypeName(typ), ne, size)
	}
	if w.names == nil {
		w.names = make(map[string]struct{})
	}
	w.names[name] = struct{}{}
	w.tensors = append(w.tensors, writerTensor{
		info: TensorInfo{Name: name, NDims: len(ne), Ne: full, Type: typ, Size: size},
		data: data,
	})
	return nil
}

func (w *Writer) alignment() int64 {
	for _, kv := range w.kvs {
		if kv.Key == AlignmentKey {
			return int64(kv.Value.(uint32)) // checked by AddKV
		}
	}
	return DefaultAlignment
}

// header encodes everything before the data section, without padding.
func (w *Writer) header(align int64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.tensors)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		b = appendString(b, kv.Key)
		t, array, _ := typeOf(kv.Value)
		if array {
			b = binary.LittleEndian.AppendUint32(b, uint32(ValueArray))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
		b = appendValue(b, kv.Value)
	}
	var off int64
	for _, t := range w.tensors {
		b = appendString(b, t.info.Name)
		b = binary.LittleEndian.AppendUint32(b, uint32(t.info.NDims))
		for _, n := range t.info.Ne[:t.info.NDims] {
			b = binary.LittleEndian.AppendUint64(b, uint64(n))
		}
		b = binary.LittleEndian.AppendUint32(b, t.info.Type)
		b = binary.LittleEndian.AppendUint64(b, uint64(off))
		off = pad(off+t.info.Size, align)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendValue encodes a scalar or, with its length first, an array.
func appendValue(b []byte, v any) []byte {
	le := binary.LittleEndian
	switch v := v.(type) {
	case uint8:
		return append(b, v)
	case int8:
		return append(b, uint8(v))
	case uint16:
		return le.AppendUint16(b, v)
	case int16:
		return le.AppendUint16(b, uint16(v))
	case uint32:
		return le.AppendUint32(b, v)
	case int32:
		return le.AppendUint32(b, uint32(v))
	case float32:
		return le.AppendUint32(b, math.Float32bits(v))
	case bool:
		return appendBool(b, v)
	case string:
		return appendString(b, v)
	case uint64:
		return le.AppendUint64(b, v)
	case int64:
		return le.AppendUint64(b, uint64(v))
	case float64:
		return le.AppendUint64(b, math.Float64bits(v))
	case []uint8:
		return append(le.AppendUint64(b, uint64(len(v))), v...)
	case []int8:
		return appendSlice(b, v, func(b []byte, x int8) []byte { return append(b, uint8(x)) })
	case []uint16:
		return appendSlice(b, v, le.AppendUint16)
	case []int16:
		return appendSlice(b, v, func(b []byte, x int16) []byte { return le.AppendUint16(b, uint16(x)) })
	case []uint32:
		return appendSlice(b, v, le.AppendUint32)
	case []int32:
		return appendSlice(b, v, func(b []byte, x int32) []byte { return le.AppendUint32(b, uint32(x)) })
	case []float32:
		return appendSlice(b, v, func(b []byte, x float32) []byte { return le.AppendUint32(b, math.Float32bits(x)) })
	case []bool:
		return appendSlice(b, v, appendBool)
	case []string:
		return appendSlice(b, v, appendString)
	case []uint64:
		return appendSlice(b, v, le.AppendUint64)
	case []int64:
		return appendSlice(b, v, func(b []byte, x int64) []byte { return le.AppendUint64(b, uint64(x)) })
	case []float64:
		return appendSlice(b, v, func(b []byte, x float64) []byte { return le.AppendUint64(b, math.Float64bits(x)) })
	}
	panic(fmt.Sprintf("gguf: unsupported value type %T", v)) // checked by AddKV
}

func appendSlice[T any](b []byte, s []T, add func([]byte, T) []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	for _, x := range s {
		b = add(b, x)
	}
	return b
}

// WriteTo writes the file to out and returns the number of bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align := w.alignment()
	var n int64
	var zeros [256]byte
	write := func(b []byte) error {
		k, err := out.Write(b)
		n += int64(k)
		return err
	}
	padTo := func() error {
		for n%align != 0 {
			if err := write(zeros[:min(align-n%align, int64(len(zeros)))]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(w.header(align)); err != nil {
		return n, err
	}
	if err := padTo(); err != nil {
		return n, err
	}
	for _, t := range w.tensors {
		if err := write(t.data); err != nil {
			return n, err
		}
		if err := padTo(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteFile writes the file to path atomically: it writes a temporary file
// in the same directory, syncs it and renames it to path, so that path holds
// either its old contents or the whole new file.
func (w *Writer) WriteFile(path string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := fsutil.CreateTemp(dir, "."+base+".tmp*") // 0666 less the umask
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("gguf: writing %s: %w", path, err)
		}
	}()
	if _, err := w.WriteTo(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// Make the rename durable; not all systems can sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
