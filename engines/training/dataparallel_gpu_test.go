//go:build cuda

package training

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/mpi"
	"github.com/toyml/toy/mpi/mpitest"
)

// TestDataParallelOnGPUs is TestDataParallelMatchesOneTrainer on ggml's CUDA backend with
// NCCL: TOY_NCCL_RANKS ranks, one GPU each (by local rank), sum their gradients in device
// memory with ncclAllReduce, and reproduce one trainer of the whole batch on one GPU. It needs
// GPUs, NCCL and Open MPI; scripts/gpu-check.sh runs it (1 rank on a machine with one GPU,
// which checks the device path, not the sum). Skipped elsewhere.
func TestDataParallelOnGPUs(t *testing.T) {
	out := os.Getenv("TOY_DP_TEST_OUT")
	if mpitest.Rank() >= 0 {
		if out == "" || os.Getenv("TOY_NCCL_RANKS") == "" {
			t.Skip("a rank of another test")
		}
		_, err := mpi.PinGPU() // one GPU per rank, before CUDA starts
		require.NoError(t, err)
		w, err := mpi.Init(mpi.DefaultOptions())
		require.NoError(t, err)
		dev, err := cuda.Open(0)
		require.NoError(t, err)
		defer dev.Close()
		dw, err := w.OnDevices(dev.Synchronize)
		require.NoError(t, err)
		curve := trainShareOn(t, ggml.NewBackend, dw, w.Rank(), w.Size(), false)
		b, err := json.Marshal(curve)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, fmt.Sprintf("rank%d-maskedfalse.json", w.Rank())), b, 0o644))
		require.NoError(t, dw.Close())
		require.NoError(t, w.Finalize())
		return
	}
	ranks, err := strconv.Atoi(os.Getenv("TOY_NCCL_RANKS"))
	if err != nil || ranks < 1 || dpBatch%ranks != 0 {
		t.Skipf("set TOY_NCCL_RANKS to 1, 2 or 4 GPUs to run (TOY_NCCL_RANKS=%q)", os.Getenv("TOY_NCCL_RANKS"))
	}
	dir := t.TempDir()
	res := mpitest.Launch(t, ranks, "TestDataParallelOnGPUs", 5*time.Minute, "TOY_DP_TEST_OUT="+dir, "TOY_NCCL_RANKS="+strconv.Itoa(ranks))
	require.NoError(t, res.Err, res.Output)
	want := trainShareOn(t, ggml.NewBackend, nil, 0, 1, false)
	for rank := 0; rank < ranks; rank++ {
		compareCurves(t, want, readCurve(t, dir, rank, false, res.Output), fmt.Sprintf("%d GPUs, rank %d", ranks, rank))
	}
}
