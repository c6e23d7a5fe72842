package ggml

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/membw"
)

// BenchmarkMulMatKQuant times toy's k-quant kernel against ggml's MulMat of the same q4_K or
// q6_K weights on the llama3.2-1b shape's matrices, layers of them together so that the
// weights (75 MiB) do not fit in the L3 cache, as in a decoding step: 1 column (generation,
// reported as the weights' GB/s) and 128 (a prompt, reported as GMAC/s).
// -cpu sets the threads.
func BenchmarkMulMatKQuant(b *testing.B) {
	const layers, k, n = 8, 2048, 8192
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []Type{Q4_K, Q6_K} {
		src := make([]float32, k*n)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		raw, err := Quantize(typ, src, k)
		require.NoError(b, err)
		wctx, err := NewContext(ContextOptions{MaxTensors: layers})
		require.NoError(b, err)
		ws := make([]*Tensor, layers)
		for i := range ws {
			ws[i] = wctx.NewTensor(typ, k, n)
		}
		wbuf, err := be.Alloc(wctx)
		require.NoError(b, err)
		for _, w := range ws {
			require.NoError(b, w.SetBytes(raw))
		}
		set, err := RepackKQuants(be, ws, nil)
		require.NoError(b, err)
		rws := make([]*KQuantWeights, layers)
		for i, w := range ws {
			rws[i] = set.Weights(w)
		}
		for _, m := range []int{1, 2, 4, 128} {
			for _, kernel := range []string{"ggml", "toy"} {
				b.Run(fmt.Sprintf("%s/%s/%dx%dx%d", kernel, TypeName(typ), n, m, k), func(b *testing.B) {
					ctx, err := NewContext(ContextOptions{MaxTensors: 4 * layers, Graphs: 1, GraphSize: 64})
					require.NoError(b, err)
					defer ctx.Close()
					x := ctx.NewTensor(F32, k, int64(m))
					outs := make([]*Tensor, layers)
					for i := range outs {
						if kernel == "toy" {
							outs[i] = ctx.MulMatKQuant(rws[i], x)
						} else {
							outs[i] = ctx.MulMat(ws[i], x)
						}
					}
					g, err := ctx.NewGraph(64, false)
					require.NoError(b, err)
					for _, o := range outs {
						require.NoError(b, g.Expand(o))
					}
					a, err := be.NewAllocator()
					require.NoError(b, err)
					defer a.Close()
					require.NoError(b, a.Alloc(g))
					xs := make([]float32, k*m)
					for i := range xs {
						xs[i] = float32(rng.NormFloat64())
					}
					require.NoError(b, x.SetF32(xs))
					require.NoError(b, be.Compute(g))
					cpu0 := processCPUSeconds()
					for b.Loop() {
						require.NoError(b, be.Compute(g))
					}
					// On a shared machine the wall clock counts the time other processes
					// held the cores: the process's CPU time per thread is the kernel's own.
					sec := (processCPUSeconds() - cpu0) / float64(be.Threads()) / float64(b.N)
					b.ReportMetric(float64(layers*len(raw))/sec/1e9, "cpuGB/s")
					b.ReportMetric(float64(layers)*float64(k*n*m)/sec/1e9, "cpuGMAC/s")
				})
			}
		}
		set.Close()
		wbuf.Close()
		wctx.Close()
	}
}

// processCPUSeconds is the processor time (user and system) the process has used.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkMulMatStep's -step.cache and -step.cols.
var (
	stepInCache = flag.Bool("step.cache", false, "BenchmarkMulMatStep: matrices the L3 cache holds")
	stepCols    = flag.Int("step.cols", 1, "BenchmarkMulMatStep: columns (sequences of a batched step)")
)

