package ggml

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/reference"
)

// TestComputeTimed computes a small graph node by node: every node is seen once, in the
// graph's order, and the results are those of the float64 reference, as Compute's are.
func TestComputeTimed(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.rand(-1, 1, 9, 7), h.rand(-1, 1, 9, 5), h.rand(-1, 1, 7, 5)
	prod := h.c.MulMat(h.in(a), h.in(b))
	out := h.c.SoftMax(h.c.Add(h.c.Cont(h.c.Transpose(h.c.Transpose(prod))), h.in(c)))
	h.graph(false, out)
	h.upload()
	alloc, err := h.be.NewAllocator()
	require.NoError(t, err)
	t.Cleanup(func() { alloc.Close() })
	require.NoError(t, alloc.Alloc(h.g))
	var seen []string
	require.NoError(t, h.be.ComputeTimed(h.g, func(n *Tensor, d time.Duration) {
		seen = append(seen, n.OpLabel())
		require.GreaterOrEqual(t, d, time.Duration(0))
	}))
	want := make([]string, h.g.Len())
	for i := range want {
		want[i] = h.g.Node(i).OpLabel()
	}
	require.Equal(t, want, seen)
	require.Contains(t, seen, "MUL_MAT")
	require.Contains(t, seen, "SOFT_MAX")
	near(t, "node by node", reference.SoftMax(reference.Add(reference.MulMat(a, b), c)), h.out(out), mulMatTol, 1)
}

// TestInputsSetBeforeEachCompute: the graph allocator gives an input's memory to a later node
// once its last reader has run (here the ids a GetRows gathers by, as a decoder's token ids),
// so a graph computed again must have its inputs set again, for ComputeTimed as for Compute;
// an input also marked as an output keeps its values. Set again, ComputeTimed gives Compute's
// results.
func TestInputsSetBeforeEachCompute(t *testing.T) {
	for _, keep := range []bool{false, true} {
		h := newHarness(t)
		const d, vocab, n = 16, 10, 8
		table := h.rand(-1, 1, d, vocab)
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(h.rng.IntN(vocab))
		}
		idx := h.c.NewTensor(I32, n).SetInput()
		if keep {
			idx.SetOutput()
		}
		sums := h.c.SumRows(h.c.Sqr(h.c.GetRows(h.in(table), idx))) // [1, n] f32: idx's size
		h.graph(false, sums)
		h.upload()
		alloc, err := h.be.NewAllocator()
		require.NoError(t, err)
		t.Cleanup(func() { alloc.Close() })
		require.NoError(t, alloc.Alloc(h.g))
		require.NoError(t, idx.SetI32(ids))
		require.NoError(t, h.be.Compute(h.g))
		want := reference.SumRows(reference.Sqr(reference.GetRows(table, ids)))
		near(t, "Compute", want, h.out(sums), 1e-6, 1)
		after, err := idx.I32()
		require.NoError(t, err)
		if keep {
			require.Equal(t, ids, after, "an input marked as an output keeps its values")
		} else {
			got, err := sums.F32()
			require.NoError(t, err)
			bits := make([]int32, n)
			for i, v := range got {
				bits[i] = int32(math.Float32bits(v))
			}
			require.Equal(t, bits, after, "the sums were placed over the ids after the gather read them")
			require.NoError(t, idx.SetI32(ids))
		}
		require.NoError(t, h.be.ComputeTimed(h.g, func(*Tensor, time.Duration) {}))
		near(t, "ComputeTimed", want, h.out(sums), 1e-6, 1)
	}
}

// TestPeakLive: the replay of the graph allocator finds the peak of a chain of ops, within
// the buffer the allocator made, and shows the leaf a CPY writes staying to the end of the
// graph unless a view of the copy is read (the GEMM backward's release nodes).
func TestPeakLive(t *testing.T) {
	const n = 1024 // 4 KiB of f32
	for _, release := range []bool{false, true} {
		h := newHarness(t)
		a := h.in(h.rand(-1, 1, n))
		leaf := h.c.NewTensor(F32, n)
		c := h.c.Cpy(h.c.Scale(a, 2), leaf)
		g, err := h.c.NewGraph(64, false)
		require.NoError(t, err)
		if release {
			require.NoError(t, g.Expand(h.c.Cont(h.c.View(c, []int64{1}, nil, 0))))
		} else {
			require.NoError(t, g.Expand(c))
		}
		v := h.c.Sqr(h.c.Mul(leaf, a))
		big := h.c.Repeat(v, h.c.NewTensor(F32, n, 8)) // 32 KiB, the last node
		require.NoError(t, g.Expand(big.SetOutput()))
		h.upload()
		alloc, err := h.be.NewAllocator()
		require.NoError(t, err)
		defer alloc.Close()
		require.NoError(t, alloc.Alloc(g))

		node, peak, live := g.PeakLive()
		assert.Equal(t, g.Len()-1, node, "the peak is at the last node")
		var held []TensorID
		for _, l := range live {
			held = append(held, l.Tensor.ID())
		}
		assert.Contains(t, held, big.ID())
		assert.Contains(t, held, v.ID(), "big's operand")
		want := 4*8*n + 4*n // big and v
		if release {
			assert.NotContains(t, held, leaf.ID(), "the leaf is freed after its last reader")
			want += 4 // the release's one element, which nothing reads
		} else {
			assert.Contains(t, held, leaf.ID(), "a view nothing reads keeps the leaf")
			want += 4 * n
		}
		assert.Equal(t, want, peak, "release %v", release)
		assert.LessOrEqual(t, peak, alloc.Size(), "the allocator's buffer holds the peak")
	}
}

// TestPauseWorkers: a graph computed after the pool's workers were paused wakes them and gives
// the same result, every time.
func TestPauseWorkers(t *testing.T) {
	h := newHarness(t)
	a, b := h.in(h.rand(-1, 1, 64, 48)), h.in(h.rand(-1, 1, 64, 9))
	y := h.c.MulMat(a, b)
	h.run(y)
	want := h.out(y)
	for i := 0; i < 5; i++ {
		h.be.PauseWorkers()
		h.be.PauseWorkers() // twice is the same as once
		require.NoError(t, h.be.Compute(h.g))
		require.Equal(t, want, h.out(y), "compute %d after a pause", i)
	}
}
