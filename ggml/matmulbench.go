package ggml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
	"unsafe"
)

// This file holds the measurements behind docs/PERFORMANCE.md, shared by the Go benchmarks
// (bench_test.go) and `toy bench matmul`.

// MatMulResult is one matrix-multiplication measurement: MulMat(A, B) with A the weight [k, m]
// of type Weight and B f32 activations [k, n], giving f32 [m, n]. It does 2·m·n·k floating-point
// operations per repetition.
type MatMulResult struct {
	Backend string // the backend's name ("CPU")
	Threads int    // the threads it computed with
	Weight  Type   // A's type
	M, N, K int

	Reps    int           // timed repetitions (after one untimed warm-up)
	Seconds float64       // mean seconds per repetition
	StdDev  float64       // standard deviation of the seconds per repetition
	Best    float64       // the fastest repetition, in seconds
	Total   time.Duration // the time all timed repetitions took
}

// Shape names the shape as llama.cpp's benchmarks do: "m×n×k" (4096×512×14336).
func (r MatMulResult) Shape() string { return fmt.Sprintf("%d×%d×%d", r.M, r.N, r.K) }

// Flops is the number of floating-point operations of one repetition, 2·m·n·k.
func (r MatMulResult) Flops() float64 { return 2 * float64(r.M) * float64(r.N) * float64(r.K) }

// GFLOPS is the throughput of the mean repetition in GFLOP/s.
func (r MatMulResult) GFLOPS() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return r.Flops() / r.Seconds / 1e9
}

// BestGFLOPS is the throughput of the fastest repetition in GFLOP/s: on a shared machine, the
// figure least disturbed by other work.
func (r MatMulResult) BestGFLOPS() float64 {
	if r.Best <= 0 {
		return 0
	}
	return r.Flops() / r.Best / 1e9
}

// GFLOPSStdDev is the spread of GFLOPS from the spread of the repetition times (first order).
func (r MatMulResult) GFLOPSStdDev() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return r.GFLOPS() * r.StdDev / r.Seconds
}

// MeasureMatMul times MulMat(A, B) on the backend: A is a weight [k, m] of type weight filled
// with random values in [-1, 1) (quantized from f32 for block types), B is random f32 [k, n].
// The graph is allocated once and computed once to warm up; then it is recomputed until
// minDuration has passed, at least twice. weight may be f32, f16, bf16 or a block type that
// quantizes without an importance matrix (q8_0, q4_0, q4_K, …); k must be a multiple of its
// block size.
func MeasureMatMul(b *Backend, weight Type, m, n, k int, minDuration time.Duration) (MatMulResult, error) {
	return measureProduct(b, productGGML, weight, m, n, k, minDuration)
}

// MeasurePackedMatMul is MeasureMatMul computing the product with toy's packed GEMM
// (MulMatPacked, which the trainer uses on the CPU): the ceiling of the training step's
// products.
func MeasurePackedMatMul(b *Backend, weight Type, m, n, k int, minDuration time.Duration) (MatMulResult, error) {
	return measureProduct(b, productPacked, weight, m, n, k, minDuration)
}

// measureProduct is MeasureMatMul with the product computed by kernel.
func measureProduct(b *Backend, kernel productKernel, weight Type, m, n, k int, minDuration time.Duration) (MatMulResult, error) {
	r := MatMulResult{Weight: weight, M: m, N: n, K: k}
	if b == nil || b.b.IsNil() {
		return r, fmt.Errorf("ggml: MeasureMatMul: %w", ErrClosed)
	}
	r.Backend, r.Threads = b.Name(), b.Threads()
	mm, err := newBenchProduct(b, weight, m, n, k, 1, kernel)
	if err != nil {
		return r, err
	}
	defer mm.Close()
	if err := mm.compute(); err != nil { // warm-up: first touch of the buffers, thread start-up
		return r, err
	}
	var times []float64
	start := time.Now()
	for len(times) < 2 || time.Since(start) < minDuration {
		t0 := time.Now()
		if err := mm.compute(); err != nil {
			return r, err
		}
		times = append(times, time.Since(t0).Seconds())
	}
	r.Total = time.Since(start)
	r.Reps = len(times)
	r.Best = times[0]
	sum := 0.0
	for _, t := range times {
		sum += t
		r.Best = min(r.Best, t)
	}
	r.Seconds = sum / float64(len(times))
	ss := 0.0
	for _, t := range times {
		ss += (t - r.Seconds) * (t - r.Seconds)
	}
	r.StdDev = math.Sqrt(ss / float64(len(times)-1))
	return r, nil
}

