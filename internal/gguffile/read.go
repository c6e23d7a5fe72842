package gguffile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Smallest encodings, used to bound counts by the bytes left in the file.
const (
	minKVSize     = 8 + 1 + 4 + 1         // key length, 1-byte key, type, 1-byte value
	minTensorSize = 8 + 1 + 4 + 8 + 4 + 8 // name length, 1-byte name, n_dims, ne[0], type, offset
	chunkSize     = 1 << 16               // largest allocation made before reading the bytes
)

// ReadFile reads and validates the GGUF file at path; see Read.
func ReadFile(path string) (*File, error) {
	// Opening a FIFO (or a device) for reading can block forever: look before opening.
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, Offset: -1, Msg: "not a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, Offset: -1, Msg: "not a regular file"}
	}
	file, err := Read(f, fi.Size())
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Path = path
		}
		return nil, err
	}
	return file, nil
}

// Read reads and validates the header of a GGUF file of size bytes read
// from r, and checks that every tensor's data lies within those size bytes.
// It does not read tensor data. Errors are of type *Error.
//
// Read never allocates much more than the bytes it has read, so a hostile
// count or length cannot make it run out of memory.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, formatErr(-1, "negative file size %d", size)
	}
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(size, chunkSize))), size: size}
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	return f, nil
}

type decoder struct {
	r       *bufio.Reader
	off     int64 // offset of the next byte r returns
	size    int64
	buf     [8]byte
	kvOff   int64 // where the key-value pair being read starts
	scratch []byte
}

func (d *decoder) remaining() int64 { return d.size - d.off }

// fixed reads n <= 8 bytes.
func (d *decoder) fixed(n int, what label) ([]byte, error) {
	if int64(n) > d.remaining() {
		return nil, formatErr(d.off, "file ends while reading %s: need %d bytes, %d left", what, n, d.remaining())
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, &Error{Offset: d.off, Msg: "reading " + what.String(), Err: err}
	}
	d.off += int64(n)
	return b, nil
}