// BenchmarkMulMatStep times the product a generation step runs for each weight type a
// llama3.2-1b file holds (toy's kernel for the type: MulMatCols for q8_0, MulMatQ32 for q4_0
// and q5_1 read in place, "q4_0-inplace" and "q5_1-inplace", MulMatKQuant for q4_K, q6_K, q4_0
// and q5_1) against one column, over layers of 2048×8192 matrices in huge pages, as a decoding
// step streams them: as many layers as make at least the buffer internal/membw streams (8× the
// last-level cache) of each type, since a smaller set is partly served from it (on a 32 MiB
// L3, 8 layers of q4_K, 75 MB, streamed at 56 GB/s where 32 layers, 300 MB, streamed at 46 and
// the DRAM measure read 53–56; 2026-12-06). It reports the weights' GB/s by the wall clock
// (what the memory system gave) and by processor time (cpuGB/s: what the kernel would stream if
// the memory kept up; on a shared VM the processor time may not count what the host took, so
// compare wall-clock figures taken alternating, and against toy bench dram). -cpu sets the
// threads; -step.cache multiplies 4 matrices of 2048×2048 instead, which the L3 cache holds:
// the kernel's own rate, the memory's out of the way; -step.cols N multiplies N columns (a
// batched step's), and GB/s stays the weights' bytes a second.
func BenchmarkMulMatStep(b *testing.B) {
	const k = 2048
	layers, n := 8, 8192
	if *stepInCache {
		layers, n = 4, 2048
	}
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, k*n)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for _, c := range []struct {
		name    string
		typ     Type
		inplace bool
	}{{"q8_0", Q8_0, true}, {"q4_0-inplace", Q4_0, true}, {"q4_0", Q4_0, false}, {"q5_1-inplace", Q5_1, true}, {"q5_1", Q5_1, false}, {"q4_K", Q4_K, false}, {"q6_K", Q6_K, false}} {
		typ, inplace := c.typ, c.inplace
		b.Run(c.name, func(b *testing.B) {
			raw, err := Quantize(typ, src, k)
			require.NoError(b, err)
			layers := layers
			if !*stepInCache {
				layers = max(layers, int((membw.BufferBytes(membw.LastLevelCache(), 0)+int64(len(raw))-1)/int64(len(raw))))
			}
			wctx, err := NewContext(ContextOptions{MaxTensors: layers})
			require.NoError(b, err)
			defer wctx.Close()
			ws := make([]*Tensor, layers)
			for i := range ws {
				ws[i] = wctx.NewTensor(typ, k, int64(n))
			}
			wbuf, err := be.Alloc(wctx)
			require.NoError(b, err)
			defer wbuf.Close()
			wbuf.AdviseHugePages()
			for _, w := range ws {
				require.NoError(b, w.SetBytes(raw))
			}
			var set *KQuantSet
			if !inplace {
				set, err = RepackKQuants(be, ws, nil)
				require.NoError(b, err)
				defer set.Close()
			}
			ctx, err := NewContext(ContextOptions{MaxTensors: 4 * layers, Graphs: 1, GraphSize: 64})
			require.NoError(b, err)
			defer ctx.Close()
			x := ctx.NewTensor(F32, k, int64(*stepCols))
			g, err := ctx.NewGraph(64, false)
			require.NoError(b, err)
			for _, w := range ws {
				var y *Tensor
				switch {
				case set != nil:
					y = ctx.MulMatKQuant(set.Weights(w), x)
				case typ == Q8_0:
					y = ctx.MulMatCols(w, x)
				default:
					y = ctx.MulMatQ32(w, x)
				}
				require.NoError(b, g.Expand(y))
			}
			a, err := be.NewAllocator()
			require.NoError(b, err)
			defer a.Close()
			require.NoError(b, a.Alloc(g))
			xs := make([]float32, k**stepCols)
			for i := range xs {
				xs[i] = float32(rng.NormFloat64())
			}
			require.NoError(b, x.SetF32(xs))
			require.NoError(b, be.Compute(g))
			cpu0 := processCPUSeconds()
			for b.Loop() {
				require.NoError(b, be.Compute(g))
			}
			sec := (processCPUSeconds() - cpu0) / float64(be.Threads()) / float64(b.N)
			bytes := float64(layers * len(raw))
			b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(bytes/sec/1e9, "cpuGB/s")
		})
	}
}
