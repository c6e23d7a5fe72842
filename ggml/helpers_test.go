package ggml

import (
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/reference"
)

// The op tests run a few ggml ops on small random tensors of odd sizes and compare every
// element with internal/reference (float64). A harness h holds:
//
//   - h.w, a context for inputs: h.in, h.inF16, h.inI32, h.param make tensors there and
//     remember their data, which is uploaded when the graph runs (after Backend.Alloc);
//   - h.c, the graph context in which the test builds ops;
//
// h.run(outs...) expands the outputs into a graph, allocates and computes it, and h.out reads
// an f32 result back as a reference.Tensor. h.runBackward does the same after BuildBackward.

// testThreads is the number of CPU threads the tests compute with.
const testThreads = 2

type harness struct {
	t    *testing.T
	be   *Backend
	w, c *Context
	g    *Graph
	rng  *rand.Rand
	sets []func() error // uploads of input data, run after the inputs are allocated
	done bool           // the inputs are allocated and uploaded
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	be, err := NewBackend(testThreads) // the build's backend: -tags cuda runs the op tests on the GPU
	require.NoError(t, err)
	w, err := NewContext(ContextOptions{MaxTensors: 64})
	require.NoError(t, err)
	c, err := NewContext(ContextOptions{MaxTensors: 4096, Graphs: 1, GraphSize: 4096, Grads: true})
	require.NoError(t, err)
	seed := fnv.New64a()
	seed.Write([]byte(t.Name())) // a fixed seed per test: failures reproduce
	h := &harness{t: t, be: be, w: w, c: c, rng: rand.New(rand.NewPCG(seed.Sum64(), 0x5eed))}
	t.Cleanup(func() { c.Close(); w.Close(); be.Close() })
	return h
}

// rand is a reference tensor of shape ne with values uniform in [lo, hi), rounded to float32
// so that the reference sees exactly what ggml does.
func (h *harness) rand(lo, hi float64, ne ...int) reference.Tensor {
	return reference.Rand(h.rng, lo, hi, ne...).Map(reference.RoundF32)
}

// randAway is like rand but with |x| in [lo, hi) and a random sign (away from 0).
func (h *harness) randAway(lo, hi float64, ne ...int) reference.Tensor {
	x := h.rand(lo, hi, ne...)
	for i := range x.Data {
		if h.rng.IntN(2) == 0 {
			x.Data[i] = -x.Data[i]
		}
	}
	return x
}

// distinct is a tensor of shape ne whose values are all distinct (and exactly representable
// in f32): a random permutation of k/8 - len/16.
func (h *harness) distinct(ne ...int) reference.Tensor {
	x := reference.New(ne...)
	for i, p := range h.rng.Perm(len(x.Data)) {
		x.Data[i] = float64(p)/8 - float64(len(x.Data))/16
	}
	return x
}

func ne64(ne [4]int) []int64 { return []int64{int64(ne[0]), int64(ne[1]), int64(ne[2]), int64(ne[3])} }

// in makes an f32 input holding x.
func (h *harness) in(x reference.Tensor) *Tensor {
	t := h.w.NewTensor(F32, ne64(x.Ne)...)
	require.NotNil(h.t, t, "%v", h.w.Err())
	data := x.ToF32()
	h.sets = append(h.sets, func() error { return t.SetF32(data) })
	return t
}

// inF16 makes an f16 input holding x rounded to half precision (x.Map(reference.RoundF16)).
func (h *harness) inF16(x reference.Tensor) *Tensor {
	t := h.w.NewTensor(F16, ne64(x.Ne)...)
	require.NotNil(h.t, t, "%v", h.w.Err())
	bits := make([]uint16, len(x.Data))
	for i, v := range x.Data {
		bits[i] = reference.F32ToF16(float32(v))
	}
	h.sets = append(h.sets, func() error { return t.SetF16(bits) })
	return t
}

// inI32 makes an i32 input of shape ne holding v.
func (h *harness) inI32(v []int32, ne ...int64) *Tensor {
	t := h.w.NewTensor(I32, ne...)
	require.NotNil(h.t, t, "%v", h.w.Err())
	h.sets = append(h.sets, func() error { return t.SetI32(v) })
	return t
}

// inBytes makes an input of type typ and shape ne holding raw (e.g. quantized) data.
func (h *harness) inBytes(typ Type, raw []byte, ne ...int64) *Tensor {
	t := h.w.NewTensor(typ, ne...)
	require.NotNil(h.t, t, "%v", h.w.Err())
	h.sets = append(h.sets, func() error { return t.SetBytes(raw) })
	return t
}

