package ggml

import (
	"testing"
	"time"

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
