package ggml

import (
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdaptThreads computes a graph on a CPU backend of two threads while one process per
// processor spins: within a few load windows the backend computes with one thread, and every
// result is the two-thread result to the bit (a product's rows do not depend on who computes
// them). With AdaptThreads off, the backend keeps its two threads.
func TestAdaptThreads(t *testing.T) {
	if BackendKind != "cpu" || runtime.NumCPU() < 2 {
		t.Skip("needs the CPU backend and two processors")
	}
	h := newHarness(t)
	if h.be.load == nil {
		t.Skip("the load cannot be measured here")
	}
	a := h.in(h.rand(-1, 1, 96, 200, 1, 1))
	b := h.in(h.rand(-1, 1, 96, 24, 1, 1))
	c := h.c.MulMat(a, b)
	h.run(c)
	want := h.out(c)

	for i := 0; i < runtime.NumCPU(); i++ {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	deadline := time.Now().Add(3 * time.Second)
	for h.be.ComputeThreads() > 1 && time.Now().Before(deadline) {
		require.NoError(t, h.be.Compute(h.g))
		sameBits(t, "under load", want, h.out(c))
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, 1, h.be.ComputeThreads(), "every processor is busy with others: one thread")
	require.NoError(t, h.be.Compute(h.g))
	sameBits(t, "one thread", want, h.out(c))

	AdaptThreads = false
	defer func() { AdaptThreads = true }()
	require.NoError(t, h.be.Compute(h.g))
	assert.Equal(t, 2, h.be.ComputeThreads(), "AdaptThreads off: the backend's threads")
	sameBits(t, "two threads again", want, h.out(c))
}
