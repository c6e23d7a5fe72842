package ggml

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
)

// MappedGGUF holds every tensor of a GGUF file in memory for computing, each of the file's
// own type and shape and named as in the file: read into one backend buffer (on the CPU, in
// memory advised for transparent huge pages), or, with MapOptions.Mmap on the CPU backend,
// memory-mapped read-only, each tensor pointing at its data inside the mapping (nothing is
// copied; the page cache is shared by every process that maps the file; a platform without
// mmap or a failed mapping reads instead). With MapOptions.FileBacked the tensors it chooses
// are mapped and the rest read.
type MappedGGUF struct {
	path   string
	ctx    *Context
	byName map[string]*Tensor
	buf    ggmlc.BackendBuffer // the backend buffer the read tensors are in; nil when none was read
	// mapping is the file mapped, nil when nothing is; mapBuf wraps it, and the tensors in it
	// are those of mapped (every tensor with MapOptions.Mmap, else MapOptions.FileBacked's).
	mapping  []byte
	mapBuf   ggmlc.BackendBuffer
	mapped   map[*Tensor]bool
	released map[*Tensor]bool // mapped tensors whose pages Release dropped
	whole    bool             // every tensor is in the mapping (MapOptions.Mmap honoured)
	size     int64
	// file is the file, open until Close, and offset each tensor's data in it (ReadAt).
	file   *os.File
	offset map[*Tensor]int64
}

// MapOptions tune MapGGUF.
type MapOptions struct {
	// Mmap maps the file on the CPU backend instead of reading the tensor data into a buffer.
	// A decoding step streams every weight, and read weights stream faster: their buffer is
	// advised for 2 MiB pages, where a mapping's pages are the page cache's 4 KiB ones (one
	// sequence's tokens/s 1.06-1.12x on a file long in the page cache, 1.3-1.9x on one just
	// written: docs/PERFORMANCE.md, "Weights read into huge pages"). Mapping starts faster and
	// shares the file's pages between processes.
	Mmap bool
	// FileBacked, where set, chooses tensors to map from the file when the rest are read (on
	// the CPU backend, where the platform maps files; elsewhere they are read with the rest):
	// tensors a caller copies into another layout at load and then releases (MappedGGUF.Release),
	// so that the original costs no memory of its own, and any later reader of it pages it back
	// in from the page cache or the file. Reading a mapped tensor is slower where it is streamed
	// (4 KiB pages of the page cache, not the read buffer's huge pages).
	FileBacked func(GGUFTensor) bool
}

