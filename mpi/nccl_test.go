//go:build cuda

package mpi

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/nccl"
	"github.com/toyml/toy/mpi/mpitest"
)

// TestFakeNCCL runs two ranks of a cuda build's gradient reduction against testdata/fakenccl.c,
// a stand-in for libnccl built here with mpicc that takes device addresses for host memory:
// NCCL loaded with dlopen, rank 0's unique id broadcast over MPI and checked on every rank by
// the stand-in, ncclAllReduce's arguments (float32, sum, the default stream, in place), the
// sum against a float64 reference, the wait for the device after it, and an NCCL error's
// message. What it cannot check is NCCL itself on GPUs (docs/DISTRIBUTED.md).
func TestFakeNCCL(t *testing.T) {
	const np, n = 2, 50_021
	lib := os.Getenv("TOY_FAKE_NCCL")
	if mpitest.Rank() >= 0 {
		if lib == "" {
			t.Skip("a rank of another test")
		}
		nccl.Sonames = []string{lib}
		w, err := Init(DefaultOptions())
		require.NoError(t, err)
		waits := 0
		dw, err := w.OnDevices(func() error { waits++; return nil })
		require.NoError(t, err)
		var version int
		require.Equal(t, nccl.ResultSuccess, nccl.GetVersion(&version))
		assert.Equal(t, 23007, version)

		buf := rankInput(w.Rank(), n)
		require.NoError(t, dw.AllReduceSumDevice(uintptr(unsafe.Pointer(&buf[0])), len(buf)))
		runtime.KeepAlive(buf)
		assert.Equal(t, 1, waits, "the reduction waits for the device")
		inputs := [np][]float32{rankInput(0, n), rankInput(1, n)}
		for i := range buf {
			want, largest := 0.0, 0.0
			for _, in := range inputs {
				v := float64(in[i])
				want += v
				largest = math.Max(largest, math.Abs(v))
			}
			if math.Abs(want-float64(buf[i])) > largest*0x1p-23 {
				require.InDelta(t, want, float64(buf[i]), largest*0x1p-23, "element %d", i)
			}
		}
		// The stand-in refuses a count beyond C's int, as an NCCL error with its message.
		err = dw.nccl.AllReduceSum(unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), 1<<31)
		assert.ErrorContains(t, err, "ncclAllReduce: invalid argument")

		require.NoError(t, dw.Close())
		require.NoError(t, w.Finalize())
		if !t.Failed() {
			os.Stdout.WriteString("fake nccl ok\n")
		}
		return
	}
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs Open MPI (libopenmpi-dev), but mpicc is not on PATH: %v", err)
		}
		t.Skip("mpicc is not installed (Debian: apt-get install libopenmpi-dev)")
	}
	lib = filepath.Join(t.TempDir(), "libfakenccl.so")
	out, err := exec.Command(mpicc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", lib, "testdata/fakenccl.c").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res := mpitest.Launch(t, np, "TestFakeNCCL", 2*time.Minute, "TOY_FAKE_NCCL="+lib)
	require.NoError(t, res.Err, res.Output)
	assert.Equal(t, np, strings.Count(res.Output, "fake nccl ok"), res.Output)
}
