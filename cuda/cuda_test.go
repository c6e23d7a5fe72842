package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/cudadrv"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/kernelrt"
)

// The kernel tests compare each of toy's CUDA kernels with a float64 reference written here in
// plain Go (by another algorithm where one exists: sorting instead of the kernel's bisection).
// They run where a device is present, in a build with -tags cuda (scripts/gpu-check.sh), and
// skip elsewhere; TestOpenWithoutDevice covers what a machine without one sees. Each kernel
// test logs one "gpu-check:" line that scripts/gpu-check.sh turns into its table.

// openOrSkip opens device 0, skipping the test where no build target, driver or device exists.
func openOrSkip(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if errors.Is(err, kernels.ErrNotCompiledWithCUDA) || errors.Is(err, ErrNoDevice) || (err != nil && !cudadrv.Loaded()) {
		t.Skipf("no CUDA device here: %v", err)
	}
	var ce *Error
	if errors.As(err, &ce) && ce.Code == cudadrv.ResultErrorNoDevice {
		t.Skipf("no CUDA device here: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, d.Close()) })
	t.Logf("device %q, compute capability %s, %d MiB, driver %d, kernel target %s (%s)", d.Name(), d.Capability(), d.Memory()>>20, d.DriverVersion(), d.Target().Name, d.Target().Arch)
	return d
}

// report logs the line scripts/gpu-check.sh collects.
func report(t *testing.T, kernel string, cases int, maxRel float64, per time.Duration, extra string) {
	t.Logf("gpu-check: kernel=%s cases=%d maxrel=%.3g time_us=%.1f %s", kernel, cases, maxRel, float64(per.Nanoseconds())/1e3, extra)
}

// TestOpenWithoutDevice: where Open fails, it says why in words a user can act on.
func TestOpenWithoutDevice(t *testing.T) {
	d, err := Open(0)
	if err == nil {
		d.Close()
		t.Skip("a CUDA device is present")
	}
	msg := err.Error()
	switch {
	case errors.Is(err, kernels.ErrNotCompiledWithCUDA):
		assert.Contains(t, msg, "-tags cuda")
	case !cudadrv.Loaded():
		assert.Contains(t, msg, "libcuda", "the error names the library it looked for")
	default:
		assert.True(t, strings.Contains(msg, "device") || strings.Contains(msg, "CUDA"), msg)
	}
	_, err = Open(-1)
	require.Error(t, err)
}

// TestPickTarget: the exact-capability target wins; otherwise the newest compatible one.
func TestPickTarget(t *testing.T) {
	t90a := &kernels.Target{Name: "cuda-sm90a", Backend: kernels.BackendCUDA, Arch: "sm_90a"}
	t80 := &kernels.Target{Name: "cuda-sm80", Backend: kernels.BackendCUDA, Arch: "sm_80"}
	t86 := &kernels.Target{Name: "cuda-sm86", Backend: kernels.BackendCUDA, Arch: "sm_86"}
	all := []*kernels.Target{t80, t86, t90a}
	for _, c := range []struct {
		dev  kernelrt.Capability
		want *kernels.Target
	}{
		{kernelrt.Capability{Major: 9, Minor: 0}, t90a},
		{kernelrt.Capability{Major: 8, Minor: 9}, t86},
		{kernelrt.Capability{Major: 8, Minor: 0}, t80},
		{kernelrt.Capability{Major: 12, Minor: 0}, t86},
	} {
		got, err := pickTarget(all, c.dev)
		require.NoError(t, err)
		assert.Equal(t, c.want.Name, got.Name, "capability %s", c.dev)
	}
	_, err := pickTarget(all, kernelrt.Capability{Major: 7, Minor: 5})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "7.5")
}

// argmaxRef is the lowest index of the largest value (NaN never wins).
func argmaxRef(x []float32) int {
	best := -1
	for i, v := range x {
		if math.IsNaN(float64(v)) {
			continue
		}
		if best < 0 || v > x[best] {
			best = i
		}
	}
	return max(best, 0)
}

// logits are n random logits; with ties, values are drawn from a small set so that the
// maximum repeats.
func logits(rng *rand.Rand, n int, ties bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		if ties {
			x[i] = float32(rng.IntN(7)) - 3
		} else {
			x[i] = float32(rng.NormFloat64() * 3)
		}
	}
	return x
}