func (d *decoder) u32(what label) (uint32, error) {
	b, err := d.fixed(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what label) (uint64, error) {
	b, err := d.fixed(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads an int64 count of items of at least minSize bytes each.
func (d *decoder) count(what label, minSize int64) (int64, error) {
	off := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if int64(n) < 0 {
		return 0, formatErr(off, "%s is negative (%d)", what, int64(n))
	}
	if int64(n) > d.remaining()/minSize {
		return 0, formatErr(off, "%s is %d, but the %d bytes left in the file hold at most %d", what, n, d.remaining(), d.remaining()/minSize)
	}
	return int64(n), nil
}

// str reads a length-prefixed string of at most maxLen bytes, or of any
// length that fits in the file if maxLen is 0.
func (d *decoder) str(what label, maxLen int64) (string, error) {
	off := d.off
	n, err := d.u64(what)
	if err != nil {
		return "", err
	}
	if maxLen > 0 && n > uint64(maxLen) {
		return "", formatErr(off, "%s length is %d, more than the maximum %d", what, n, maxLen)
	}
	if n > uint64(d.remaining()) {
		return "", formatErr(off, "%s length is %d, but only %d bytes are left in the file", what, n, d.remaining())
	}
	if n <= chunkSize {
		b, err := d.bytes(int(n), what)
		return string(b), err
	}
	// Grow the string as bytes arrive, in case size overstates the data.
	var sb strings.Builder
	sb.Grow(chunkSize)
	for left := int64(n); left > 0; {
		k := min(left, chunkSize)
		b, err := d.bytes(int(k), what)
		if err != nil {
			return "", err
		}
		sb.Write(b)
		left -= k
	}
	return sb.String(), nil
}

// bytes reads n <= chunkSize bytes, which the file holds, into a scratch
// buffer valid until the next call.
func (d *decoder) bytes(n int, what label) ([]byte, error) {
	if cap(d.scratch) < n {
		d.scratch = make([]byte, min(max(n, 2*cap(d.scratch)), chunkSize))
	}
	b := d.scratch[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, &Error{Offset: d.off, Msg: "reading " + what.String(), Err: err}
	}
	d.off += int64(n)
	return b, nil
}

func (d *decoder) file() (*File, error) {
	magic, err := d.fixed(4, lbl("magic"))
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, formatErr(0, "bad magic %q, want %q", magic, Magic)
	}
	version, err := d.u32(lbl("version"))
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 0:
		return nil, formatErr(4, "invalid version 0")
	case version == 1:
		return nil, formatErr(4, "version 1 is not supported by ggml (only 2 and 3)")
	case version&0xffff == 0:
		return nil, formatErr(4, "version %#x: a big-endian file? only little-endian versions 2 and 3 are supported", version)
	default:
		return nil, formatErr(4, "unsupported version %d (only 2 and 3)", version)
	}
	f := &File{Version: version, Alignment: DefaultAlignment}

	// Each count is bounded by the bytes left; the two together only after
	// both are read, as the tensor count comes first.
	nTensors, err := d.count(lbl("tensor count"), minTensorSize)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count(lbl("key-value count"), minKVSize)
	if err != nil {
		return nil, err
	}
	if nKV*minKVSize > d.remaining()-nTensors*minTensorSize {
		return nil, formatErr(8, "%d tensors and %d key-value pairs cannot fit in the %d bytes left in the file", nTensors, nKV, d.remaining())
	}

	// Counts only bound the initial capacities loosely: the slices grow as
	// entries are actually read.
	f.KVs = make([]KV, 0, min(nKV, 1024))
	keys := make(map[string]struct{}, min(nKV, 1024))
	for i := int64(0); i < nKV; i++ {
		kv, err := d.kv(i)
		if err != nil {
			return nil, err
		}
		if _, dup := keys[kv.Key]; dup {
			return nil, formatErr(d.kvOff, "duplicate key %q", kv.Key)
		}
		keys[kv.Key] = struct{}{}
		if kv.Key == AlignmentKey {
			a, err := checkAlignment(kv.Value)
			if err != nil {
				return nil, formatErr(d.kvOff, "%v", err)
			}
			f.Alignment = a
		}
		f.KVs = append(f.KVs, kv)
	}

	f.Tensors = make([]TensorInfo, 0, min(nTensors, 1024))
	infoOffs := make([]int64, 0, min(nTensors, 1024))
	names := make(map[string]struct{}, min(nTensors, 1024))
	for i := int64(0); i < nTensors; i++ {
		off := d.off
		t, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := names[t.Name]; dup {
			return nil, formatErr(off, "duplicate tensor name %q", t.Name)
		}
		names[t.Name] = struct{}{}
		f.Tensors = append(f.Tensors, t)
		infoOffs = append(infoOffs, off)
	}

	headerEnd := d.off
	if headerEnd > math.MaxInt64-f.Alignment {
		return nil, formatErr(headerEnd, "header too large")
	}
	f.DataOffset = pad(headerEnd, f.Alignment)

	// ggml requires the tensors' data in header order, each padded to the
	// alignment; expect is where the next tensor must start.
	var expect int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		off := infoOffs[i]
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, formatErr(off, "tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		if t.Offset != uint64(expect) {
			return nil, formatErr(off, "tensor %q: offset %d, expected %d (ggml requires tensor data in header order, each padded to the alignment %d)", t.Name, t.Offset, expect, f.Alignment)
		}
		start := f.DataOffset + expect // <= size + alignment: no overflow
		if start > d.size || t.Size > d.size-start {
			return nil, formatErr(off, "tensor %q: data [%d, %d) runs past end of file (%d bytes)", t.Name, start, uint64(start)+uint64(t.Size), d.size)
		}
		expect = pad(expect+t.Size, f.Alignment)
	}
	if err := d.uncountedTensors(f, nTensors, expect); err != nil {
		return nil, err
	}
	return f, nil
}

