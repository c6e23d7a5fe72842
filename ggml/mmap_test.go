package ggml

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/gguffile"
)

// TestMapGGUF places a file's tensors memory-mapped and read, and checks that both hold the
// file's bytes, of the file's types and shapes, and compute (a q8_0 matrix times a vector).
func TestMapGGUF(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tensors := someTensors(rng)
	var w gguffile.Writer
	for _, tt := range tensors {
		require.NoError(t, w.AddTensor(tt.name, uint32(tt.typ), tt.ne, tt.data))
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, w.WriteFile(path))
	f, err := OpenGGUF(path)
	require.NoError(t, err)
	defer f.Close()
	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()

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