func TestArgmax(t *testing.T) {
	d := openOrSkip(t)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 0
	var last time.Duration
	for _, n := range []int{1, 2, 31, 33, 1000, 1024, 1025, 49152, 151936} {
		for _, ties := range []bool{false, true} {
			x := logits(rng, n, ties)
			if n > 4 && !ties {
				x[rng.IntN(n)] = float32(math.NaN())
			}
			buf, err := UploadNew(d, x)
			require.NoError(t, err)
			start := time.Now()
			got, err := d.Argmax(buf, n)
			last = time.Since(start)
			require.NoError(t, err)
			assert.Equal(t, argmaxRef(x), got, "n=%d ties=%v", n, ties)
			buf.Free()
			cases++
		}
	}
	report(t, "argmax_f32", cases, 0, last, "n=151936 (one call, with the result's download)")
}

// sampleRef is the float64 reference of sample_f32: the kept set is {x ≥ v*}, v* the largest
// logit value whose set holds ≥ topK tokens and ≥ topP of the probability mass (found by
// sorting), and u is inverted through the kept probabilities in index order. margin is the
// relative distance of the decision from a boundary (top-p mass or the inverse CDF): below
// about 1e-4 float32 and the device's fast exp may decide otherwise.
func sampleRef(x []float32, p SampleParams, u float64) (pick int, margin float64) {
	n := len(x)
	if p.Temperature <= 0 {
		return argmaxRef(x), math.Inf(1)
	}
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	w := make([]float64, n)
	z := 0.0
	for i, v := range x {
		w[i] = math.Exp((float64(v) - mx) / float64(p.Temperature))
		z += w[i]
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return x[order[a]] > x[order[b]] })
	kOn, pOn := p.TopK > 0 && p.TopK < n, p.TopP < 1
	margin = math.Inf(1)
	threshold := float64(x[order[n-1]])
	if kOn || pOn {
		count, mass := 0, 0.0
		for i := 0; i < n; {
			v := x[order[i]]
			before := mass
			for i < n && x[order[i]] == v {
				count++
				mass += w[order[i]]
				i++
			}
			if pOn {
				margin = math.Min(margin, math.Abs(before-float64(p.TopP)*z)/z)
				margin = math.Min(margin, math.Abs(mass-float64(p.TopP)*z)/z)
			}
			if (!kOn || count >= p.TopK) && (!pOn || mass >= float64(p.TopP)*z) {
				threshold = float64(v)
				break
			}
		}
	}
	total := 0.0
	for i, v := range x {
		if float64(v) >= threshold {
			total += w[i]
		}
	}
	target, acc, last := u*total, 0.0, -1
	for i, v := range x {
		if float64(v) < threshold {
			continue
		}
		last = i
		margin = math.Min(margin, math.Abs(acc-target)/total)
		acc += w[i]
		if acc > target {
			margin = math.Min(margin, math.Abs(acc-target)/total)
			return i, margin
		}
	}
	return last, margin
}

