package gguffile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomTensors are n tensors of random types and shapes (some empty) with random data.
func randomTensors(rng *rand.Rand, n int) []writerTensor {
	types := []uint32{TypeF32, TypeF16, TypeQ8_0, TypeQ4_K}
	var ts []writerTensor
	for i := range n {
		typ := types[rng.IntN(len(types))]
		block, _ := BlockSize(typ)
		ne0 := int64(block) * int64(rng.IntN(4))
		ne := []int64{ne0, 1 + int64(rng.IntN(5))}
		full, size, err := checkTensor(fmt.Sprintf("t%d", i), typ, ne)
		if err != nil {
			panic(err)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		ts = append(ts, writerTensor{info: TensorInfo{Name: fmt.Sprintf("t%d", i), NDims: len(ne), Ne: full, Type: typ, Size: size}, data: data})
	}
	return ts
}

// TestStreamMatchesWriteTo: a file streamed (header first, then the data in pieces of random
// sizes that end inside tensors or span several) is, byte for byte, the file WriteTo writes
// with the data given up front, for random tensors, alignments and key sets; Read accepts it.
// Too much data, too little, and a mix of the two ways of adding tensors are refused, and a
// failing writer's error sticks.
func TestStreamMatchesWriteTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	for round := range 30 {
		ts := randomTensors(rng, rng.IntN(6))
		var whole, streamed Writer
		align := uint32(64 << rng.IntN(3))
		for _, w := range []*Writer{&whole, &streamed} {
			require.NoError(t, w.AddKV("general.architecture", "llama"))
			if round%3 == 0 {
				require.NoError(t, w.AddKV(AlignmentKey, align))
			}
		}
		var all []byte
		for _, x := range ts {
			shape := x.info.Ne[:x.info.NDims]
			require.NoError(t, whole.AddTensor(x.info.Name, x.info.Type, shape, x.data))
			require.NoError(t, streamed.AddTensorInfo(x.info.Name, x.info.Type, shape))
			all = append(all, x.data...)
		}
		var want, got bytes.Buffer
		_, err := whole.WriteTo(&want)
		require.NoError(t, err)
		d, err := streamed.Stream(&got)
		require.NoError(t, err)
		for len(all) > 0 {
			k := min(len(all), rng.IntN(300))
			n, err := d.Write(all[:k])
			require.NoError(t, err)
			require.Equal(t, k, n)
			all = all[k:]
		}
		require.NoError(t, d.Close())
		_, more := d.Tensor()
		require.False(t, more)
		require.Equal(t, want.Bytes(), got.Bytes(), "round %d", round)
		f, err := readBytes(got.Bytes())
		require.NoError(t, err)
		require.Len(t, f.Tensors, len(ts))
		_, err = d.Write([]byte{1})
		require.ErrorContains(t, err, "beyond the last tensor")
		if len(ts) > 0 {
			_, err = streamed.WriteTo(&bytes.Buffer{})
			require.ErrorContains(t, err, "write the file with Stream")
		}
	}

	var w Writer
	require.NoError(t, w.AddTensorInfo("a", TypeF32, []int64{4, 2}))
	require.NoError(t, w.AddTensorInfo("b", TypeF32, []int64{8}))
	require.Error(t, w.AddTensorInfo("a", TypeF32, []int64{4}), "duplicate")
	d, err := w.Stream(&bytes.Buffer{})
	require.NoError(t, err)
	_, err = d.Write(make([]byte, 36))
	require.NoError(t, err)
	next, ok := d.Tensor()
	require.True(t, ok)
	require.Equal(t, "b", next.Name)
	require.ErrorContains(t, d.Close(), `4 bytes into tensor "b"`)
	require.NoError(t, w.AddKV("x", uint32(1)))
	var mixed Writer
	require.NoError(t, mixed.AddTensor("c", TypeF32, []int64{1}, make([]byte, 4)))
	_, err = mixed.Stream(&bytes.Buffer{})
	require.ErrorContains(t, err, "AddTensorInfo")

	broken := errors.New("disk gone")
	d, err = w.Stream(&failAfter{n: 150, err: broken})
	require.NoError(t, err)
	_, err = d.Write(make([]byte, 64))
	require.ErrorIs(t, err, broken)
	require.ErrorIs(t, d.Close(), broken)
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, f.err
	}
	f.n -= len(p)
	return len(p), nil
}
