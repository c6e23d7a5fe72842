package ggml

import (
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
// mmap or a failed mapping reads instead).
type MappedGGUF struct {
	path    string
	ctx     *Context
	byName  map[string]*Tensor
	buf     ggmlc.BackendBuffer // the buffer wrapping the mapping, or the backend buffer
	mapping []byte              // nil when the data was read
	size    int64
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
	m := &MappedGGUF{path: f.path, ctx: ctx, byName: make(map[string]*Tensor, len(infos))}
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
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		ctx.Close()
		return nil, fmt.Errorf("gguf %s: %w", f.path, err)
	}
	m.size = st.Size()
	for _, info := range infos {
		if info.Offset < 0 || info.Offset+info.Size > m.size {
			ctx.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q (bytes %d..%d) lies beyond the end of the file (%d bytes): truncated?", f.path, info.Name, info.Offset, info.Offset+info.Size, m.size)
		}
	}
	if opts.Mmap && ggmlc.BackendIsCPU(b.b) {
		if err := m.mapFile(fh, infos); err == nil {
			return m, nil
		}
		// Fall through to reading: the platform or the file system cannot map it.
	}
	if err := m.readFile(fh, infos, b); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// mapFile maps the whole file and places each tensor at its offset in the mapping.
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
	for _, info := range infos {
		t := m.byName[info.Name]
		if st := ggmlc.BackendTensorAlloc(buf, t.t, unsafe.Add(base, info.Offset)); st != ggmlc.StatusSuccess {
			ggmlc.BackendBufferFree(buf)
			munmapFile(data)
			return fmt.Errorf("tensor %q: %s", info.Name, ggmlc.StatusToString(st))
		}
	}
	m.buf, m.mapping = buf, data
	return nil
}

// readFile allocates one backend buffer for every tensor and reads the data into it in
// chunks.
func (m *MappedGGUF) readFile(fh *os.File, infos []GGUFTensor, b *Backend) error {
	buf, err := b.Alloc(m.ctx)
	if err != nil {
		return fmt.Errorf("gguf %s: %w", m.path, err)
	}
	m.buf = buf.buf
	buf.AdviseHugePages()
	const chunk = 1 << 20
	tmp := make([]byte, min(chunk, maxTensorSize(infos)))
	for _, info := range infos {
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
// copy of it).
func (m *MappedGGUF) Mapped() bool { return m.mapping != nil }

// Path is the file's path.
func (m *MappedGGUF) Path() string { return m.path }

// Bytes is the size of the tensor data in memory: the whole file when it is mapped.
func (m *MappedGGUF) Bytes() int64 {
	if m.mapping != nil {
		return int64(len(m.mapping))
	}
	if m.buf.IsNil() {
		return 0
	}
	return int64(ggmlc.BackendBufferGetSize(m.buf))
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
	var err error
	if m.mapping != nil {
		err = munmapFile(m.mapping)
		m.mapping = nil
	}
	if m.ctx != nil {
		m.ctx.Close()
	}
	return err
}
