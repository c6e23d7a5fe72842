package ggml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/cpuops"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/reference"
)

// quantizeQ8K is x as ggml's q8_K holds it, per block of 256 values: the scale −max/127 of
// the value of largest magnitude (the first of equals), each value rounded to the nearest
// integer (iscale·x and the rounding one FMA, as ggml's nearest_int compiles), at most 127,
// times the scale. toy's k-quant kernel quantizes its
// columns so; the test's reference multiplies by these values.
func quantizeQ8K(x []float32) []float64 {
	out := make([]float64, len(x))
	for b := 0; b < len(x); b += 256 {
		var amax, mx float32
		for _, v := range x[b : b+256] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		d := 1 / iscale
		for i, v := range x[b : b+256] {
			// ggml's nearest_int as ggml is built: iscale·v + 1.5·2^23 in one FMA (the
			// float64 product of two float32 is exact), the integer in the low bits.
			f := float32(float64(iscale)*float64(v) + 12582912)
			q := int32(math.Float32bits(f)&0x7fffff) - 0x400000
			out[b+i] = float64(d) * float64(min(127, q))
		}
	}
	return out
}

// kquantWeights places raw k-quant data of shape [k, n] in a buffer of its own on h's
// backend and repacks it.
func kquantWeights(t *testing.T, h *harness, typ Type, raw []byte, k, n int) *KQuantWeights {
	ctx, err := NewContext(ContextOptions{MaxTensors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	w := ctx.NewTensor(typ, int64(k), int64(n))
	require.NotNil(t, w, "%v", ctx.Err())
	buf, err := h.be.Alloc(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { buf.Close() })
	require.NoError(t, w.SetBytes(raw))
	set, err := RepackKQuants(h.be, []*Tensor{w}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { set.Close() })
	return set.Weights(w)
}

// TestMulMatKQuant checks toy's k-quant kernel (repacked q4_K, q5_K, q6_K, q4_0, q5_0 and q5_1 weights) on random
// shapes with tails (rows not a multiple of the 16 it interleaves, 1 to 70 columns, across
// its generation and prompt paths; weights of a tenth the spread too, as small as a decoded
// model's, q6_K's super-block scales subnormal f16) and 1 to 3 threads, against three references: the float64
// product of the weights as ggml dequantizes them with the columns as q8_K holds them (for q4_0,
// q5_0 and q5_1 as toy_quantize_q32 rounds them, a scale every 32 values: the same numbers the kernel
// multiplies, float32 rounding only), ggml's own MulMat of the unrepacked weights (its integer
// kernels over the same q8_K columns; for q4_0, q5_0 and q5_1 over columns it rounds to q8_0 with an f16
// scale, so within the two roundings' error, as TestMulMatQ32 holds its own), and, loosely, the
// float64 product with the columns unrounded (within the bound of the columns' rounding). A column's result is the same, to the bit,
// whatever other columns share the call.
func TestMulMatKQuant(t *testing.T) {
	if !onCPU || !KQuantFast() {
		t.Skip("toy's k-quant kernel runs on a CPU build with AVX-512 VNNI only")
	}
	cols := []int{1, 2, 3, 5, 8, 9, 17, 64, 70}
	type shape struct {
		k, n, threads int
		spread        float64
	}
	shapes := []shape{{256, 1, 2, 1}, {256, 37, 2, 1}, {512, 16, 1, 1}, {768, 100, 3, 1}, {2048, 33, 2, 1}, {1024, 17, 2, 1}, {256, 128, 2, 0.1}}
	// q4_0's, q5_0's and q5_1's rows may end in a part of a super-block (SmolLM2's 576 values: 2¼).
	partial := []shape{{576, 40, 2, 1}, {160, 23, 1, 1}, {1568, 17, 3, 1}, {576, 64, 2, 0.1}}
	for _, typ := range []Type{Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q5_1} {
		typShapes := shapes
		blocks32 := typ == Q4_0 || typ == Q5_0 || typ == Q5_1
		if blocks32 {
			typShapes = append(slices.Clone(shapes), partial...)
		}
		for _, s := range typShapes {
			t.Run(fmt.Sprintf("%s/%dx%d/threads=%d/spread=%g", TypeName(typ), s.k, s.n, s.threads, s.spread), func(t *testing.T) {
				h := newHarness(t)
				if s.threads != testThreads {
					be, err := NewCPUBackend(s.threads)
					require.NoError(t, err)
					t.Cleanup(func() { be.Close() })
					h.be = be
				}
				a := h.rand(-s.spread, s.spread, s.k, s.n)
				raw, err := Quantize(typ, a.ToF32(), s.k)
				require.NoError(t, err)
				rw := kquantWeights(t, h, typ, raw, s.k, s.n)
				w := h.inBytes(typ, raw, int64(s.k), int64(s.n))
				deq := h.c.Cast(w, F32) // the weights as ggml dequantizes them
				maxM := cols[len(cols)-1]
				b := h.rand(-1, 1, s.k, maxM)
				// Blocks q8_K rounds in its own ways: all zeros, the largest magnitude twice
				// with both signs (the first decides the scale's sign), one value far above the
				// rest (which round to zero or one).
				for c := 0; c < maxM; c += 3 {
					blk := (c / 3) % max(1, s.k/256)
					at := c*s.k + blk*256
					switch c % 9 {
					case 0:
						clear(b.Data[at:min(at+256, (c+1)*s.k)])
					case 3:
						b.Data[at+5], b.Data[at+77] = -1, 1
					case 6:
						b.Data[at+100] = 300
					}
				}
				x := h.in(b)
				outs := []*Tensor{deq}
				for _, m := range cols {
					v := h.c.View(x, []int64{int64(s.k), int64(m)}, []int{s.k * 4}, 0)
					outs = append(outs, h.c.MulMatKQuant(rw, v))
				}
				ggmlOut := h.c.MulMat(w, x)
				h.run(append(outs, ggmlOut)...)
				wd := h.out(deq)
				xq, block := roundColumnsQ32(b), 32 // block: the values that share a scale in the rounded columns
				if !blocks32 {
					xq = reference.FromF32(b.ToF32(), s.k, maxM)
					xq.Data, block = quantizeQ8K(b.ToF32()), 256
				}
				want := reference.MulMat(wd, xq)
				full := h.out(outs[len(outs)-1])
				floor := math.Sqrt(float64(s.k))
				exactFloor := floor
				if typ == Q5_1 {
					// q5_1's weights carry each block's min, of one sign across a row, so a sum
					// adds terms of up to the largest results' size and cancels them: f32
					// rounding of that size.
					exactFloor = math.Max(floor, maxAbs(want.Data)/8)
				}
				near(t, "MulMatKQuant against the float64 product of what it multiplies", want, full, 2e-6, exactFloor)
				// ggml's own k-quant kernels stray further from those float64 sums where a block
				// of the columns holds an outlier (up to 2.4e-6 here, where toy's stay below 2e-7).
				if block == 32 {
					near(t, "MulMatKQuant against ggml's MulMat", h.out(ggmlOut), full, 3e-3, maxAbs(want.Data))
				} else {
					near(t, "MulMatKQuant against ggml's MulMat", h.out(ggmlOut), full, 1e-5, floor)
				}
				// Against the columns unrounded: the rounding moves each value by at most half
				// its block's step (the largest magnitude / 127), so element (r, c) by at most
				// the sum over blocks of half the step times the block's |weights|.
				exact := reference.MulMat(wd, b)
				for c := 0; c < maxM; c++ {
					for r := 0; r < s.n; r++ {
						bound := 1e-5 * floor
						for blk := 0; blk < s.k; blk += block {
							amax, wsum := 0.0, 0.0
							for i := blk; i < blk+block; i++ {
								amax = math.Max(amax, math.Abs(b.Data[c*s.k+i]))
								wsum += math.Abs(wd.Data[r*s.k+i])
							}
							bound += amax / 127 / 2 * wsum
						}
						got, want := full.Data[c*s.n+r], exact.Data[c*s.n+r]
						require.LessOrEqual(t, math.Abs(got-want), bound, "column %d row %d: %g, unrounded %g", c, r, got, want)
					}
				}
				for i, m := range cols {
					got := h.out(outs[1+i])
					for e := range got.Data {
						require.Equal(t, full.Data[e], got.Data[e], "%d columns: element %d differs from the %d-column product's", m, e, maxM)
					}
				}
			})
		}
	}
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t)
		raw, err := Quantize(Q4_K, h.rand(-1, 1, 256, 4).ToF32(), 256)
		require.NoError(t, err)
		rw := kquantWeights(t, h, Q4_K, raw, 256, 4)
		require.Nil(t, h.c.MulMatKQuant(rw, h.in(h.rand(-1, 1, 512, 2))))
		require.ErrorContains(t, h.c.Err(), "the weights' rows hold 256")
		ctx, err := NewContext(ContextOptions{MaxTensors: 1})
		require.NoError(t, err)
		defer ctx.Close()
		_, err = RepackKQuants(h.be, []*Tensor{ctx.NewTensor(Q8_0, 256, 4)}, nil)
		require.ErrorContains(t, err, "want q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1")
	})
}