// benchMatMul is an allocated graph computing out = MulMat(a, b).
type benchMatMul struct {
	be        *Backend
	weights   *Context // a and b, in buf
	buf       *Buffer
	gctx      *Context // the graph
	alloc     *Allocator
	graph     *Graph
	a, b, out *Tensor
}

// benchWeightTypes are the weight types newBenchMatMul can fill: ggml_quantize_chunk handles
// them without an importance matrix.
var benchWeightTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}

// benchFillRows is how many rows of A are generated and converted at a time, to bound the f32
// staging memory for large quantized weights.
const benchFillRows = 256

func newBenchMatMul(be *Backend, weight Type, m, n, k int, seed uint64) (_ *benchMatMul, err error) {
	return newBenchProduct(be, weight, m, n, k, seed, productGGML)
}

// productKernel is which kernel computes a benchmark's product.
type productKernel int

const (
	productGGML   productKernel = iota // ggml's MulMat
	productCols                        // toy's kernel for a few columns (MulMatCols)
	productPacked                      // toy's packed GEMM (MulMatPacked)
	productQ32                         // toy's 8-bit integer product (MulMatQ32)
)

// newBenchProduct is newBenchMatMul computing the product with kernel.
func newBenchProduct(be *Backend, weight Type, m, n, k int, seed uint64, kernel productKernel) (_ *benchMatMul, err error) {
	fillable := false
	for _, t := range benchWeightTypes {
		fillable = fillable || t == weight
	}
	if !fillable {
		return nil, fmt.Errorf("ggml: MeasureMatMul: cannot make a weight of type %s (want one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K … q6_K)", TypeName(weight))
	}
	if m <= 0 || n <= 0 || k <= 0 {
		return nil, fmt.Errorf("ggml: MeasureMatMul: shape %d×%d×%d is not positive", m, n, k)
	}
	if k%BlockSize(weight) != 0 {
		return nil, fmt.Errorf("ggml: MeasureMatMul: k = %d is not a multiple of the %s block size %d", k, TypeName(weight), BlockSize(weight))
	}
	mm := &benchMatMul{be: be}
	defer func() {
		if err != nil {
			mm.Close()
		}
	}()
	if mm.weights, err = NewContext(ContextOptions{MaxTensors: 2}); err != nil {
		return nil, err
	}
	mm.a = mm.weights.NewTensor(weight, int64(k), int64(m)).SetName("a")
	mm.b = mm.weights.NewTensor(F32, int64(k), int64(n)).SetName("b")
	if err := mm.weights.Err(); err != nil {
		return nil, err
	}
	if mm.buf, err = be.Alloc(mm.weights); err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(seed, 0x70796d6c))
	row, err := RowSize(weight, int64(k))
	if err != nil {
		return nil, err
	}
	src := make([]float32, benchFillRows*k)
	for r0 := 0; r0 < m; r0 += benchFillRows {
		rows := min(benchFillRows, m-r0)
		for i := range src[:rows*k] {
			src[i] = 2*rng.Float32() - 1
		}
		// ggml_quantize_chunk also converts to f16/bf16 and copies f32.
		data, err := Quantize(weight, src[:rows*k], k)
		if err != nil {
			return nil, err
		}
		mm.a.write(unsafe.Pointer(&data[0]), r0*row, len(data))
	}
	act := make([]float32, n*k)
	for i := range act {
		act[i] = 2*rng.Float32() - 1
	}
	if err := mm.b.SetF32(act); err != nil {
		return nil, err
	}

	if mm.gctx, err = NewContext(ContextOptions{MaxTensors: 2, Graphs: 1, GraphSize: 8}); err != nil {
		return nil, err
	}
	switch kernel {
	case productQ32:
		mm.out = mm.gctx.MulMatQ32(mm.a, mm.b)
	case productCols:
		mm.out = mm.gctx.MulMatCols(mm.a, mm.b)
	case productPacked:
		mm.out = mm.gctx.MulMatPacked(mm.a, mm.b)
	default:
		mm.out = mm.gctx.MulMat(mm.a, mm.b)
	}
	if mm.out == nil {
		return nil, mm.gctx.Err()
	}
	mm.out.SetName("out").SetOutput()
	if mm.graph, err = mm.gctx.NewGraph(8, false); err != nil {
		return nil, err
	}
	if err := mm.graph.Expand(mm.out); err != nil {
		return nil, err
	}
	if mm.alloc, err = be.NewAllocator(); err != nil {
		return nil, err
	}
	if err := mm.alloc.Alloc(mm.graph); err != nil {
		return nil, err
	}
	return mm, nil
}