// param is an f32 input marked as a trainable parameter.
func (h *harness) param(x reference.Tensor) *Tensor { return h.in(x).SetParam() }

// upload allocates the inputs on the backend and copies their data in (once).
func (h *harness) upload() {
	h.t.Helper()
	if h.done {
		return
	}
	h.done = true
	buf, err := h.be.Alloc(h.w)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { buf.Close() })
	for _, set := range h.sets {
		require.NoError(h.t, set())
	}
}

// graph builds a graph (with gradient slots when grads) holding outs.
func (h *harness) graph(grads bool, outs ...*Tensor) {
	h.t.Helper()
	require.NoError(h.t, h.c.Err())
	g, err := h.c.NewGraph(4096, grads)
	require.NoError(h.t, err)
	for _, o := range outs {
		require.NotNil(h.t, o)
		o.SetOutput()
		require.NoError(h.t, g.Expand(o))
	}
	h.g = g
}

// compute allocates the graph, optionally resets it (gradients), and computes it.
func (h *harness) compute(reset bool) {
	h.t.Helper()
	h.upload()
	a, err := h.be.NewAllocator()
	require.NoError(h.t, err)
	h.t.Cleanup(func() { a.Close() })
	require.NoError(h.t, a.Alloc(h.g))
	if reset {
		h.g.Reset()
	}
	err = h.be.Compute(h.g)
	if errors.Is(err, ErrUnsupported) && BackendKind != "cpu" {
		h.t.Skipf("not on this backend: %v", err)
	}
	require.NoError(h.t, err)
}

// onCPU reports whether the tests run on the CPU backend (the build's backend; -tags cuda runs
// them on ggml's CUDA backend, whose numerics differ where the tests say so).
const onCPU = BackendKind == "cpu"

// run computes outs (forward only).
func (h *harness) run(outs ...*Tensor) {
	h.t.Helper()
	h.graph(false, outs...)
	h.compute(false)
}

// out reads the f32 tensor x back (after run) as a reference tensor of its shape.
func (h *harness) out(x *Tensor) reference.Tensor {
	h.t.Helper()
	require.NotNil(h.t, x)
	if !x.IsContiguous() {
		h.t.Fatalf("out: %s is not contiguous", x)
	}
	data, err := x.F32()
	require.NoError(h.t, err)
	ne := x.Ne()
	return reference.FromF32(data, int(ne[0]), int(ne[1]), int(ne[2]), int(ne[3]))
}

// eval runs x alone and reads it back.
func (h *harness) eval(x *Tensor) reference.Tensor {
	h.t.Helper()
	h.run(x)
	return h.out(x)
}

// outI32 reads an i32 tensor back.
func (h *harness) outI32(x *Tensor) []int32 {
	h.t.Helper()
	v, err := x.I32()
	require.NoError(h.t, err)
	return v
}

// near asserts that got matches want to within tol: |got-want| / max(|got|, |want|, floor)
// for every element (reference.RelErr), with shapes equal. It logs the observed error, which
// `go test -v` shows, and returns it.
// sameBits requires got to hold want's float32 values to the bit, element by element.
func sameBits(t *testing.T, what string, want, got reference.Tensor) {
	t.Helper()
	require.Equal(t, want.Ne, got.Ne, "%s: shapes", what)
	for i := range want.Data {
		require.Equal(t, math.Float32bits(float32(want.Data[i])), math.Float32bits(float32(got.Data[i])), "%s: element %d: want %g, got %g", what, i, want.Data[i], got.Data[i])
	}
}

func near(t *testing.T, what string, want, got reference.Tensor, tol, floor float64) float64 {
	t.Helper()
	require.Equal(t, want.Ne, got.Ne, "%s: shapes", what)
	e, i := reference.WorstRelErr(want.Data, got.Data, floor)
	if i >= 0 {
		t.Logf("%-40s max err %.3g (tol %.3g, floor %g) worst at %d: want %.7g got %.7g", what, e, tol, floor, i, want.Data[i], got.Data[i])
	}
	if !(e <= tol) {
		t.Errorf("%s: max err %.3g > %.3g at element %d: want %.7g, got %.7g", what, e, tol, i, want.Data[i], got.Data[i])
	}
	return e
}

// tight is the tolerance for ops whose only error is float32 rounding (relative, with an
// absolute floor of 1).
const tight = 1e-5

// maxAbs is max |x|.
func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