// TestSample compares sample_f32 with sampleRef on random logits, settings and draws; cases
// whose decision lies within 1e-4 of a boundary are not compared (they are counted, and must
// stay a minority).
func TestSample(t *testing.T) {
	d := openOrSkip(t)
	rng := rand.New(rand.NewPCG(3, 4))
	compared, nearBoundary := 0, 0
	var worst []string
	for _, n := range []int{1, 5, 100, 1023, 4097, 32000} {
		for _, ties := range []bool{false, true} {
			x := logits(rng, n, ties)
			buf, err := UploadNew(d, x)
			require.NoError(t, err)
			for trial := 0; trial < 40; trial++ {
				p := SampleParams{Temperature: float32(0.2 + 1.5*rng.Float64()), TopK: 0, TopP: 1}
				switch trial % 5 {
				case 1:
					p.TopK = 1 + rng.IntN(min(n, 50))
				case 2:
					p.TopP = float32(0.05 + 0.9*rng.Float64())
				case 3:
					p.TopK, p.TopP = 1+rng.IntN(min(n, 50)), float32(0.05+0.9*rng.Float64())
				case 4:
					p.Temperature = 0
				}
				u := float32(rng.Float64())
				want, margin := sampleRef(x, p, float64(u))
				got, err := d.Sample(buf, n, p, u)
				require.NoError(t, err)
				if margin < 1e-4 {
					nearBoundary++
					continue
				}
				compared++
				if got != want && len(worst) < 5 {
					worst = append(worst, fmt.Sprintf("n=%d ties=%v %+v u=%v: device %d, reference %d (margin %.2g)", n, ties, p, u, got, want, margin))
				}
			}
			buf.Free()
		}
	}
	assert.Empty(t, worst, "sample_f32 disagrees with the reference")
	// With tens of thousands of logits, single tokens carry less than 1e-4 of the mass, so
	// some draws land near an inverse-CDF step; most cases must still be compared.
	assert.GreaterOrEqual(t, compared, 4*(compared+nearBoundary)/5, "too many cases near a boundary to be a test")
	// Time the kernel on a large vocabulary (Qwen2's 151936 logits).
	x := logits(rng, 151936, false)
	buf, err := UploadNew(d, x)
	require.NoError(t, err)
	defer buf.Free()
	p := SampleParams{Temperature: 0.8, TopK: 40, TopP: 0.95}
	_, err = d.Sample(buf, len(x), p, 0.5)
	require.NoError(t, err)
	const reps = 50
	start := time.Now()
	for i := 0; i < reps; i++ {
		_, err = d.Sample(buf, len(x), p, float32(i)/reps)
		require.NoError(t, err)
	}
	report(t, "sample_f32", compared, 0, time.Since(start)/reps, fmt.Sprintf("mismatches=%d near_boundary=%d; time: n=151936 top-k 40 top-p 0.95, with the download", len(worst), nearBoundary))
}

// TestSampleValidates: bad settings are errors before any launch.
func TestSampleValidates(t *testing.T) {
	d := openOrSkip(t)
	buf, err := UploadNew(d, []float32{1, 2, 3})
	require.NoError(t, err)
	defer buf.Free()
	for _, c := range []struct {
		n int
		p SampleParams
		u float32
	}{
		{4, SampleParams{Temperature: 1, TopP: 1}, 0.5},
		{0, SampleParams{Temperature: 1, TopP: 1}, 0.5},
		{3, SampleParams{Temperature: float32(math.NaN()), TopP: 1}, 0.5},
		{3, SampleParams{Temperature: 1, TopP: 0}, 0.5},
		{3, SampleParams{Temperature: 1, TopP: 1, TopK: -1}, 0.5},
		{3, SampleParams{Temperature: 1, TopP: 1}, 1},
	} {
		_, err := d.Sample(buf, c.n, c.p, c.u)
		assert.Error(t, err, "%+v", c)
	}
}

// adamwRef is one AdamW step in float64, in ggml_opt_step_adamw's form.
func adamwRef(x, g, m, v []float32, p [7]float32) (xo, mo, vo []float64) {
	alpha, b1, b2, eps, wd, b1h, b2h := float64(p[0]), float64(p[1]), float64(p[2]), float64(p[3]), float64(p[4]), float64(p[5]), float64(p[6])
	xo, mo, vo = make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
	for i := range x {
		gi := float64(g[i])
		mo[i] = float64(m[i])*b1 + gi*(1-b1)
		vo[i] = float64(v[i])*b2 + gi*gi*(1-b2)
		xo[i] = float64(x[i])*(1-alpha*wd) - alpha*mo[i]*b1h/(math.Sqrt(vo[i]*b2h)+eps)
	}
	return
}

func maxRelErr(got []float32, want []float64) float64 {
	worst := 0.0
	for i := range got {
		e := math.Abs(float64(got[i])-want[i]) / math.Max(math.Abs(want[i]), 1e-3)
		worst = math.Max(worst, e)
	}
	return worst
}