func (mm *benchMatMul) compute() error { return mm.be.Compute(mm.graph) }

func (mm *benchMatMul) Close() {
	mm.alloc.Close()
	mm.gctx.Close()
	mm.buf.Close()
	mm.weights.Close()
}

// MeasureGraphBuild times building, in Go, a graph of nodes nodes — a new Context, NewGraph, a
// chain of nodes element-wise ops (Add, Mul, Scale, Silu in turn) on two small inputs, Expand,
// and Close — without allocating or computing it: the cost of the bindings and their checks per
// graph. It builds once to warm up, then repeats for at least 100 ms (and at least 5 builds) and
// returns the mean time per graph.
func MeasureGraphBuild(nodes int) (time.Duration, error) {
	if err := benchBuildGraph(nodes); err != nil {
		return 0, err
	}
	reps := 0
	start := time.Now()
	for reps < 5 || time.Since(start) < 100*time.Millisecond {
		if err := benchBuildGraph(nodes); err != nil {
			return 0, err
		}
		reps++
	}
	return time.Since(start) / time.Duration(reps), nil
}

// benchBuildGraph builds and frees one graph of exactly nodes nodes.
func benchBuildGraph(nodes int) error {
	if nodes <= 0 {
		return fmt.Errorf("ggml: MeasureGraphBuild: %d nodes", nodes)
	}
	// Graph.Expand refuses a graph whose size cannot hold every tensor reachable from the
	// result, leaves included, so the graph is sized for the nodes and the two inputs.
	ctx, err := NewContext(ContextOptions{MaxTensors: nodes + 2, Graphs: 1, GraphSize: nodes + 2})
	if err != nil {
		return err
	}
	defer ctx.Close()
	x := ctx.NewTensor(F32, 64, 8).SetName("x").SetInput()
	y := ctx.NewTensor(F32, 64).SetName("y").SetInput()
	g, err := ctx.NewGraph(nodes+2, false)
	if err != nil {
		return err
	}
	h := x
	for i := 0; i < nodes; i++ {
		switch i % 4 {
		case 0:
			h = ctx.Add(h, y)
		case 1:
			h = ctx.Mul(h, y)
		case 2:
			h = ctx.Scale(h, 0.5)
		case 3:
			h = ctx.Silu(h)
		}
	}
	if err := g.Expand(h); err != nil {
		return err
	}
	if g.Len() != nodes {
		return fmt.Errorf("ggml: MeasureGraphBuild: the graph has %d nodes, want %d", g.Len(), nodes)
	}
	return nil
}