// uncountedTensors looks, when the file holds bytes past the padded end of the last counted
// tensor's data, for tensor descriptions that the header's tensor count leaves out: a count
// that is short makes the data section start inside the tensor table, which shifts every
// tensor's data, so the weights would load misaligned. d is at the end of the tensor table and
// next (relative to the data section) is where an uncounted tensor's data would start. A
// description that reads as the next tensor's, at that offset, is an error naming it; other
// trailing bytes are left alone.
func (d *decoder) uncountedTensors(f *File, counted, next int64) error {
	if f.DataOffset+next >= d.size {
		return nil
	}
	var names []string
	for i := counted; ; i++ {
		t, err := d.tensorInfo(i)
		if err != nil || t.Offset != uint64(next) || t.Size > d.size-f.DataOffset-next {
			break
		}
		names = append(names, t.Name)
		next = pad(next+t.Size, f.Alignment)
	}
	if len(names) == 0 {
		return nil
	}
	what := fmt.Sprintf("the description of tensor %q follows them", names[0])
	if len(names) > 1 {
		what = fmt.Sprintf("the descriptions of tensor %q and %d more follow them", names[0], len(names)-1)
	}
	return formatErr(8, "the header counts %d tensors, but %s: the count is short, which would shift every tensor's data", counted, what)
}

// kv reads key-value pair i; d.kvOff is set to where it starts.
func (d *decoder) kv(i int64) (KV, error) {
	d.kvOff = d.off
	key, err := d.str(label{"key %[2]d", "", i}, MaxKeyLen)
	if err != nil {
		return KV{}, err
	}
	if err := checkKey(key); err != nil {
		return KV{}, formatErr(d.kvOff, "key %d: %v", i, err)
	}
	typOff := d.off
	t, err := d.u32(label{"type of key %[1]q", key, 0})
	if err != nil {
		return KV{}, err
	}
	if t != uint32(ValueArray) {
		if ValueType(t).size() == 0 {
			return KV{}, formatErr(typOff, "key %q: unknown value type %d", key, t)
		}
		v, err := d.value(key, ValueType(t))
		return KV{Key: key, Value: v}, err
	}
	et, err := d.u32(label{"element type of key %[1]q", key, 0})
	if err != nil {
		return KV{}, err
	}
	if et == uint32(ValueArray) {
		return KV{}, formatErr(typOff+4, "key %q: nested arrays are not supported", key)
	}
	elem := ValueType(et)
	if elem.size() == 0 {
		return KV{}, formatErr(typOff+4, "key %q: unknown array element type %d", key, et)
	}
	nOff := d.off
	n, err := d.u64(label{"length of array %[1]q", key, 0})
	if err != nil {
		return KV{}, err
	}
	if n > uint64(d.remaining()/elem.size()) {
		return KV{}, formatErr(nOff, "key %q: array of %d %s needs at least %d bytes per element, only %d bytes are left in the file", key, n, elem, elem.size(), d.remaining())
	}
	v, err := d.array(key, elem, int64(n))
	return KV{Key: key, Value: v}, err
}