// TestRepackRowsJobs checks that RepackKQuants' jobs of a few groups of 16 rows (the last
// group short) build the same copy, to the byte, as one call of the kernel's repack over the
// whole matrix (the layout TestMulMatKQuant checks against ggml), from the matrices' memory and
// from the file they are mapped from (MapOptions.FileBacked): read from the file, the originals
// never enter the process (smaps: the mapping's resident pages) and are released. The weights
// are random bytes: the repack moves bits, whatever they encode.
func TestRepackRowsJobs(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(5, 6))
	type matrix struct {
		typ  Type
		k, n int64
	}
	ms := []matrix{{Q4_K, 512, 1000}, {Q5_K, 256, 37}, {Q6_K, 768, 333}, {Q4_K, 256, 16}}
	var w gguffile.Writer
	raws := make([][]byte, len(ms))
	wants := make([][]byte, len(ms))
	for i, m := range ms {
		raw := make([]byte, m.k/256*int64(TypeSize(m.typ))*m.n)
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		raws[i] = raw
		wants[i] = make([]byte, cpuops.KquantBytes(int(m.typ), m.k, m.n))
		require.Zero(t, cpuops.KquantRepack(int(m.typ), unsafe.Pointer(&raw[0]), m.k, m.n, unsafe.Pointer(&wants[i][0])))
		require.NoError(t, w.AddTensor(fmt.Sprintf("blk.%d.ffn_up.weight", i), uint32(m.typ), []int64{m.k, m.n}, raw))
	}
	path := filepath.Join(t.TempDir(), "kq.gguf")
	require.NoError(t, w.WriteFile(path))
	f, err := OpenGGUF(path)
	require.NoError(t, err)
	defer f.Close()
	for _, fileBacked := range []bool{false, true} {
		opts := MapOptions{}
		if fileBacked {
			opts.FileBacked = func(GGUFTensor) bool { return true }
		}
		mapped, err := MapGGUF(f, h.be, opts)
		require.NoError(t, err)
		defer mapped.Close()
		ws := make([]*Tensor, len(ms))
		for i := range ms {
			ws[i] = mapped.Tensor(fmt.Sprintf("blk.%d.ffn_up.weight", i))
			assert.Equal(t, fileBacked, mapped.FileBacked(ws[i]))
		}
		for _, jobBytes := range []int64{1, 5000, 1 << 30} { // a group a job, a few, a matrix
			t.Run(fmt.Sprintf("fileBacked=%v/jobBytes=%d", fileBacked, jobBytes), func(t *testing.T) {
				sctx, err := NewContext(ContextOptions{MaxTensors: len(ms)})
				require.NoError(t, err)
				defer sctx.Close()
				byW := map[*Tensor]*KQuantWeights{}
				for i, w := range ws {
					byW[w] = &KQuantWeights{typ: ms[i].typ, k: ms[i].k, n: ms[i].n, t: sctx.NewTensor(I8, int64(len(wants[i])))}
				}
				sbuf, err := h.be.Alloc(sctx)
				require.NoError(t, err)
				defer sbuf.Close()
				require.NoError(t, repackRows(ws, byW, jobBytes, mapped))
				for i, w := range ws {
					got, err := byW[w].t.ReadBytes()
					require.NoError(t, err)
					assert.Equal(t, wants[i], got, "%s", w.describe())
				}
				if rss := mappingRss(t, path); fileBacked && rss >= 0 {
					assert.Less(t, rss, int64(len(raws[0])), "the originals read from the file, not through the mapping")
				}
			})
		}
		set, err := RepackKQuants(h.be, ws, mapped)
		require.NoError(t, err)
		for i, w := range ws {
			got, err := set.Weights(w).t.ReadBytes()
			require.NoError(t, err)
			assert.Equal(t, wants[i], got, "%s", w.describe())
			assert.Equal(t, fileBacked, mapped.Release(w), "%s: the caller releases a mapped original once copied", w.describe())
			orig, err := w.ReadBytes()
			require.NoError(t, err)
			assert.Equal(t, raws[i], orig, "%s: the original still reads", w.describe())
		}
		require.NoError(t, set.Close())
	}
}