// MapGGUF places the tensors of the open file f on backend b: memory-mapped when b is the
// CPU backend and the platform can map files, read otherwise. f may be closed afterwards; the
// result must be closed after the last graph that reads its tensors has run.
func MapGGUF(f *GGUF, b *Backend, opts MapOptions) (*MappedGGUF, error) {
	if f == nil || f.g.IsNil() || b == nil || b.b.IsNil() {
		return nil, ErrClosed
	}
	infos := f.Tensors()
	if len(infos) == 0 {
		return nil, fmt.Errorf("gguf %s: the file has no tensors", f.path)
	}
	ctx, err := NewContext(ContextOptions{MaxTensors: len(infos)})
	if err != nil {
		return nil, err
	}
	m := &MappedGGUF{path: f.path, ctx: ctx, byName: make(map[string]*Tensor, len(infos)), offset: make(map[*Tensor]int64, len(infos))}
	for _, info := range infos {
		t := ctx.NewTensor(info.Type, info.Ne[:]...).SetName(info.Name)
		if t == nil {
			break
		}
		if int64(t.Bytes()) != info.Size {
			ctx.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q: %d bytes in the file, %d in ggml", f.path, info.Name, info.Size, t.Bytes())
		}
		m.byName[info.Name] = t
		m.offset[t] = info.Offset
	}
	if err := ctx.Err(); err != nil {
		ctx.Close()
		return nil, fmt.Errorf("gguf %s: %w", f.path, err)
	}
	fh, err := os.Open(f.path)
	if err != nil {
		ctx.Close()
		return nil, fmt.Errorf("gguf %s: %w", f.path, err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		ctx.Close()
		return nil, fmt.Errorf("gguf %s: %w", f.path, err)
	}
	m.size = st.Size()
	for _, info := range infos {
		if info.Offset < 0 || info.Offset+info.Size > m.size {
			fh.Close()
			ctx.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q (bytes %d..%d) lies beyond the end of the file (%d bytes): truncated?", f.path, info.Name, info.Offset, info.Offset+info.Size, m.size)
		}
	}
	toMap := infos
	if !opts.Mmap {
		toMap = nil
		if opts.FileBacked != nil {
			for _, info := range infos {
				if opts.FileBacked(info) {
					toMap = append(toMap, info)
				}
			}
		}
	}
	if len(toMap) > 0 && ggmlc.BackendIsCPU(b.b) {
		err := m.mapFile(fh, toMap)
		var placed errPlaced
		if errors.As(err, &placed) {
			fh.Close()
			ctx.Close()
			return nil, placed.error
		}
		// On another error read them with the rest: the platform or the file system cannot
		// map the file.
		m.whole = err == nil && len(toMap) == len(infos)
	}
	m.file = fh // kept for ReadAt: the file mapped, even if its path now names another
	if err := m.readFile(fh, infos, b); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// mapFile maps the whole file and places each tensor of infos at its offset in the mapping.
func (m *MappedGGUF) mapFile(fh *os.File, infos []GGUFTensor) error {
	data, err := mmapFile(fh, m.size)
	if err != nil {
		return err
	}
	base := unsafe.Pointer(&data[0])
	buf := ggmlc.BackendCPUBufferFromPtr(base, len(data))
	if buf.IsNil() {
		munmapFile(data)
		return fmt.Errorf("ggml could not wrap the mapping")
	}
	ggmlc.BackendBufferSetUsage(buf, ggmlc.BackendBufferUsageWeights)
	mapped := make(map[*Tensor]bool, len(infos))
	for _, info := range infos {
		t := m.byName[info.Name]
		if st := ggmlc.BackendTensorAlloc(buf, t.t, unsafe.Add(base, info.Offset)); st != ggmlc.StatusSuccess {
			// The tensors placed so far point into the mapping, which this frees: they
			// cannot be read instead, so the file cannot be loaded.
			ggmlc.BackendBufferFree(buf)
			munmapFile(data)
			return errPlaced{fmt.Errorf("gguf %s: tensor %q: %s", m.path, info.Name, ggmlc.StatusToString(st))}
		}
		mapped[t] = true
	}
	m.mapBuf, m.mapping, m.mapped = buf, data, mapped
	return nil
}

// errPlaced is mapFile's error after it placed tensors in the mapping it then freed.
type errPlaced struct{ error }

// readFile allocates one backend buffer for every tensor not mapped and reads their data into
// it in chunks.
func (m *MappedGGUF) readFile(fh *os.File, infos []GGUFTensor, b *Backend) error {
	var toRead []GGUFTensor
	for _, info := range infos {
		if !m.mapped[m.byName[info.Name]] {
			toRead = append(toRead, info)
		}
	}
	if len(toRead) == 0 {
		return nil
	}
	buf, err := b.Alloc(m.ctx) // the tensors without data: those not mapped
	if err != nil {
		return fmt.Errorf("gguf %s: %w", m.path, err)
	}
	m.buf = buf.buf
	buf.AdviseHugePages()
	const chunk = 1 << 20
	tmp := make([]byte, min(chunk, maxTensorSize(toRead)))
	for _, info := range toRead {
		t := m.byName[info.Name]
		for off := int64(0); off < info.Size; off += chunk {
			n := min(chunk, info.Size-off)
			if _, err := fh.ReadAt(tmp[:n], info.Offset+off); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("gguf %s: tensor %q: %w", m.path, info.Name, err)
			}
			t.write(unsafe.Pointer(&tmp[0]), int(off), int(n))
		}
	}
	return nil
}

func maxTensorSize(infos []GGUFTensor) int64 {
	n := int64(1)
	for _, info := range infos {
		n = max(n, info.Size)
	}
	return n
}

// Tensor is the tensor called name, or nil.
func (m *MappedGGUF) Tensor(name string) *Tensor { return m.byName[name] }

// Mapped reports whether the tensors point into a memory mapping of the file (rather than a
// copy of it): every tensor, as MapOptions.Mmap asks.
func (m *MappedGGUF) Mapped() bool { return m.whole }

// FileBacked reports whether t's data lies in the mapping of the file (MapOptions.Mmap or
// MapOptions.FileBacked), where Release can drop it.
func (m *MappedGGUF) FileBacked(t *Tensor) bool { return m != nil && m.mapped[t] }

// Release drops the process's pages of the data of t, one of the file-backed tensors (a copy
// of which the caller made, to read instead), and reports whether it did. The tensor stays
// valid: whatever reads it later faults its bytes back in from the page cache or the file
// (so the cost of releasing a tensor still read is time, never a value). A tensor that was
// read, not mapped, and every tensor on a platform without madvise, is left as it is.
func (m *MappedGGUF) Release(t *Tensor) bool {
	if m == nil || !m.mapped[t] || m.released[t] {
		return false
	}
	// The whole pages around the data: the mapping is read-only and backed by the file, so
	// dropping a neighbour's page costs it a fault, never its bytes.
	base := uintptr(unsafe.Pointer(&m.mapping[0]))
	start := uintptr(t.t.Data()) - base
	end := start + uintptr(t.Bytes())
	start -= start % pageSize
	end = min(uintptr(len(m.mapping)), (end+pageSize-1)/pageSize*pageSize)
	if !releasePages(m.mapping[start:end]) {
		return false
	}
	if m.released == nil {
		m.released = map[*Tensor]bool{}
	}
	m.released[t] = true
	return true
}

// ReadAt reads len(p) bytes of t's data, from byte off, out of the file (the one MapGGUF opened,
// whatever its path names since), not out of the memory t points at: a caller copying a
// file-backed tensor reads it so without faulting the mapping's pages into the process. Safe
// for concurrent use.
func (m *MappedGGUF) ReadAt(t *Tensor, p []byte, off int64) error {
	if m == nil || m.file == nil {
		return ErrClosed
	}
	at, ok := m.offset[t]
	if !ok {
		return fmt.Errorf("gguf %s: %s is not one of its tensors", m.path, t.describe())
	}
	if off < 0 || off+int64(len(p)) > int64(t.Bytes()) {
		return fmt.Errorf("gguf %s: tensor %q: bytes %d..%d of %d", m.path, t.Name(), off, off+int64(len(p)), t.Bytes())
	}
	if _, err := m.file.ReadAt(p, at+off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("gguf %s: tensor %q: %w", m.path, t.Name(), err)
	}
	return nil
}

// pageSize is the granule Release rounds to (the pages of a mapping are at least this large).
const pageSize = 4096

// Path is the file's path.
func (m *MappedGGUF) Path() string { return m.path }

// Bytes is the size of the tensor data the model holds in memory: the read buffer, and the
// mapped tensors that were not released (the whole file, its header included, less those, when
// every tensor is mapped). A released tensor that a reader paged back in is not counted.
func (m *MappedGGUF) Bytes() int64 {
	var n int64
	if !m.buf.IsNil() {
		n = int64(ggmlc.BackendBufferGetSize(m.buf))
	}
	if m.whole {
		n += int64(len(m.mapping))
	} else {
		for t := range m.mapped {
			n += int64(t.Bytes())
		}
	}
	for t := range m.released {
		n -= int64(t.Bytes())
	}
	return n
}

// Close frees the buffer, unmaps the file and frees the tensors. Safe to call more than once.
func (m *MappedGGUF) Close() error {
	if m == nil {
		return nil
	}
	if !m.buf.IsNil() {
		ggmlc.BackendBufferFree(m.buf)
		m.buf = ggmlc.BackendBuffer{}
	}
	if !m.mapBuf.IsNil() {
		ggmlc.BackendBufferFree(m.mapBuf)
		m.mapBuf = ggmlc.BackendBuffer{}
	}
	var err error
	if m.mapping != nil {
		err = munmapFile(m.mapping)
		m.mapping, m.mapped, m.released = nil, nil, nil
	}
	if m.file != nil {
		m.file.Close()
		m.file = nil
	}
	if m.ctx != nil {
		m.ctx.Close()
	}
	return err
}
