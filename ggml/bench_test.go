package ggml

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/reference"
)

// The benchmarks behind docs/PERFORMANCE.md (`make bench`). ggml computes with GOMAXPROCS
// threads, so `-cpu 1,2` varies them. Sub-benchmarks are named type/m x n x k with an ASCII x
// (BenchmarkMulMat/q8_0/4096x512x14336) so that -bench patterns are easy to type.

// benchShapes are the m×n×k shapes of the performance targets: a small GEMM, llama.cpp's square
// 4096³, a 7B-class FFN down-projection over a 512-token batch, and a SmolLM2-class projection.
var benchShapes = [][3]int{{1024, 1024, 256}, {4096, 4096, 4096}, {4096, 512, 14336}, {576, 1536, 256}}

func BenchmarkMulMat(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	for _, typ := range []Type{F32, F16, Q8_0} {
		for _, s := range benchShapes {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("%s/%dx%dx%d", TypeName(typ), m, n, k), func(b *testing.B) {
				mm, err := newBenchMatMul(be, typ, m, n, k, 1)
				require.NoError(b, err)
				defer mm.Close()
				require.NoError(b, mm.compute()) // warm-up
				for b.Loop() {
					if err := mm.compute(); err != nil {
						b.Fatal(err)
					}
				}
				flops := 2 * float64(m) * float64(n) * float64(k)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMulMatPacked times toy's packed GEMM (MulMatPacked) against ggml's MulMat on the f32
// products of a SmolLM2-135M training step (m×n×k: result rows, columns, shared dimension):
// forward and input gradients of the attention and feed-forward weights, the weight gradients
// (k = 512 tokens), a key/value width, and the head's input gradient in chunks of 4096.
func BenchmarkMulMatPacked(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	for _, s := range [][3]int{{1536, 512, 576}, {576, 512, 1536}, {576, 1536, 512}, {576, 576, 512}, {192, 512, 576}, {512, 576, 4096}, {4096, 512, 576}} {
		for _, kernel := range []string{"ggml", "toy", "toy-f16", "toy-q8_0"} {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("%s/%dx%dx%d", kernel, m, n, k), func(b *testing.B) {
				product, typ := productGGML, F32
				switch kernel {
				case "toy":
					product = productPacked
				case "toy-f16": // f16 weights, converted as they are packed
					product, typ = productPacked, F16
				case "toy-q8_0": // q8_0 weights, dequantized as they are packed
					product, typ = productPacked, Q8_0
				}
				mm, err := newBenchProduct(be, typ, m, n, k, 1, product)
				require.NoError(b, err)
				defer mm.Close()
				require.NoError(b, mm.compute())
				for b.Loop() {
					if err := mm.compute(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// BenchmarkMulMatQ32 times toy's 8-bit integer product (MulMatQ32) against ggml's MulMat over
// q8_0, q4_0, q5_0 and q5_1 weights of SmolLM2-135M's shapes (rows × columns × shared
// dimension): a prompt's 128 columns and a step's one.
func BenchmarkMulMatQ32(b *testing.B) {
	if !CPUKernelsQ32() {
		b.Skip("MulMatQ32 needs AVX-512 VNNI in this build")
	}
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	for _, s := range [][3]int{{1536, 128, 576}, {576, 128, 1536}, {1536, 1, 576}, {576, 1, 1536}} {
		for _, typ := range []Type{Q8_0, Q4_0, Q5_0, Q5_1} {
			for _, kernel := range []string{"ggml", "toy"} {
				m, n, k := s[0], s[1], s[2]
				b.Run(fmt.Sprintf("%s/%s/%dx%dx%d", TypeName(typ), kernel, m, n, k), func(b *testing.B) {
					product := productGGML
					if kernel == "toy" {
						product = productQ32
					}
					mm, err := newBenchProduct(be, typ, m, n, k, 1, product)
					require.NoError(b, err)
					defer mm.Close()
					require.NoError(b, mm.compute())
					for b.Loop() {
						if err := mm.compute(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkMulMatPackedCausal times the products of one layer's causal attention in a
// SmolLM2-135M training step (512 positions, 9 query heads of 64 values on 3 key/value heads)
// with toy's packed GEMM, skipping what the causal mask makes zero (causal) or not (dense):
// the scores k·q, the probabilities' products v·p, and the gradients of v and k, whose first
// operand is the probabilities transposed by groups, read in place.
func BenchmarkMulMatPackedCausal(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	const T, hd, G, H = 512, 64, 3, 9
	for _, s := range []struct {
		name       string
		a, b       [3]int64
		transposeA bool
		mode       Causality
	}{{"scores", [3]int64{hd, T, G}, [3]int64{hd, T, H}, false, CausalScores},
		{"probs", [3]int64{T, hd, G}, [3]int64{T, T, H}, false, CausalProbs},
		{"probsT", [3]int64{T * H / G, T, G}, [3]int64{T * H / G, hd, G}, true, CausalProbsT}} {
		for _, mode := range []Causality{Dense, s.mode} {
			name := "dense"
			if mode != Dense {
				name = "causal"
			}
			b.Run(s.name+"/"+name, func(b *testing.B) {
				ctx, err := NewContext(ContextOptions{MaxTensors: 8, Graphs: 1, GraphSize: 8})
				require.NoError(b, err)
				defer ctx.Close()
				ane := s.a
				if s.transposeA {
					ane = [3]int64{s.a[1], s.a[0], s.a[2]}
				}
				a, bt := ctx.NewTensor(F32, ane[:]...), ctx.NewTensor(F32, s.b[:]...)
				av := a
				if s.transposeA {
					av = ctx.Transpose(a)
				}
				out := ctx.MulMatPackedCausal(av, bt, mode)
				benchGraph(b, be, ctx, 8, out, func() {
					for _, x := range []*Tensor{a, bt} {
						v := make([]float32, x.Len())
						for i := range v {
							v[i] = float32(math.Sin(float64(i)))
						}
						require.NoError(b, x.SetF32(v))
					}
				})
				ne := out.Ne()
				flops := 2 * float64(ne[0]*ne[1]*ne[2]) * float64(av.Ne()[0])
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "dense-GFLOP/s")
			})
		}
	}
}

// BenchmarkAttendOne times toy's attention of a generation step (AttendOne) of SmolLM2-135M's
// shape: 9 query heads of 64 values on 3 key/value heads, an f16 cache. One and eight sequences
// read 256 cells each; "mixed" is eight sequences of the lengths a server's slots hold at once,
// 48 to 1024 cells, in one step over 1024 (the mask hides each one's cells past its length).
func BenchmarkAttendOne(b *testing.B) {
	benchAttendOne(b, 1, []attendCase{
		{"streams=1", []int{256}, 256, 0},
		{"streams=8", []int{256, 256, 256, 256, 256, 256, 256, 256}, 256, 0},
		{"streams=8/mixed", []int{1024, 48, 700, 130, 900, 64, 300, 520}, 1024, 0},
	})
}

// BenchmarkAttendOneLayers times the attention of one generation step over long caches:
// AttendOne over SmolLM2-135M's 30 layers' caches, each layer's its own, so that a step reads
// them from memory as a decode step of a long context does: one sequence of 3,584 cells (82
// MB) in a context of 4,096, of 1,536 (35 MB), 1,000 or 256 in 2,048, the eight sequences of
// BenchmarkAttendOne's "mixed" (48 to 1,024 cells, 189 MB) in slots of 2,048, and eight of 40
// to 104 cells in slots of 1,024, as toy bench serve's requests leave them.
func BenchmarkAttendOneLayers(b *testing.B) {
	benchAttendOne(b, 30, []attendCase{
		{"streams=1", []int{3584}, 3584, 4096},
		{"streams=1/cells=1536", []int{1536}, 1536, 2048},
		{"streams=1/cells=1000", []int{1000}, 1024, 2048},
		{"streams=1/cells=256", []int{256}, 256, 2048},
		{"streams=8/mixed", []int{1024, 48, 700, 130, 900, 64, 300, 520}, 1024, 2048},
		{"streams=8/short", []int{40, 52, 64, 70, 76, 88, 96, 104}, 128, 1024},
	})
}

// attendCase is a step of BenchmarkAttendOne: its sequences' lengths in a cache of kvLen cells,
// each sequence's in a slot of slot cells (0: kvLen).
type attendCase struct {
	name    string
	lengths []int
	kvLen   int64
	slot    int64
}

// benchAttendOne times each case's AttendOne in the given number of layers, each with a key and
// value cache of its own (SmolLM2-135M's heads) laid out as the decoders lay them out (keys
// [hd, cells, heads], values transposed [cells, hd·heads], a sequence's cells a slot of every
// row), one graph for all.
func benchAttendOne(b *testing.B, layers int, cases []attendCase) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	const hd, H, Hkv = 64, 9, 3
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			S, kvLen, slot := int64(len(c.lengths)), c.kvLen, c.slot
			if slot == 0 {
				slot = kvLen
			}
			ctx, err := NewContext(ContextOptions{MaxTensors: 8 * layers, Graphs: 1, GraphSize: 8 * layers})
			require.NoError(b, err)
			defer ctx.Close()
			q := ctx.NewTensor(F32, hd, H, S)
			mask := ctx.NewTensor(F32, kvLen, S)
			var caches []*Tensor
			var out *Tensor
			es := int(TypeSize(F16))
			for range layers {
				kAll, vAll := ctx.NewTensor(F16, hd, slot*S, Hkv), ctx.NewTensor(F16, slot*S, hd*Hkv)
				caches = append(caches, kAll, vAll)
				k := ctx.View(kAll, []int64{hd, kvLen, Hkv, S}, []int{es * hd, es * hd * int(slot*S), es * hd * int(slot)}, 0)
				v := ctx.View(vAll, []int64{kvLen, hd, Hkv, S}, []int{es * int(slot*S), es * hd * int(slot*S), es * int(slot)}, 0)
				one := ctx.View(ctx.AttendOne(q, k, v, mask, 0.125), []int64{1}, nil, 0)
				if out == nil {
					out = one
				} else {
					out = ctx.Add(out, one)
				}
			}
			benchGraph(b, be, ctx, 8*layers, out, func() {
				vals := make([]float32, q.Len())
				for i := range vals {
					vals[i] = float32(math.Sin(float64(i))) / 4
				}
				require.NoError(b, q.SetF32(vals))
				m := make([]float32, mask.Len())
				for s, n := range c.lengths {
					for i := n; i < int(kvLen); i++ {
						m[s*int(kvLen)+i] = float32(math.Inf(-1))
					}
				}
				require.NoError(b, mask.SetF32(m))
				for _, x := range caches {
					bits := make([]uint16, x.Len())
					for i := range bits {
						bits[i] = reference.F32ToF16(float32(math.Cos(float64(i))) / 4)
					}
					require.NoError(b, x.SetF16(bits))
				}
			})
		})
	}
}

// benchGraph times the computation of out, built in ctx (a graph of at most nodes), on be: it
// allocates ctx's tensors, runs fill to upload the inputs, computes once to warm up, then once
// per iteration.
func benchGraph(b *testing.B, be *Backend, ctx *Context, nodes int, out *Tensor, fill func()) {
	require.NotNil(b, out, "%v", ctx.Err())
	g, err := ctx.NewGraph(nodes, false)
	require.NoError(b, err)
	require.NoError(b, g.Expand(out))
	buf, err := be.Alloc(ctx)
	require.NoError(b, err)
	defer buf.Close()
	fill()
	require.NoError(b, be.Compute(g))
	for b.Loop() {
		if err := be.Compute(g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMulMatCols times a product of a few columns, as a generation step of several
// sequences or a verification of proposals makes, by ggml's kernels and by toy's own
// (MulMatCols): f16, f32 and q8_0 weights, the SmolLM2-135M head (49152×576, 56 MB in f16:
// streamed from memory, as a decode step streams every weight) and a feed-forward matrix
// (1536×576, cache-resident here).
func BenchmarkMulMatCols(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	for _, typ := range []Type{F16, F32, Q8_0} {
		for _, m := range []int{49152, 1536} {
			for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
				for _, kernel := range []string{"ggml", "toy"} {
					benchProduct(b, be, kernel, typ, m, n)
				}
			}
		}
	}
}

// benchProduct times one product of BenchmarkMulMatCols.
func benchProduct(b *testing.B, be *Backend, kernel string, typ Type, m, n int) {
	b.Run(fmt.Sprintf("%s/%s/%dx%dx576", kernel, TypeName(typ), m, n), func(b *testing.B) {
		product := productGGML
		if kernel == "toy" {
			product = productCols
		}
		mm, err := newBenchProduct(be, typ, m, n, 576, 1, product)
		require.NoError(b, err)
		defer mm.Close()
		require.NoError(b, mm.compute()) // warm-up
		for b.Loop() {
			if err := mm.compute(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkThreadpool times small products (a SmolLM2-sized matrix-vector product and a
// 32-token projection, f16 weights) computed with the backend's persistent thread pool and,
// alternating with it, with ggml's per-compute workers (started and joined by every compute,
// as before the pool): `-cpu 2` shows what the pool saves per graph.
func BenchmarkThreadpool(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	for _, s := range [][3]int{{576, 1, 576}, {576, 32, 1536}} {
		mm, err := newBenchMatMul(be, F16, s[0], s[1], s[2], 1)
		require.NoError(b, err)
		for _, mode := range []string{"pool", "per-compute"} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", mode, s[0], s[1], s[2]), func(b *testing.B) {
				if mode == "per-compute" {
					ggmlc.BackendCPUSetThreadpool(be.b, ggmlc.Threadpool{})
					defer ggmlc.BackendCPUSetThreadpool(be.b, be.pool)
				}
				require.NoError(b, mm.compute()) // warm-up
				for b.Loop() {
					if err := mm.compute(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		mm.Close()
	}
}

// TestSetThreadsKeepsAPool: a CPU backend computes with a pool of its thread count, which
// SetThreads replaces, and the products stay right on either.
func TestSetThreadsKeepsAPool(t *testing.T) {
	// The pool's size is SetThreads' alone here: on a loaded machine adaptThreads would resize
	// it to the free cores (TestAdaptThreads covers that).
	AdaptThreads = false
	defer func() { AdaptThreads = true }()
	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	require.False(t, be.pool.IsNil())
	assert.Equal(t, 1, be.Threads())
	mm, err := newBenchMatMul(be, F32, 64, 3, 96, 7)
	require.NoError(t, err)
	defer mm.Close()
	require.NoError(t, mm.compute())
	one, err := mm.out.F32()
	require.NoError(t, err)
	n, _ := UsableThreads(2)
	pool := be.pool
	require.NoError(t, be.SetThreads(n))
	assert.Equal(t, n == 1, be.pool == pool, "a pool of another size replaces it")
	assert.Equal(t, n, be.Threads())
	require.NoError(t, mm.compute())
	more, err := mm.out.F32()
	require.NoError(t, err)
	assert.InDeltaSlice(t, one, more, 1e-4, "the same product on %d threads", n)
	require.NoError(t, be.Close())
	assert.True(t, be.pool.IsNil(), "Close frees the pool")
	assert.ErrorIs(t, be.SetThreads(1), ErrClosed)
}

// BenchmarkGraphBuild1000 is the binding overhead of building (not computing) a graph of 1,000
// nodes: ns/op is the time per graph.
func BenchmarkGraphBuild1000(b *testing.B) {
	for b.Loop() {
		if err := benchBuildGraph(1000); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMeasureMatMul checks that the benchmark graph computes A·B (against float64 in Go, from
// A's values as stored) and that MeasureMatMul reports a sane throughput.
func TestMeasureMatMul(t *testing.T) {
	be, err := NewCPUBackend(2)
	require.NoError(t, err)
	defer be.Close()

	// The first shape takes ggml's tinyBLAS (llamafile) path, the odd ones its generic
	// vec_dot path; n = 1 is a GEMV.
	for _, s := range [][3]int{{64, 48, 256}, {37, 5, 96}, {19, 1, 64}} {
		m, n, k := s[0], s[1], s[2]
		for _, typ := range []Type{F32, F16, Q8_0} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", TypeName(typ), m, n, k), func(t *testing.T) {
				mm, err := newBenchMatMul(be, typ, m, n, k, 7)
				require.NoError(t, err)
				defer mm.Close()
				require.NoError(t, mm.compute())

				raw, err := mm.a.ReadBytes()
				require.NoError(t, err)
				a := benchDequantize(t, typ, raw)
				bv, err := mm.b.F32()
				require.NoError(t, err)
				out, err := mm.out.F32()
				require.NoError(t, err)
				require.Equal(t, [4]int64{int64(m), int64(n), 1, 1}, mm.out.Ne())

				// ggml converts B to the weight's dot type (f16, q8_0) before the dot products;
				// allow for that rounding relative to Σ|a·b|.
				tol := map[Type]float64{F32: 1e-4, F16: 2e-3, Q8_0: 2e-2}[typ]
				for j := 0; j < n; j++ {
					for i := 0; i < m; i++ {
						var want, mag float64
						for l := 0; l < k; l++ {
							p := float64(a[i*k+l]) * float64(bv[j*k+l])
							want += p
							mag += math.Abs(p)
						}
						got := float64(out[j*m+i])
						if math.Abs(got-want) > tol*mag+1e-6 {
							t.Fatalf("out[%d,%d] = %g, want %g (Σ|a·b| = %g)", i, j, got, want, mag)
						}
					}
				}
			})
		}
	}

	r, err := MeasureMatMul(be, Q8_0, 128, 64, 256, 20*time.Millisecond)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.Reps, 2)
	require.Greater(t, r.GFLOPS(), 0.0)
	require.Equal(t, "128×64×256", r.Shape())
	require.Equal(t, be.Threads(), r.Threads)
	require.Equal(t, "CPU", r.Backend)
	require.LessOrEqual(t, r.Best, r.Seconds)
	require.GreaterOrEqual(t, r.BestGFLOPS(), r.GFLOPS())

	_, err = MeasureMatMul(be, Q8_0, 8, 8, 48, time.Millisecond)
	require.ErrorContains(t, err, "block size")
	_, err = MeasureMatMul(be, I32, 8, 8, 32, time.Millisecond)
	require.ErrorContains(t, err, "cannot make a weight")

	d, err := MeasureGraphBuild(100)
	require.NoError(t, err)
	require.Greater(t, d, time.Duration(0))
}

// benchDequantize turns the raw data of an f32, f16 or q8_0 tensor into float32.
func benchDequantize(t *testing.T, typ Type, raw []byte) []float32 {
	var out []float32
	switch typ {
	case F32:
		for i := 0; i < len(raw); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
		}
	case F16:
		for i := 0; i < len(raw); i += 2 {
			out = append(out, ggmlc.Fp16ToFp32(binary.LittleEndian.Uint16(raw[i:])))
		}
	case Q8_0: // blocks of an f16 scale and 32 int8 quants
		require.Equal(t, 34, TypeSize(Q8_0))
		for i := 0; i < len(raw); i += 34 {
			d := ggmlc.Fp16ToFp32(binary.LittleEndian.Uint16(raw[i:]))
			for _, q := range raw[i+2 : i+34] {
				out = append(out, d*float32(int8(q)))
			}
		}
	default:
		t.Fatalf("no dequantizer for %s", TypeName(typ))
	}
	return out
}

// BenchmarkMulMatColsLayers times the products of a generation step of SmolLM2-135M's 30 blocks
// (q, k, v, o, gate, up and down of each: 212 MB of f16 weights, streamed from memory as a
// decode step streams them, each product a node of one graph) against 1 and 8 columns, by
// ggml's kernels and by toy's own (MulMatCols). The ratio of 8 columns to 1 is what bounds a
// batched server's throughput over one stream's (issue 12).
func BenchmarkMulMatColsLayers(b *testing.B) {
	be, err := NewCPUBackend(runtime.GOMAXPROCS(0))
	require.NoError(b, err)
	defer be.Close()
	const layers, d, kv, ff = 30, 576, 192, 1536
	shapes := [][2]int64{{d, d}, {d, kv}, {d, kv}, {d, d}, {d, ff}, {d, ff}, {ff, d}} // [k, n] of each weight
	wctx, err := NewContext(ContextOptions{MaxTensors: layers * len(shapes)})
	require.NoError(b, err)
	defer wctx.Close()
	var weights []*Tensor
	for range layers {
		for _, s := range shapes {
			weights = append(weights, wctx.NewTensor(F16, s[0], s[1]))
		}
	}
	wbuf, err := be.Alloc(wctx)
	require.NoError(b, err)
	defer wbuf.Close()
	for i, w := range weights {
		bits := make([]uint16, w.Len())
		for j := range bits {
			bits[j] = reference.F32ToF16(float32(math.Sin(float64(i*7919+j))) / 8)
		}
		require.NoError(b, w.SetF16(bits))
	}
	for _, cols := range []int64{1, 8} {
		for _, kernel := range []string{"ggml", "toy"} {
			b.Run(fmt.Sprintf("%s/cols=%d", kernel, cols), func(b *testing.B) {
				ctx, err := NewContext(ContextOptions{MaxTensors: 2 + 3*len(weights), Graphs: 1, GraphSize: 4 * len(weights)})
				require.NoError(b, err)
				defer ctx.Close()
				xd, xf := ctx.NewTensor(F32, d, cols), ctx.NewTensor(F32, ff, cols)
				var out *Tensor
				for i, w := range weights {
					x := xd
					if shapes[i%len(shapes)][0] == ff {
						x = xf
					}
					var y *Tensor
					if kernel == "toy" {
						y = ctx.MulMatCols(w, x)
					} else {
						y = ctx.MulMat(w, x)
					}
					// Sum one value of each product into the output, so that every product is computed.
					one := ctx.View(y, []int64{1}, nil, 0)
					if out == nil {
						out = one
					} else {
						out = ctx.Add(out, one)
					}
				}
				g, err := ctx.NewGraph(4*len(weights), false)
				require.NoError(b, err)
				require.NoError(b, g.Expand(out))
				buf, err := be.Alloc(ctx)
				require.NoError(b, err)
				defer buf.Close()
				require.NoError(b, xd.SetF32(make([]float32, xd.Len())))
				require.NoError(b, xf.SetF32(make([]float32, xf.Len())))
				require.NoError(b, be.Compute(g))
				for b.Loop() {
					if err := be.Compute(g); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestMain warns when benchmarks run in a build whose CPU kernels are scalar: built without the
// Makefile's CGO flags, ggml's and toy's kernels have no SIMD, and their timings say nothing
// about the product's.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() != "" && !CPUKernelsFast() {
		fmt.Fprintln(os.Stderr, "warning: this test binary's CPU kernels are scalar (built without the Makefile's CGO_CFLAGS and CGO_CXXFLAGS): its timings are not the product's (docs/PERFORMANCE.md, Commands)")
	}
	os.Exit(m.Run())
}
