// Package blasgemm times the f32 GEMM of OpenBLAS (cblas_sgemm, bound by specs/cblas and
// opened with dlopen), the best sgemm commonly installed on a Linux machine, so that `toy bench`
// can put ggml's GEMM and toy's training next to it. toy's computation never uses it.
package blasgemm

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/toyml/toy/generated/cblas"
)

// Result is one timed shape: the mean and the best repetition, in GFLOP/s (2·m·n·k flops).
type Result struct {
	M, N, K, Threads int
	Reps             int
	GFLOPS, Best     float64
}

// Load opens OpenBLAS; its error says which libraries dlopen tried.
func Load() error { return cblas.Load() }

// MatMul is ggml's MulMat(A, B) through OpenBLAS: A holds m rows of k (a weight [k, m] in
// ggml's terms), B n rows of k (activations [k, n]), and the result n rows of m ([m, n]), all
// row-major: C = B·Aᵀ.
func MatMul(a, b []float32, m, n, k int) ([]float32, error) {
	if len(a) != m*k || len(b) != n*k {
		return nil, fmt.Errorf("blasgemm: A has %d values and B %d, want %d×%d and %d×%d", len(a), len(b), m, k, n, k)
	}
	if err := Load(); err != nil {
		return nil, err
	}
	c := make([]float32, n*m)
	cblas.Sgemm(cblas.OrderRowMajor, cblas.TransposeNo, cblas.TransposeYes, n, m, k, 1, b, k, a, k, 0, c, m)
	return c, nil
}

// Measure times MatMul of random matrices with the given threads: one warm-up, then
// repetitions for at least minDuration (at least two).
func Measure(threads, m, n, k int, minDuration time.Duration) (Result, error) {
	r := Result{M: m, N: n, K: k, Threads: threads}
	if m < 1 || n < 1 || k < 1 || threads < 1 {
		return r, fmt.Errorf("blasgemm: shape %d×%d×%d with %d threads", m, n, k, threads)
	}
	if err := Load(); err != nil {
		return r, err
	}
	cblas.OpenblasSetNumThreads(threads)
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		return v
	}
	a, b := fill(m*k), fill(n*k)
	if _, err := MatMul(a, b, m, n, k); err != nil { // warm-up: OpenBLAS starts its threads
		return r, err
	}
	var total time.Duration
	best := time.Duration(1<<63 - 1)
	for r.Reps < 2 || total < minDuration {
		t0 := time.Now()
		if _, err := MatMul(a, b, m, n, k); err != nil {
			return r, err
		}
		d := time.Since(t0)
		total += d
		best = min(best, d)
		r.Reps++
	}
	flops := 2 * float64(m) * float64(n) * float64(k)
	r.GFLOPS = flops / (total.Seconds() / float64(r.Reps)) / 1e9
	r.Best = flops / best.Seconds() / 1e9
	return r, nil
}
