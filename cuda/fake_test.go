package cuda

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/generated/cudadrv"
	"github.com/toyml/toy/generated/kernels"
)

// FakeDriverEnv enables TestFakeDriver, which must run in a process of its own: the driver is
// loaded once per process, and the fake would stand in for a real one.
const FakeDriverEnv = "TOY_CUDA_FAKE_DRIVER"

// TestFakeDriver runs package cuda against testdata/fakecuda.c, a CPU stand-in for libcuda:
// loading through dlopen, every out-parameter, the argument marshaling of the three kernels and
// the error paths, on machines without a GPU. make test runs it (-tags cuda, in its own
// process).
func TestFakeDriver(t *testing.T) {
	if os.Getenv(FakeDriverEnv) == "" {
		t.Skipf("set %s=1 to run against the fake driver (in a process of its own)", FakeDriverEnv)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", lib, "testdata/fakecuda.c", "-lm").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cudadrv.Sonames = []string{filepath.Join(t.TempDir(), "missing.so"), lib}

	d, err := Open(0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, d.Close()) }()
	assert.Equal(t, "Fake GPU", d.Name())
	assert.Equal(t, "9.0", d.Capability().String())
	assert.Equal(t, 1<<30, d.Memory())
	assert.Equal(t, 13000, d.DriverVersion())
	assert.Equal(t, "cuda-sm90a", d.Target().Name, "the exact-capability target")

	_, err = Open(3)
	assert.ErrorIs(t, err, ErrNoDevice)

	rng := rand.New(rand.NewPCG(7, 8))
	x := logits(rng, 5000, true)
	buf, err := UploadNew(d, x)
	require.NoError(t, err)
	defer buf.Free()
	got, err := d.Argmax(buf, len(x))
	require.NoError(t, err)
	assert.Equal(t, argmaxRef(x), got)
	got, err = d.Sample(buf, len(x), SampleParams{Temperature: 0, TopP: 1}, 0.5)
	require.NoError(t, err)
	assert.Equal(t, argmaxRef(x), got)
	// The fake encodes the scalar arguments it received into its result.
	got, err = d.Sample(buf, len(x), SampleParams{Temperature: 0.75, TopK: 17, TopP: 0.5}, 0.25)
	require.NoError(t, err)
	assert.Equal(t, 75*10000000+17*100000+50*1000+250, got)

	// The token sampler launches what DeviceSampling chose, with the host sampler's uniform
	// number; a model entry without the sampling module does not resolve it.
	ts, err := d.NewTokenSampler(nil, sample.NewSampler(sample.GreedyParams()))
	require.NoError(t, err)
	tok, err := ts.SampleAt(uintptr(buf.ptr), len(x))
	require.NoError(t, err)
	assert.Equal(t, int32(argmaxRef(x)), tok)
	ps := sample.Params{Temperature: 0.75, TopK: 17, TopP: 1, RepeatPenalty: 1, Seed: 5}
	ts, err = d.NewTokenSampler(nil, sample.NewSampler(ps))
	require.NoError(t, err)
	assert.Equal(t, kernels.KernelCUDASamplingSampleF32, ts.Kernel())
	tok, err = ts.SampleAt(uintptr(buf.ptr), len(x))
	require.NoError(t, err)
	u := float32(sample.NewSampler(ps).Uniform())
	assert.Equal(t, int32(75*10000000+17*100000+100*1000+int(u*1000)), tok)
	_, err = d.NewTokenSampler(&kernels.Model{Name: "no-sampling", Modules: []kernels.ModuleID{kernels.ModuleCUDAAdamw}}, sample.NewSampler(ps))
	assert.ErrorContains(t, err, "does not resolve")
	_, err = d.NewTokenSampler(nil, sample.NewSampler(sample.DefaultParams()))
	assert.ErrorContains(t, err, "runs on the host")

	n := 1001
	randv := func(positive bool) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if positive {
				v[i] = float32(math.Abs(float64(v[i])))
			}
		}
		return v
	}
	xs, gs, ms, vs := randv(false), randv(false), randv(false), randv(true)
	p := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0.1, 2, 3}
	var bufs []*Buffer
	for _, h := range [][]float32{xs, gs, ms, vs, p[:]} {
		b, err := UploadNew(d, h)
		require.NoError(t, err)
		defer b.Free()
		bufs = append(bufs, b)
	}
	require.NoError(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], n))
	require.NoError(t, d.Synchronize())
	wantX, _, _ := adamwRef(xs, gs, ms, vs, p)
	gotX := make([]float32, n)
	require.NoError(t, Download(bufs[0], gotX))
	assert.Less(t, maxRelErr(gotX, wantX), 1e-5)

	// Errors carry the driver's text; bad arguments never reach it.
	err = d.do(true, func() error {
		_, err := d.entry(kernels.ModuleCUDASampling, "no_such_kernel")
		return err
	})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cudadrv.ResultErrorNotFound, ce.Code)
	assert.Contains(t, err.Error(), "no such entry")
	assert.Error(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], n+1))
	assert.Error(t, Upload(bufs[4], make([]float32, 8)))
	require.NoError(t, bufs[4].Free())
	assert.Error(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], n))
}
