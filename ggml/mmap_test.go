package ggml

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/reference"
)

// openTensors writes tensors to a GGUF file and opens it, with a one-thread CPU backend to place
// it on; both are closed when the test ends.
func openTensors(t *testing.T, tensors []testTensor) (*GGUF, *Backend) {
	t.Helper()
	var w gguffile.Writer
	for _, tt := range tensors {
		require.NoError(t, w.AddTensor(tt.name, uint32(tt.typ), tt.ne, tt.data))
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, w.WriteFile(path))
	f, err := OpenGGUF(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	return f, be
}

// TestMapGGUF places a file's tensors memory-mapped and read, and checks that both hold the
// file's bytes, of the file's types and shapes, and compute (a q8_0 matrix times a vector).
func TestMapGGUF(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tensors := someTensors(rng)
	f, be := openTensors(t, tensors)

	for _, mmap := range []bool{true, false} {
		m, err := MapGGUF(f, be, MapOptions{Mmap: mmap})
		require.NoError(t, err)
		assert.Equal(t, mmap, m.Mapped())
		for _, tt := range tensors {
			x := m.Tensor(tt.name)
			require.NotNil(t, x, tt.name)
			assert.Equal(t, tt.typ, x.Type())
			want := [4]int64{1, 1, 1, 1}
			copy(want[:], tt.ne)
			assert.Equal(t, want, x.Ne())
			got, err := x.ReadBytes()
			require.NoError(t, err)
			assert.Equal(t, tt.data, got, tt.name)
		}
		assert.Nil(t, m.Tensor("nope"))
		require.NoError(t, m.Close())
		require.NoError(t, m.Close())
	}
}

// TestReadF32Into checks the non-allocating read and its errors.
func TestReadF32Into(t *testing.T) {
	h := newHarness(t)
	x := h.in(h.rand(-1, 1, 5, 3))
	y := h.inI32([]int32{1, 2}, 2)
	h.upload()
	got := make([]float32, 15)
	require.NoError(t, x.ReadF32Into(got))
	want, err := x.F32()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.ErrorContains(t, x.ReadF32Into(make([]float32, 3)), "3 values")
	assert.ErrorContains(t, y.ReadF32Into(make([]float32, 2)), "not f32")
}

// mappingRss is the resident size of the process's mappings of the file at path
// (/proc/self/smaps), or -1 where the system does not say.
func mappingRss(t *testing.T, path string) int64 {
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return -1
	}
	var rss int64
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			in = f[len(f)-1] == path // a mapping's header: range perms offset dev inode [path]
		case in && len(f) == 3 && f[0] == "Rss:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			rss += kb << 10
		}
	}
	return rss
}

// TestMapGGUFFileBacked maps the tensors MapOptions.FileBacked chooses and reads the rest:
// each holds the file's bytes, Bytes counts the read buffer and the mapped tensors, and
// Release takes a mapped tensor out of Bytes and out of the process's resident pages (Linux:
// smaps) while its bytes still read as the file's.
func TestMapGGUFFileBacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tensors := someTensors(rng)
	big := make([]float32, 256*1024) // 1 MiB of q8_0 data: pages enough to see leave
	for i := range big {
		big[i] = float32(rng.NormFloat64())
	}
	tensors = append(tensors, testTensor{"blk.0.ffn_gate.weight", Q8_0, []int64{256, 1024}, reference.QuantizeQ8_0(big)})
	f, be := openTensors(t, tensors)
	path := f.Path()
	fileBacked := func(info GGUFTensor) bool { return info.Type == Q8_0 || info.Type == Q4_0 }
	m, err := MapGGUF(f, be, MapOptions{FileBacked: fileBacked})
	require.NoError(t, err)
	defer m.Close()
	assert.False(t, m.Mapped(), "not every tensor is mapped")
	var mappedBytes, readBytes int64
	for _, tt := range tensors {
		x := m.Tensor(tt.name)
		require.NotNil(t, x, tt.name)
		assert.Equal(t, tt.typ == Q8_0 || tt.typ == Q4_0, m.FileBacked(x), tt.name)
		got, err := x.ReadBytes()
		require.NoError(t, err)
		assert.Equal(t, tt.data, got, tt.name)
		if m.FileBacked(x) {
			mappedBytes += int64(len(tt.data))
		} else {
			readBytes += int64(len(tt.data))
		}
	}
	assert.GreaterOrEqual(t, m.Bytes(), mappedBytes+readBytes)
	assert.Less(t, m.Bytes(), mappedBytes+readBytes+64*int64(len(tensors)), "the read buffer and the mapped tensors, the read ones padded")
	before := m.Bytes()

	gate := m.Tensor("blk.0.ffn_gate.weight")
	rss := mappingRss(t, path)
	if rss >= 0 {
		assert.GreaterOrEqual(t, rss, int64(gate.Bytes()), "the mapped tensor was read")
	}
	assert.False(t, m.Release(m.Tensor("token_embd.weight")), "a read tensor stays")
	if !m.Release(gate) {
		t.Skip("this platform keeps a mapping's pages")
	}
	assert.False(t, m.Release(gate), "released once")
	assert.Equal(t, before-int64(gate.Bytes()), m.Bytes(), "the released tensor is not counted")
	if rss >= 0 {
		after := mappingRss(t, path)
		assert.LessOrEqual(t, after, rss-int64(gate.Bytes())+2*pageSize, "the released tensor's pages left (%d bytes resident before, %d after)", rss, after)
	}
	for _, tt := range tensors {
		got, err := m.Tensor(tt.name).ReadBytes()
		require.NoError(t, err)
		assert.Equal(t, tt.data, got, "%s after the release", tt.name)
	}
	if rss >= 0 {
		assert.GreaterOrEqual(t, mappingRss(t, path), int64(gate.Bytes()), "read again: paged back in")
	}

	// With Mmap every tensor is mapped, whatever FileBacked says, and Bytes is the file less what
	// was released.
	whole, err := MapGGUF(f, be, MapOptions{Mmap: true, FileBacked: fileBacked})
	require.NoError(t, err)
	defer whole.Close()
	assert.True(t, whole.Mapped())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), whole.Bytes())
	require.True(t, whole.Release(whole.Tensor("blk.0.ffn_gate.weight")))
	assert.True(t, whole.FileBacked(whole.Tensor("token_embd.weight")))
	assert.Equal(t, fi.Size()-int64(gate.Bytes()), whole.Bytes())
}
