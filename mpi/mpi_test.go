package mpi

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	raw "github.com/toyml/toy/generated/mpi"
	"github.com/toyml/toy/mpi/mpitest"
)

func TestLaunched(t *testing.T) {
	if mpitest.Rank() >= 0 {
		t.Skip("a rank of another test")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("PMI_SIZE", "")
	n, err := Launched()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "not under mpirun")

	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	n, err = Launched()
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	t.Setenv("OMPI_COMM_WORLD_SIZE", "four")
	_, err = Launched()
	assert.ErrorContains(t, err, `OMPI_COMM_WORLD_SIZE="four"`)

	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("PMI_SIZE", "2")
	_, err = Launched()
	assert.ErrorContains(t, err, "not Open MPI's")
}

// TestMissingLibrary: where libmpi cannot be opened, Init says what is missing (in a child
// process, since the library is loaded once per process).
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("TOY_MPI_TEST_MISSING") == "1" {
		raw.Sonames = []string{"libmpi-absent.so.40"}
		_, err := Init(DefaultOptions())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cannot load Open MPI (libmpi)")
		assert.Contains(t, err.Error(), "libmpi-absent.so.40")
		assert.Contains(t, err.Error(), "install Open MPI")
		return
	}
	if mpitest.Rank() >= 0 {
		t.Skip("a rank of another test")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	out, err := runChild(self, "TestMissingLibrary", "TOY_MPI_TEST_MISSING=1")
	require.NoError(t, err, out)
}

// rankInput is rank r's allreduce input: random values of every magnitude and sign.
func rankInput(r, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(r), 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
	}
	return v
}

// TestCollectives runs three ranks: the sum of their random buffers, reduced in place in
// buckets, against a float64 sum, broadcasts of bytes, floats and a string, and a barrier.
func TestCollectives(t *testing.T) {
	const np, n = 3, 100_003
	if mpitest.Rank() < 0 {
		res := mpitest.Launch(t, np, "TestCollectives", 2*time.Minute)
		require.NoError(t, res.Err, res.Output)
		assert.Equal(t, np, strings.Count(res.Output, "collectives ok"), res.Output)
		return
	}
	opts := DefaultOptions()
	opts.BucketBytes = 4*4099 + 2 // 24 buckets of 4099 floats and one of 1627: each part lands where it belongs
	w, err := Init(opts)
	require.NoError(t, err)
	require.Equal(t, np, w.Size())
	require.Equal(t, mpitest.Rank(), w.Rank())
	assert.Contains(t, w.Library(), "Open MPI")

	buf := rankInput(w.Rank(), n)
	require.NoError(t, w.AllReduceSum(buf))
	want := make([]float64, n)
	largest := make([]float64, n)
	for r := 0; r < np; r++ {
		for i, v := range rankInput(r, n) {
			want[i] += float64(v)
			largest[i] = math.Max(largest[i], math.Abs(float64(v)))
		}
	}
	for i := range buf {
		// Two float32 additions, in whatever order the library takes: each rounds by at most
		// half an ulp of a partial sum, which is at most twice the largest operand.
		tol := 2 * 2 * largest[i] * 0x1p-24
		if math.Abs(want[i]-float64(buf[i])) > tol {
			require.InDelta(t, want[i], float64(buf[i]), tol, "element %d", i)
		}
	}

	m := []float64{float64(w.Rank()), -float64(w.Rank())}
	require.NoError(t, w.AllReduceMax(m))
	assert.Equal(t, []float64{np - 1, 0}, m)

	b := make([]byte, 5)
	f := make([]float32, 3)
	s := ""
	if w.Rank() == 1 {
		copy(b, "hello")
		f = []float32{1.5, -2, float32(math.Inf(1))}
		s = "runs/2026-12-01"
	}
	require.NoError(t, w.Broadcast(b, 1))
	require.NoError(t, w.BroadcastFloat32(f, 1))
	got, err := w.BroadcastString(s, 1)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	assert.Equal(t, []float32{1.5, -2, float32(math.Inf(1))}, f)
	assert.Equal(t, "runs/2026-12-01", got)
	assert.ErrorContains(t, w.Broadcast(b, np), "broadcast from rank 3 of 3")

	require.NoError(t, w.Barrier())
	require.NoError(t, w.Finalize())
	assert.ErrorContains(t, w.Barrier(), "after Finalize")
	if !t.Failed() {
		os.Stdout.WriteString("collectives ok\n")
	}
}

// TestKilledRank: when one rank dies (SIGKILL, as from the OOM killer) while the others wait in
// an allreduce, mpirun ends the job with an error within seconds.
func TestKilledRank(t *testing.T) {
	if mpitest.Rank() < 0 {
		res := mpitest.Launch(t, 2, "TestKilledRank", 2*time.Minute)
		require.Error(t, res.Err, res.Output)
		assert.Less(t, res.Elapsed, 30*time.Second, res.Output)
		assert.Contains(t, res.Output, "signal 9", res.Output)
		assert.NotContains(t, res.Output, "rank 0 survived")
		return
	}
	w, err := Init(DefaultOptions())
	require.NoError(t, err)
	require.NoError(t, w.Barrier())
	if w.Rank() == 1 {
		time.Sleep(200 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	buf := make([]float32, 1<<20)
	err = w.AllReduceSum(buf)
	// mpirun kills this rank; an error return must not let it go on as if trained.
	if err != nil {
		w.Abort(1, err)
	}
	time.Sleep(time.Minute)
	os.Stdout.WriteString("rank 0 survived\n")
}

// TestCollectiveTimeout: a rank that never joins a collective (stalled, not dead) makes the
// waiting rank report which collective stalled and exit after the timeout, ending the job.
func TestCollectiveTimeout(t *testing.T) {
	if mpitest.Rank() < 0 {
		res := mpitest.Launch(t, 2, "TestCollectiveTimeout", 2*time.Minute)
		require.Error(t, res.Err, res.Output)
		assert.Contains(t, res.Output, "toy: rank 0: MPI_Allreduce did not complete in 2s", res.Output)
		assert.Less(t, res.Elapsed, 40*time.Second, res.Output)
		return
	}
	opts := DefaultOptions()
	opts.Timeout = 2 * time.Second
	w, err := Init(opts)
	require.NoError(t, err)
	require.NoError(t, w.Barrier())
	if w.Rank() == 1 {
		time.Sleep(time.Minute) // stalled: never joins
		return
	}
	w.AllReduceSum(make([]float32, 16))
	t.Error("the allreduce returned without rank 1")
}

// runChild runs this test binary's test named test with env added.
func runChild(self, test string, env ...string) (string, error) {
	cmd := exec.Command(self, "-test.run", "^"+test+"$", "-test.count", "1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBucketBytesFor: a job on one machine reduces in cache-sized parts, one across machines in
// parts large enough that network latencies stay small; LocalSize reads mpirun's count.
func TestBucketBytesFor(t *testing.T) {
	for _, c := range []struct{ local, world, want int }{
		{2, 2, DefaultBucketBytes},
		{8, 8, DefaultBucketBytes},
		{0, 4, DefaultBucketBytes}, // mpirun did not say: as on one machine
		{1, 2, ClusterBucketBytes},
		{4, 64, ClusterBucketBytes},
	} {
		assert.Equal(t, c.want, BucketBytesFor(c.local, c.world), "%d of %d local", c.local, c.world)
	}
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
	assert.Equal(t, 3, LocalSize())
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "")
	assert.Equal(t, 0, LocalSize())
}