func TestAdamW(t *testing.T) {
	d := openOrSkip(t)
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 0.0
	cases := 0
	for _, n := range []int{1, 255, 257, 100003} {
		randv := func(scale float64, positive bool) []float32 {
			out := make([]float32, n)
			for i := range out {
				out[i] = float32(rng.NormFloat64() * scale)
				if positive {
					out[i] = float32(math.Abs(float64(out[i])))
				}
			}
			return out
		}
		x, g, m, v := randv(1, false), randv(0.1, false), randv(0.01, false), randv(1e-3, true)
		step := 1 + rng.IntN(1000)
		b1, b2 := float32(0.9), float32(0.999)
		p := [7]float32{1e-3, b1, b2, 1e-8, 0.1, float32(1 / (1 - math.Pow(float64(b1), float64(step)))), float32(1 / (1 - math.Pow(float64(b2), float64(step))))}
		bufs := make([]*Buffer, 5)
		var err error
		for i, h := range [][]float32{x, g, m, v, p[:]} {
			bufs[i], err = UploadNew(d, h)
			require.NoError(t, err)
			defer bufs[i].Free()
		}
		require.NoError(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], n))
		wantX, wantM, wantV := adamwRef(x, g, m, v, p)
		gotX, gotM, gotV := make([]float32, n), make([]float32, n), make([]float32, n)
		require.NoError(t, Download(bufs[0], gotX))
		require.NoError(t, Download(bufs[2], gotM))
		require.NoError(t, Download(bufs[3], gotV))
		for name, e := range map[string]float64{"x": maxRelErr(gotX, wantX), "m": maxRelErr(gotM, wantM), "v": maxRelErr(gotV, wantV)} {
			assert.Less(t, e, 1e-5, "n=%d %s", n, name)
			worst = math.Max(worst, e)
		}
		cases++
	}
	// Time a 135M-parameter step (SmolLM2-135M's size): 28 bytes move per parameter.
	const n = 134_515_008
	buf, err := d.Alloc(4 * n)
	require.NoError(t, err)
	defer buf.Free()
	bufs := []*Buffer{buf}
	for i := 0; i < 3; i++ {
		b, err := d.Alloc(4 * n)
		require.NoError(t, err)
		defer b.Free()
		bufs = append(bufs, b)
	}
	params, err := UploadNew(d, []float32{1e-3, 0.9, 0.999, 1e-8, 0.1, 10, 1000})
	require.NoError(t, err)
	defer params.Free()
	require.NoError(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], params, n))
	require.NoError(t, d.Synchronize())
	const reps = 20
	start := time.Now()
	for i := 0; i < reps; i++ {
		require.NoError(t, d.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], params, n))
	}
	require.NoError(t, d.Synchronize())
	per := time.Since(start) / reps
	report(t, "adamw_f32", cases, worst, per, fmt.Sprintf("time: n=%d, %.0f GB/s (28 B/param)", n, 28*float64(n)/per.Seconds()/1e9))
}

// TestSampleRef checks the reference itself, without a device: sweeping u over [0, 1) must
// reproduce the restricted softmax, computed here from its definition for a fixed example.
func TestSampleRef(t *testing.T) {
	x := []float32{1, 3, 2, 3, -1, 0.5}
	for _, c := range []struct {
		p    SampleParams
		kept []int
	}{
		{SampleParams{Temperature: 1, TopP: 1}, []int{0, 1, 2, 3, 4, 5}},
		{SampleParams{Temperature: 1, TopK: 1, TopP: 1}, []int{1, 3}}, // ties at the boundary are kept
		{SampleParams{Temperature: 1, TopK: 3, TopP: 1}, []int{1, 2, 3}},
		{SampleParams{Temperature: 0.5, TopP: 0.9}, []int{1, 3}},
		{SampleParams{Temperature: 2, TopP: 0.9}, []int{0, 1, 2, 3, 5}},
	} {
		w := make([]float64, len(x))
		total := 0.0
		for _, i := range c.kept {
			w[i] = math.Exp(float64(x[i]) / float64(c.p.Temperature))
			total += w[i]
		}
		const steps = 20000
		freq := make([]float64, len(x))
		for s := 0; s < steps; s++ {
			pick, _ := sampleRef(x, c.p, (float64(s)+0.5)/steps)
			freq[pick] += 1.0 / steps
		}
		for i := range x {
			assert.InDelta(t, w[i]/total, freq[i], 1e-3, "%+v token %d", c.p, i)
		}
	}
	pick, _ := sampleRef(x, SampleParams{Temperature: 0, TopP: 1}, 0.99)
	assert.Equal(t, 1, pick, "temperature 0 is argmax, lowest index on ties")
}