// value reads one scalar of type t.
func (d *decoder) value(key string, t ValueType) (any, error) {
	what := label{"value of key %[1]q", key, 0}
	if t == ValueString {
		return d.str(what, 0)
	}
	off := d.off
	b, err := d.fixed(int(t.size()), what)
	if err != nil {
		return nil, err
	}
	switch t {
	case ValueUint8:
		return b[0], nil
	case ValueInt8:
		return int8(b[0]), nil
	case ValueUint16:
		return binary.LittleEndian.Uint16(b), nil
	case ValueInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case ValueUint32:
		return binary.LittleEndian.Uint32(b), nil
	case ValueInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case ValueFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case ValueBool:
		if b[0] > 1 {
			return nil, formatErr(off, "key %q: bool value is %d, must be 0 or 1", key, b[0])
		}
		return b[0] == 1, nil
	case ValueUint64:
		return binary.LittleEndian.Uint64(b), nil
	case ValueInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case ValueFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	panic("unreachable")
}

// array reads n elements of type t into a typed slice.
func (d *decoder) array(key string, t ValueType, n int64) (any, error) {
	switch t {
	case ValueUint8:
		return readArray(d, key, t, n, func(b []byte) uint8 { return b[0] })
	case ValueInt8:
		return readArray(d, key, t, n, func(b []byte) int8 { return int8(b[0]) })
	case ValueUint16:
		return readArray(d, key, t, n, binary.LittleEndian.Uint16)
	case ValueInt16:
		return readArray(d, key, t, n, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case ValueUint32:
		return readArray(d, key, t, n, binary.LittleEndian.Uint32)
	case ValueInt32:
		return readArray(d, key, t, n, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case ValueFloat32:
		return readArray(d, key, t, n, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case ValueUint64:
		return readArray(d, key, t, n, binary.LittleEndian.Uint64)
	case ValueInt64:
		return readArray(d, key, t, n, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	case ValueFloat64:
		return readArray(d, key, t, n, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	case ValueBool:
		off := d.off
		bs, err := readArray(d, key, ValueUint8, n, func(b []byte) uint8 { return b[0] })
		if err != nil {
			return nil, err
		}
		out := make([]bool, len(bs))
		for i, b := range bs {
			if b > 1 {
				return nil, formatErr(off+int64(i), "key %q: element %d: bool value is %d, must be 0 or 1", key, i, b)
			}
			out[i] = b == 1
		}
		return out, nil
	case ValueString:
		out := make([]string, 0, min(n, chunkSize))
		for i := int64(0); i < n; i++ {
			s, err := d.str(label{"element %[2]d of key %[1]q", key, i}, 0)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	panic("unreachable")
}

// readArray reads n elements of fixed-size type t, which the file holds.
func readArray[T any](d *decoder, key string, t ValueType, n int64, conv func([]byte) T) ([]T, error) {
	size := t.size()
	out := make([]T, 0, min(n, chunkSize))
	buf := make([]byte, min(n*size, chunkSize))
	for left := n; left > 0; {
		k := min(left, int64(len(buf))/size)
		b := buf[:k*size]
		if _, err := io.ReadFull(d.r, b); err != nil {
			return nil, &Error{Offset: d.off, Msg: fmt.Sprintf("reading elements of key %q", key), Err: err}
		}
		d.off += int64(len(b))
		for j := 0; j < len(b); j += int(size) {
			out = append(out, conv(b[j:]))
		}
		left -= k
	}
	return out, nil
}

// label names the field being read; it is formatted only for an error.
type label struct {
	format string // may refer to name as %[1]q and to i as %[2]d
	name   string
	i      int64
}

func lbl(s string) label { return label{format: s} }

func (l label) String() string {
	if !strings.Contains(l.format, "%") {
		return l.format
	}
	return fmt.Sprintf(l.format, l.name, l.i)
}

// tensorInfo reads the description of tensor i.
func (d *decoder) tensorInfo(i int64) (TensorInfo, error) {
	off := d.off
	name, err := d.str(label{"name of tensor %[2]d", "", i}, MaxNameLen)
	if err != nil {
		return TensorInfo{}, err
	}
	if err := checkTensorName(name); err != nil {
		return TensorInfo{}, formatErr(off, "tensor %d: %v", i, err)
	}
	nOff := d.off
	nDims, err := d.u32(label{"tensor %[1]q: number of dimensions", name, 0})
	if err != nil {
		return TensorInfo{}, err
	}
	if nDims < 1 || nDims > MaxDims {
		return TensorInfo{}, formatErr(nOff, "tensor %q: %d dimensions, must be 1 to %d", name, nDims, MaxDims)
	}
	var ne [MaxDims]int64
	for j := range nDims {
		v, err := d.u64(label{"tensor %[1]q: dimension %[2]d", name, int64(j)})
		if err != nil {
			return TensorInfo{}, err
		}
		ne[j] = int64(v)
	}
	typ, err := d.u32(label{"tensor %[1]q: type", name, 0})
	if err != nil {
		return TensorInfo{}, err
	}
	offset, err := d.u64(label{"tensor %[1]q: offset", name, 0})
	if err != nil {
		return TensorInfo{}, err
	}
	full, size, err := checkTensor(name, typ, ne[:nDims])
	if err != nil {
		return TensorInfo{}, formatErr(off, "%v", err)
	}
	return TensorInfo{Name: name, NDims: int(nDims), Ne: full, Type: typ, Offset: offset, Size: size}, nil
}
