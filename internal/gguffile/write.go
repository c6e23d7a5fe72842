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
	info     TensorInfo
	data     []byte
	streamed bool // declared by AddTensorInfo: its data comes through Stream's DataWriter
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

// AddTensorInfo declares a tensor of ggml type typ with dimensions ne whose data is not given
// now but streamed, after the header, through the DataWriter that Stream returns. A Writer
// whose tensors are declared so is written with Stream, not WriteTo or WriteFile.
func (w *Writer) AddTensorInfo(name string, typ uint32, ne []int64) error {
	full, size, err := checkTensor(name, typ, ne)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, dup := w.names[name]; dup {
		return fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	if w.names == nil {
		w.names = make(map[string]struct{})
	}
	w.names[name] = struct{}{}
	w.tensors = append(w.tensors, writerTensor{
		info:     TensorInfo{Name: name, NDims: len(ne), Ne: full, Type: typ, Size: size},
		streamed: true,
	})
	return nil
}

// Stream writes the header (every key-value pair and tensor description, the offsets following
// from the declared types and shapes) and its padding to out, and returns the DataWriter that
// takes the tensors' data, in the order they were declared. Every tensor must have been
// declared with AddTensorInfo.
func (w *Writer) Stream(out io.Writer) (*DataWriter, error) {
	for _, t := range w.tensors {
		if !t.streamed {
			return nil, fmt.Errorf("gguf: tensor %q was added with its data; Stream takes tensors declared with AddTensorInfo", t.info.Name)
		}
	}
	d := &DataWriter{out: out, tensors: w.tensors, align: w.alignment()}
	if err := d.write(w.header(d.align)); err != nil {
		return nil, err
	}
	if err := d.pad(); err != nil {
		return nil, err
	}
	return d, nil
}

// DataWriter writes the data section of a streamed GGUF file (Writer.Stream): the declared
// tensors' data, in order, each followed by its padding up to the alignment as it completes.
type DataWriter struct {
	out     io.Writer
	tensors []writerTensor
	align   int64
	n       int64 // bytes written to out
	cur     int   // the tensor whose data comes next
	have    int64 // bytes of it written
	err     error // the first write error: every later call returns it
}

// Write writes the next bytes of the tensors' data; p may end inside a tensor or span
// several. Bytes beyond the last declared tensor's are refused.
func (d *DataWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		if d.err != nil {
			return done, d.err
		}
		if d.cur == len(d.tensors) {
			return done, fmt.Errorf("gguf: %d bytes of data beyond the last tensor's", len(p))
		}
		t := d.tensors[d.cur].info
		k := min(int64(len(p)), t.Size-d.have)
		if err := d.write(p[:k]); err != nil {
			return done, err
		}
		done, p, d.have = done+int(k), p[k:], d.have+k
		d.next()
	}
	return done, d.err
}

// next moves past the current tensor (and any empty ones after it) once its data is whole,
// padding it.
func (d *DataWriter) next() {
	for d.err == nil && d.cur < len(d.tensors) && d.have == d.tensors[d.cur].info.Size {
		d.err = d.pad()
		d.cur, d.have = d.cur+1, 0
	}
}

// Tensor is the description of the tensor whose data comes next, and false once every
// tensor's data has been written.
func (d *DataWriter) Tensor() (TensorInfo, bool) {
	d.next()
	if d.cur == len(d.tensors) {
		return TensorInfo{}, false
	}
	return d.tensors[d.cur].info, true
}

// Close reports an error unless every declared tensor's data was written whole (and every
// write succeeded). It does not close the underlying writer.
func (d *DataWriter) Close() error {
	d.next()
	if d.err != nil {
		return d.err
	}
	if d.cur < len(d.tensors) {
		t := d.tensors[d.cur].info
		return fmt.Errorf("gguf: the data ends %d bytes into tensor %q, which has %d, with %d tensors to go", d.have, t.Name, t.Size, len(d.tensors)-d.cur-1)
	}
	return nil
}

func (d *DataWriter) write(b []byte) error {
	k, err := d.out.Write(b)
	d.n += int64(k)
	if err != nil && d.err == nil {
		d.err = err
	}
	return err
}

func (d *DataWriter) pad() error {
	var zeros [256]byte
	for d.n%d.align != 0 {
		if err := d.write(zeros[:min(d.align-d.n%d.align, int64(len(zeros)))]); err != nil {
			return err
		}
	}
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
	for _, t := range w.tensors {
		if t.streamed {
			return 0, fmt.Errorf("gguf: tensor %q was declared without its data; write the file with Stream", t.info.Name)
		}
	}
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
