package training

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/mpi"
	"github.com/toyml/toy/mpi/mpitest"
)

var (
	dpBenchPreset  = flag.String("dp.preset", "smollm2-135m", "BenchmarkDataParallelStep: the model shape")
	dpBenchSeq     = flag.Int("dp.seq", 512, "BenchmarkDataParallelStep: tokens per sequence")
	dpBenchBatch   = flag.Int("dp.batch", 1, "BenchmarkDataParallelStep: sequences per rank per step")
	dpBenchThreads = flag.Int("dp.t", 1, "BenchmarkDataParallelStep: CPU threads per rank")
)

// timedReducer times the allreduces of a World.
type timedReducer struct {
	w     *mpi.World
	spent time.Duration
	bytes int
}

func (r *timedReducer) AllReduceSum(buf []float32) error {
	t0 := time.Now()
	err := r.w.AllReduceSum(buf)
	r.spent += time.Since(t0)
	r.bytes = max(r.bytes, 4*len(buf))
	return err
}

var (
	benchWorldOnce sync.Once
	benchWorld     *mpi.World
	benchWorldErr  error
)

// BenchmarkDataParallelStep times training steps of -dp.preset at -dp.seq with -dp.batch
// sequences per rank on -dp.t threads. Run alone it is one process training alone; under
// mpirun (with a fixed -test.benchtime, e.g. 3x, so every rank runs the same steps) each rank
// trains its share and the gradients are averaged; it then also reports the allreduce's time
// per step and the gradient bytes each rank contributes. docs/DISTRIBUTED.md gives the commands.
func BenchmarkDataParallelStep(b *testing.B) {
	c, err := config.LlamaPreset(*dpBenchPreset)
	require.NoError(b, err)
	var opts []TrainerOption
	var red *timedReducer
	size := 1
	if mpitest.Rank() >= 0 {
		initBenchWorld()
		require.NoError(b, benchWorldErr)
		red = &timedReducer{w: benchWorld}
		opts = append(opts, DataParallel(red))
		size = benchWorld.Size()
	}
	be, err := ggml.NewCPUBackend(*dpBenchThreads)
	require.NoError(b, err)
	defer be.Close()
	m, err := New(c, be)
	require.NoError(b, err)
	defer m.Close()
	require.NoError(b, m.Init())
	tr, err := NewTrainer(m, *dpBenchSeq, *dpBenchBatch, opts...)
	require.NoError(b, err)
	defer tr.Close()
	adamw := train.FromScratch()
	p, _ := adamw.Params(0, adamw.LR, true)
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := randomSeqs(rng, *dpBenchBatch, *dpBenchSeq, c.Vocab)
	_, err = tr.Step(seqs, p, p) // warm-up
	require.NoError(b, err)
	if red != nil {
		red.spent = 0
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := tr.Step(seqs, p, p)
		require.NoError(b, err)
	}
	b.StopTimer()
	perStep := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(size**dpBenchBatch**dpBenchSeq)/perStep, "tok/s")
	if red != nil {
		b.ReportMetric(red.spent.Seconds()*1000/float64(b.N), "allreduce-ms/step")
		b.ReportMetric(float64(red.bytes)/1e6, "grad-MB/rank")
		// A ring allreduce sends 2(N-1)/N of the buffer from each rank.
		b.ReportMetric(2*float64(size-1)/float64(size)*float64(red.bytes)/1e6, "ring-MB-sent/rank")
	}
}

// BenchmarkAllReduce times one MPI allreduce (sum) of -dp.mb megabytes of float32 on every
// rank; run it under mpirun with a fixed -test.benchtime.
func BenchmarkAllReduce(b *testing.B) {
	if mpitest.Rank() < 0 {
		b.Skip("run under mpirun (docs/DISTRIBUTED.md)")
	}
	initBenchWorld()
	require.NoError(b, benchWorldErr)
	buf := make([]float32, *dpBenchMB*1e6/4)
	require.NoError(b, benchWorld.AllReduceSum(buf)) // warm-up
	b.SetBytes(int64(4 * len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		require.NoError(b, benchWorld.AllReduceSum(buf))
	}
}

var (
	dpBenchMB     = flag.Int("dp.mb", 540, "BenchmarkAllReduce: megabytes of float32 to sum")
	dpBenchBucket = flag.Int("dp.bucket", mpi.DefaultBucketBytes>>10, "the benchmarks' allreduce bucket in KiB (0: one call per buffer)")
)

// initBenchWorld joins the job once, reducing in buckets of -dp.bucket KiB.
func initBenchWorld() {
	benchWorldOnce.Do(func() {
		opts := mpi.DefaultOptions()
		opts.BucketBytes = *dpBenchBucket << 10
		benchWorld, benchWorldErr = mpi.Init(opts)
	})
}

// TestMain warns when benchmarks run in a build whose CPU kernels are scalar, and finalizes MPI
// after the benchmarks that joined a job.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() != "" && !ggml.CPUKernelsFast() {
		fmt.Fprintln(os.Stderr, "warning: this test binary's CPU kernels are scalar (built without the Makefile's CGO_CFLAGS and CGO_CXXFLAGS): its timings are not the product's (docs/PERFORMANCE.md, Commands)")
	}
	code := m.Run()
	if benchWorld != nil {
		benchWorld.Finalize()
	}
	os.Exit(code)
}
