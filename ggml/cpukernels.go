package ggml

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/toyml/toy/generated/cpuops"
	"github.com/toyml/toy/generated/ggmlc"
)

// pinned is a pointer to a copy of v that C may keep until c closes: the user data of a custom
// operation, which ggml stores in the node.
func pinned[T float32 | [2]float32 | int32 | ropeParams | kquantParams](c *Context, v T) unsafe.Pointer {
	p := new(T)
	*p = v
	c.pins.Pin(p)
	return unsafe.Pointer(p)
}

// allThreads is ggml's GGML_N_TASKS_MAX: a custom operation runs on every thread of the backend.
const allThreads = -1

// kquantParams is mul_mat_kquant.c's struct toy_kquant_params.
type kquantParams struct {
	Magic int32
	Type  int32
	K, N  int64
}

// ContCPU is Cont of an f32 tensor, computed by toy's own CPU kernel (kernels/cpu/c, bound in
// generated/cpuops) as a ggml custom operation: it copies by tiles of 16×16, several times
// faster than ggml's copy on a transpose, and gives the same values. Only the CPU backend
// computes it (Compute refuses it on another), and autodiff cannot differentiate it: use it in
// graphs for the CPU, in a hand-built backward pass.
func (c *Context) ContCPU(a *Tensor) *Tensor {
	return c.op("ContCPU", []*Tensor{a}, 1, func() error { return needType(a, F32, "operand") }, func() ggmlc.Tensor {
		return ggmlc.MapCustom1(c.c, a.t, cpuops.ContF32Address(), allThreads, nil)
	})
}

// MulMatColsMax is the most columns MulMatCols takes: up to there it is faster than ggml's
// kernels on the SmolLM2-135M shapes (BenchmarkMulMatCols; 64 columns of the head in 13.6 ms
// against 16.8).
const MulMatColsMax = 64

// CPUKernelsFast reports whether toy's own CPU kernels (MulMatCols, AttendOne, MulMatPacked,
// SoftMaxCPU) are vectorized in this build (AVX-512, or AVX2 with F16C and FMA). Elsewhere
// MulMatCols is a plain loop, slower than MulMat, and the others cannot run: their callers keep
// ggml's kernels.
func CPUKernelsFast() bool { return cpuops.Vectorized() == 1 }

// CPUKernelsISA names the vector unit toy's own CPU kernels were compiled for in this build:
// "avx512", "avx2" (with F16C and FMA) or "scalar". The kernel table's cpu target of the build
// says which it must be (kernelrt.CheckCPUBuild).
func CPUKernelsISA() string {
	switch cpuops.ISA() {
	case 512:
		return "avx512"
	case 256:
		return "avx2"
	}
	return "scalar"
}

// MulMatCols is MulMat(w, x) for a few columns, computed by toy's own CPU kernel
// (kernels/cpu/c) as a ggml custom operation: w and x as MulMatColsFits takes them; the result
// is f32 [n, m]. It reads each weight row once for up to 8 columns (a pass per 8 more, over
// rows still in the core's cache), where ggml's kernels for more than one column cost 2–3× one
// column's (docs/PERFORMANCE.md, "toy's own CPU kernels"),
// and sums each (row, column) product in the same order whatever m is, so a column's result
// does not depend on the others. The columns stay f32 (ggml rounds them to f16, bf16 or q8_0
// for such weights). Only the CPU backend computes it, and autodiff cannot differentiate it.
func (c *Context) MulMatCols(w, x *Tensor) *Tensor {
	return c.op("MulMatCols", []*Tensor{w, x}, 1, func() error { return MulMatColsFits(w, x) }, func() ggmlc.Tensor {
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, w.Ne()[1], x.Ne()[1], 1, 1, []ggmlc.Tensor{w.t, x.t}, 2,
			cpuops.MulMatColsAddress(), allThreads, nil)
	})
}

// MulMatColsFits says why MulMatCols cannot take w and x, or nil when it can: w f16, bf16, f32,
// q8_0 or q5_0 [k, n], x f32 [k, m] with m ≤ MulMatColsMax, both 2-D with contiguous rows.
func MulMatColsFits(w, x *Tensor) error {
	switch w.Type() {
	case F16, BF16, F32, Q8_0, Q5_0:
	default:
		return fmt.Errorf("weights %s: want f16, bf16, f32, q8_0 or q5_0", w.describe())
	}
	if err := needType(x, F32, "columns"); err != nil {
		return err
	}
	wn, xn := w.Ne(), x.Ne()
	if wn[2] != 1 || wn[3] != 1 || xn[2] != 1 || xn[3] != 1 {
		return fmt.Errorf("%s and %s: want 2-D operands", w.describe(), x.describe())
	}
	if wn[0] != xn[0] {
		return fmt.Errorf("%s and %s differ in row length", w.describe(), x.describe())
	}
	if xn[1] > MulMatColsMax {
		return fmt.Errorf("%s: %d columns, at most %d", x.describe(), xn[1], MulMatColsMax)
	}
	if w.Nb()[0] != TypeSize(w.Type()) || x.Nb()[0] != 4 {
		return fmt.Errorf("%s and %s: want rows with contiguous elements", w.describe(), x.describe())
	}
	return nil
}

// CPUKernelsQ32 reports whether toy's 8-bit integer products (MulMatQ32) are vectorized in this
// build: its kernels compiled with AVX-512 VNNI. Elsewhere MulMatQ32 refuses its operands and
// the callers keep ggml's kernels.
func CPUKernelsQ32() bool { return cpuops.VectorizedQ32() == 1 }

// MulMatQ32 is MulMat(w, x) over weights of a block type of 32 values (q8_0, q4_0, q5_0,
// q5_1), computed by toy's own CPU kernels (kernels/cpu/c/mul_mat_q32.c) as two ggml custom
// operations: x's columns rounded to 8-bit integers, a scale for each 32 values (as ggml rounds
// them to q8_0 for these weights, but with an f32 scale), then a packed GEMM that multiplies 64
// rows of w at a time by the columns in 8-bit integers with AVX-512 VNNI and sums each block's
// products, scaled, in f32. w and x as MulMatQ32Fits takes them; the result is f32 [n, m]. Only
// the CPU backend computes it, and autodiff cannot differentiate it.
func (c *Context) MulMatQ32(w, x *Tensor) *Tensor {
	return c.op("MulMatQ32", []*Tensor{w, x}, 2, func() error { return MulMatQ32Fits(w, x) }, func() ggmlc.Tensor {
		k, m := x.Ne()[0], x.Ne()[1]
		xq := ggmlc.Custom4D(c.c, ggmlc.TypeI8, k+k/4, m, 1, 1, []ggmlc.Tensor{x.t}, 1, cpuops.QuantizeQ32Address(), allThreads, nil)
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, w.Ne()[1], m, 1, 1, []ggmlc.Tensor{w.t, xq}, 2, cpuops.MulMatQ32Address(),
			allThreads, nil)
	})
}

// MulMatQ32Fits says why MulMatQ32 cannot take w and x, or nil when it can: a build whose
// kernels have AVX-512 VNNI, w q8_0, q4_0, q5_0 or q5_1 [k, n] with contiguous rows, x f32
// [k, m] with contiguous rows, both 2-D.
func MulMatQ32Fits(w, x *Tensor) error {
	if !CPUKernelsQ32() {
		return fmt.Errorf("toy's product over %s needs AVX-512 VNNI, which this build's kernels were not compiled for", w.describe())
	}
	switch w.Type() {
	case Q8_0, Q4_0, Q5_0, Q5_1:
	default:
		return fmt.Errorf("weights %s: want q8_0, q4_0, q5_0 or q5_1", w.describe())
	}
	if err := needType(x, F32, "columns"); err != nil {
		return err
	}
	wn, xn := w.Ne(), x.Ne()
	switch {
	case wn[2] != 1 || wn[3] != 1 || xn[2] != 1 || xn[3] != 1:
		return fmt.Errorf("%s and %s: want 2-D operands", w.describe(), x.describe())
	case wn[0] != xn[0]:
		return fmt.Errorf("%s and %s differ in row length", w.describe(), x.describe())
	case w.Nb()[0] != TypeSize(w.Type()) || w.Nb()[1] < int(wn[0]/int64(BlockSize(w.Type())))*TypeSize(w.Type()):
		return fmt.Errorf("%s: want rows of whole blocks, side by side", w.describe())
	case x.Nb()[0] != 4:
		return fmt.Errorf("%s: want rows with contiguous elements", x.describe())
	}
	return nil
}

// StoreTransposed writes the values v, f32 [C, n] with contiguous rows, of n tokens into cache,
// an f16 or f32 value cache stored transposed ([cells, C], the layout ggml's unfused attention
// reads), at the i32 cells [n]: element c of token t to row c, column cells[t], rounded as
// SetRows rounds it. It returns cache, as SetRows does, for the graph to read through the write.
// Computed by toy's own CPU kernel (kernels/cpu/c/store.c) in place, where SetRows over
// one-element rows waits for each element's cache line in turn. The cells must be distinct and
// below the cache's: the kernel does not check them. Only the CPU backend computes it, and
// autodiff cannot differentiate it.
func (c *Context) StoreTransposed(cache, v, cells *Tensor) *Tensor {
	return c.op("StoreTransposed", []*Tensor{cache, v, cells}, 1, func() error { return StoreTransposedFits(cache, v, cells) }, func() ggmlc.Tensor {
		return ggmlc.CustomInplace(c.c, cache.t, []ggmlc.Tensor{v.t, cells.t}, 2, cpuops.StoreTransposedAddress(), allThreads, nil)
	})
}

// StoreTransposedFits says why StoreTransposed cannot take cache, v and cells, or nil when it
// can: cache f16 or f32 [cells, C] with contiguous rows, v f32 [C, n] with contiguous rows,
// cells i32 [n].
func StoreTransposedFits(cache, v, cells *Tensor) error {
	if cache.Type() != F16 && cache.Type() != F32 {
		return fmt.Errorf("cache %s: want f16 or f32", cache.describe())
	}
	if err := needType(v, F32, "values"); err != nil {
		return err
	}
	if err := needType(cells, I32, "cells"); err != nil {
		return err
	}
	cn, vn, in := cache.Ne(), v.Ne(), cells.Ne()
	switch {
	case cn[2] != 1 || cn[3] != 1 || cache.Nb()[0] != TypeSize(cache.Type()):
		return fmt.Errorf("cache %s: want [cells, C] with contiguous rows", cache.describe())
	case vn[0] != cn[1] || vn[2] != 1 || vn[3] != 1 || v.Nb()[0] != 4:
		return fmt.Errorf("values %s: want [%d, n] with contiguous rows", v.describe(), cn[1])
	case in[0] != vn[1] || in[1] != 1 || in[2] != 1 || in[3] != 1 || !cells.IsContiguous():
		return fmt.Errorf("cells %s: want [%d]", cells.describe(), vn[1])
	case vn[1] > cn[0]:
		return fmt.Errorf("%d values for a cache of %d cells", vn[1], cn[0])
	}
	return nil
}

// AttendOne is the attention of one query per sequence over a key/value cache (a generation
// step), computed by toy's own CPU kernel (kernels/cpu/c/attend.c) as a ggml custom operation:
// q f32 [hdk, H, S] with contiguous rows (the queries of S sequences), k [hdk, kvLen, Hkv, S]
// and v [kvLen, hdv, Hkv, S], both f16 or both q8_0 (views of the key cache with contiguous
// elements, and of the value cache: transposed, a channel's cells side by side, or a cell's
// channels side by side, as flash attention stores them; q8_0 only the latter, head sizes
// multiples of 32), mask f32 or f16 [kvLen, S] (added to the
// scaled scores: 0 or -inf). Query head h reads key/value head h / (H / Hkv). The result is f32
// [hdv, H, S]: softmax(scale·k·q + mask)·v per head, in f32 throughout, where ggml's unfused
// attention takes five operations (six with the queries' scale) and rounds the queries and the
// probabilities to f16. Only the CPU backend computes it, and autodiff cannot differentiate it.
//
// Over more than AttendBlockCells() cells it takes two nodes: the first attends each sequence a
// block of AttendBlockCells() cells at a time, each block a job of its own (one long sequence
// keeps every thread busy, and the query heads of a key/value head read its keys and values
// once), and the second joins the blocks' results. A sequence's output depends only on its own
// cells, not on kvLen or the other sequences: to the bit, it is what a step of that sequence
// alone gives.
func (c *Context) AttendOne(q, k, v, mask *Tensor, scale float32) *Tensor {
	return c.op("AttendOne", []*Tensor{q, k, v, mask}, 2, func() error { return AttendOneFits(q, k, v, mask, scale) }, func() ggmlc.Tensor {
		return c.attendOne(q, k, v, mask, pinned(c, scale), cpuops.AttendOneAddress(), cpuops.AttendBlocksAddress(), cpuops.AttendMergeAddress())
	})
}

// AttendOneSoftcap is AttendOne with the logits soft-capped as Gemma 2 caps them: the weights
// are softmax(cap·tanh(scale·q·k/cap) + mask), ggml's Scale, Tanh and Scale before its SoftMax in
// one operation (toy's kernels/cpu/c/gemma/attend.c, the gemma family's attention). A cap of 0
// caps nothing: AttendOne's arithmetic, to the bit.
func (c *Context) AttendOneSoftcap(q, k, v, mask *Tensor, scale, cap float32) *Tensor {
	return c.op("AttendOneSoftcap", []*Tensor{q, k, v, mask}, 2, func() error { return AttendOneSoftcapFits(q, k, v, mask, scale, cap) }, func() ggmlc.Tensor {
		return c.attendOne(q, k, v, mask, pinned(c, [2]float32{scale, cap}), cpuops.AttendOneSoftcapAddress(), cpuops.AttendBlocksSoftcapAddress(), cpuops.AttendMergeSoftcapAddress())
	})
}

// AttendOneSoftcapFits says why AttendOneSoftcap cannot take its operands, or nil when it can.
func AttendOneSoftcapFits(q, k, v, mask *Tensor, scale, cap float32) error {
	if math.IsNaN(float64(cap)) || math.IsInf(float64(cap), 0) || cap < 0 {
		return fmt.Errorf("soft-cap %g: want a finite cap ≥ 0", cap)
	}
	return AttendOneFits(q, k, v, mask, scale)
}

// attendOne builds the attention of one query per sequence with the kernels one, blocks and
// merge (a module's attend_one, attend_blocks and attend_merge) and their parameters params.
func (c *Context) attendOne(q, k, v, mask *Tensor, params unsafe.Pointer, one, blocks, merge unsafe.Pointer) ggmlc.Tensor {
	srcs := []ggmlc.Tensor{q.t, k.t, v.t, mask.t}
	hdv, H, S, kvLen := v.Ne()[1], q.Ne()[1], q.Ne()[2], k.Ne()[1]
	block := AttendBlockCells()
	if kvLen <= block {
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, hdv, H, S, 1, srcs, 4, one, allThreads, params)
	}
	n := (kvLen + block - 1) / block
	parts := ggmlc.Custom4D(c.c, ggmlc.TypeF32, hdv+2, H, S, n, srcs, 4, blocks, allThreads, params)
	return ggmlc.Custom4D(c.c, ggmlc.TypeF32, hdv, H, S, 1, []ggmlc.Tensor{parts, mask.t}, 2, merge, allThreads, nil)
}

// AttendBlockCells is the cells of a block of AttendOne's attention over a long cache: the
// kernel's constant, which the number of blocks the Go side allocates must follow.
func AttendBlockCells() int64 { return attendBlockCells }

var attendBlockCells = int64(cpuops.AttendBlock())

// AttendOneFits says why AttendOne cannot take q, k, v, mask and scale, or nil when it can.
func AttendOneFits(q, k, v, mask *Tensor, scale float32) error {
	if err := needType(q, F32, "queries"); err != nil {
		return err
	}
	if err := needFiniteScale(scale); err != nil {
		return err
	}
	q8 := k.Type() == Q8_0 && v.Type() == Q8_0
	if !q8 && (k.Type() != F16 || v.Type() != F16) {
		return fmt.Errorf("keys %s and values %s: want both f16 or both q8_0", k.describe(), v.describe())
	}
	if mask.Type() != F32 && mask.Type() != F16 {
		return fmt.Errorf("mask %s: want f32 or f16", mask.describe())
	}
	qn, kn, vn, mn := q.Ne(), k.Ne(), v.Ne(), mask.Ne()
	hdk, H, S, kvLen, Hkv, hdv := qn[0], qn[1], qn[2], kn[1], kn[2], vn[1]
	es := int(TypeSize(k.Type())) // a q8_0 block's bytes
	switch {
	case qn[3] != 1 || q.Nb()[0] != 4:
		return fmt.Errorf("queries %s: want [hdk, H, S] with contiguous rows", q.describe())
	case kn[0] != hdk || kn[3] != S || k.Nb()[0] != es:
		return fmt.Errorf("keys %s: want [%d, kvLen, Hkv, %d] with contiguous elements", k.describe(), hdk, S)
	case vn[0] != kvLen || vn[2] != Hkv || vn[3] != S:
		return fmt.Errorf("values %s: want [%d, hdv, %d, %d]", v.describe(), kvLen, Hkv, S)
	case q8 && v.Nb()[1] != es:
		return fmt.Errorf("values %s: a q8_0 cache wants a cell's values side by side", v.describe())
	case !q8 && v.Nb()[0] != es && v.Nb()[1] != es:
		return fmt.Errorf("values %s: want a cell's or a channel's values side by side", v.describe())
	case q8 && (hdk%int64(BlockSize(Q8_0)) != 0 || hdv%int64(BlockSize(Q8_0)) != 0):
		return fmt.Errorf("head sizes %d and %d: a q8_0 cache wants multiples of %d", hdk, hdv, BlockSize(Q8_0))
	case mn[0] != kvLen || mn[1] != S || mn[2] != 1 || mn[3] != 1 || mask.Nb()[0] != int(TypeSize(mask.Type())):
		return fmt.Errorf("mask %s: want [%d, %d] with contiguous elements", mask.describe(), kvLen, S)
	case Hkv < 1 || H%Hkv != 0:
		return fmt.Errorf("%d query heads over %d key/value heads: want a multiple", H, Hkv)
	case hdk%16 != 0 || hdv%16 != 0 || hdk > 256 || hdv > 256 || hdk < 16 || hdv < 16:
		return fmt.Errorf("head sizes %d and %d: want multiples of 16 up to 256", hdk, hdv)
	}
	return nil
}

// MulMatPacked is MulMat(a, b) computed by toy's packed GEMM (kernels/cpu/c/mul_mat_packed.c)
// as a ggml custom operation: a f32, f16, bf16 or q8_0 [K, M, G, S] and b f32 [K, N, G·r, S·r3]
// with contiguous rows (either may be a transposed view instead, Transpose of a matrix of one of
// those types, which saves the dense copy ggml's GEMM needs), b's head h of sequence s reading a's
// group h / r of sequence s / r3, as MulMat broadcasts; the result is f32 [M, N, G·r, S·r3]. It
// packs 64 rows of a by up to 8192 values of K at a time, transposed and in f32 (b is not
// rounded to a's type, as ggml's kernels round it), and keeps 64 rows by 6 columns of the result
// in its vectors: no horizontal sums, where ggml's tinyBLAS sums along K and then adds its
// vectors' lanes. 1.3–1.7× ggml's f32 GEMM on SmolLM2-135M's training products, 3–7× on
// attention's over a head's 64 values (BenchmarkMulMatPacked). A q8_0 matrix of 32 by 32
// values with both strides one block is refused: its strides read as rows and as a transposed
// view alike. Only the CPU backend computes it, and autodiff cannot differentiate it.
func (c *Context) MulMatPacked(a, b *Tensor) *Tensor { return c.MulMatPackedCausal(a, b, Dense) }

// Causality is what MulMatPackedCausal may assume of a product of causal attention, where a
// key after its query is masked: which values are exact zeros or unread, so that it skips them.
// The values it computes are those MulMatPacked computes, to the bit (each a sum in the same
// order, where a skipped term would add 0).
type Causality int32

const (
	// Dense assumes nothing: MulMatPacked.
	Dense Causality = iota
	// CausalScores: the result is each head's scores [keys M, queries N] (M = N) under a
	// causal mask, which hides a key after its query (m > n): those values are not to be read.
	// Where a whole tile of them is (most), they are not computed but set to 0.
	CausalScores
	// CausalProbs: b is each head's probabilities [keys K, queries N] (K = N), or their
	// gradient, zero for a key after its query (d > n): column n's sum stops at n.
	CausalProbs
	// CausalProbsT: a is probabilities or their gradient transposed by groups of r heads
	// [queries·r K, keys M] (K a multiple of M), zero for a query before its key
	// (d mod M < m): row m's sum starts at m in each of the r runs of M values.
	CausalProbsT
)

// MulMatPackedCausal is MulMatPacked for a product of causal attention: it skips the values
// mode says are zero or unread (Causality), about half the work of each head's product.
func (c *Context) MulMatPackedCausal(a, b *Tensor, mode Causality) *Tensor {
	return c.op("MulMatPacked", []*Tensor{a, b}, 1, func() error { return MulMatPackedCausalFits(a, b, mode) }, func() ggmlc.Tensor {
		var user unsafe.Pointer
		if mode != Dense {
			user = pinned(c, int32(mode))
		}
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, a.Ne()[1], b.Ne()[1], b.Ne()[2], b.Ne()[3], []ggmlc.Tensor{a.t, b.t}, 2,
			cpuops.MulMatPackedAddress(), allThreads, user)
	})
}

// MulMatPackedCausalFits says why MulMatPackedCausal cannot take a, b and mode, or nil when it
// can.
func MulMatPackedCausalFits(a, b *Tensor, mode Causality) error {
	if err := MulMatPackedFits(a, b); err != nil {
		return err
	}
	K, M, N := a.Ne()[0], a.Ne()[1], b.Ne()[1]
	switch mode {
	case Dense:
	case CausalScores:
		if M != N {
			return fmt.Errorf("causal scores of %d keys and %d queries: want as many of each", M, N)
		}
	case CausalProbs:
		if K != N {
			return fmt.Errorf("causal probabilities of %d keys and %d queries: want as many of each", K, N)
		}
	case CausalProbsT:
		if K%M != 0 {
			return fmt.Errorf("causal probabilities transposed, %d keys and %d queries: want a multiple", M, K)
		}
	default:
		return fmt.Errorf("unknown causality %d", mode)
	}
	return nil
}

// MulMatPackedFits says why MulMatPacked cannot take a and b, or nil when it can.
func MulMatPackedFits(a, b *Tensor) error {
	if err := needType(b, F32, "b"); err != nil {
		return err
	}
	if b.Nb()[0] != 4 && b.Nb()[1] != 4 {
		return fmt.Errorf("%s: want rows or columns with contiguous elements", b.describe())
	}
	return mulMatPackedFitsA(a, b.Ne(), b.describe())
}

// MulMatPackedFitsShape is MulMatPackedFits for a b not yet built: f32 of shape bn (up to 4
// dimensions) with contiguous rows.
func MulMatPackedFitsShape(a *Tensor, bn []int64) error {
	if len(bn) == 0 || len(bn) > 4 {
		return fmt.Errorf("b of %d dimensions", len(bn))
	}
	ne := [4]int64{1, 1, 1, 1}
	copy(ne[:], bn)
	return mulMatPackedFitsA(a, ne, fmt.Sprintf("b f32 %v", bn))
}

// mulMatPackedFitsA checks a against a b of shape bn, named b in errors.
func mulMatPackedFitsA(a *Tensor, bn [4]int64, b string) error {
	switch a.Type() {
	case F32, F16, BF16, Q8_0:
	default:
		return fmt.Errorf("a %s: want f32, f16, bf16 or q8_0", a.describe())
	}
	an := a.Ne()
	switch {
	case an[0] != bn[0]:
		return fmt.Errorf("%s and %s differ in the shared dimension", a.describe(), b)
	case an[3] < 1 || bn[3]%an[3] != 0:
		return fmt.Errorf("%s and %s: b's %d sequences are not a multiple of a's %d", a.describe(), b, bn[3], an[3])
	case an[2] < 1 || bn[2]%an[2] != 0:
		return fmt.Errorf("%s and %s: b's %d heads are not a multiple of a's %d groups", a.describe(), b, bn[2], an[2])
	case a.Type() == Q8_0:
		return packedQ8_0Layout(a)
	case a.Nb()[0] != int(TypeSize(a.Type())) && a.Nb()[1] != int(TypeSize(a.Type())):
		return fmt.Errorf("%s: want rows or columns with contiguous elements", a.describe())
	}
	return nil
}

// packedQ8_0Layout says why MulMatPacked cannot read the q8_0 matrix a, or nil when it can: as
// rows of whole blocks side by side, or as a transposed view whose matrix has rows of whole
// blocks. ggml's strides count q8_0 in blocks, so strides alone tell the two apart only where
// the rows do not overlap (mul_mat_packed.c's rows_contiguous); a 32×32 matrix with both
// strides one block fits both readings and is refused.
func packedQ8_0Layout(a *Tensor) error {
	ne, nb := a.Ne(), a.Nb()
	block, bytes := int64(BlockSize(Q8_0)), int(TypeSize(Q8_0))
	rows := nb[0] == bytes && ne[0]%block == 0 && nb[1] >= int(ne[0]/block)*bytes
	cols := nb[1] == bytes && ne[1]%block == 0 && nb[0] >= int(ne[1]/block)*bytes
	switch {
	case rows && cols:
		return fmt.Errorf("%s: a q8_0 matrix of one block each way reads as rows and as a transposed view alike", a.describe())
	case rows || cols:
		return nil
	case nb[0] != bytes && nb[1] == bytes:
		return fmt.Errorf("%s: a transposed q8_0 matrix of whole blocks, want rows a multiple of %d", a.describe(), block)
	}
	return fmt.Errorf("%s: want rows or columns of whole q8_0 blocks side by side", a.describe())
}

// SoftMaxCPU is SoftMaxExt(a, mask, scale, 0), softmax(scale·a + mask) of each row, computed by
// toy's own CPU kernel (kernels/cpu/c/soft_max.c) as a ggml custom operation: a f32 with
// contiguous rows, mask (or nil) f32 or f16 [a's row length, at least a's rows, …] broadcast over
// dims 2 and 3 as SoftMaxExt's. It makes two passes over each row in the core's cache and a
// third that divides, and skips the exponentials of whole vectors the mask hides (a causal
// mask's upper half), where ggml's kernel makes six passes, two of them scalar: 1.4 against
// 4.1–5.1 ms on training's [512, 512, 9] attention probabilities. A row the mask hides entirely becomes zeros
// (ggml's gives NaN). Only the CPU backend computes it, and autodiff cannot differentiate it.
func (c *Context) SoftMaxCPU(a, mask *Tensor, scale float32) *Tensor {
	inputs := []*Tensor{a}
	if mask != nil {
		inputs = append(inputs, mask)
	}
	return c.op("SoftMaxCPU", inputs, 1, func() error { return SoftMaxCPUFits(a, mask, scale) }, func() ggmlc.Tensor {
		ne := a.Ne()
		args := []ggmlc.Tensor{a.t}
		if mask != nil {
			args = append(args, mask.t)
		}
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, ne[0], ne[1], ne[2], ne[3], args, len(args),
			cpuops.SoftMaxAddress(), allThreads, pinned(c, scale))
	})
}

// SoftMaxCPUFits says why SoftMaxCPU cannot take a, mask and scale, or nil when it can.
func SoftMaxCPUFits(a, mask *Tensor, scale float32) error {
	if err := needF32Rows(a, "operand"); err != nil {
		return err
	}
	if err := needFiniteScale(scale); err != nil {
		return err
	}
	if mask == nil {
		return nil
	}
	an, mn := a.Ne(), mask.Ne()
	switch {
	case mask.Type() != F32 && mask.Type() != F16:
		return fmt.Errorf("mask %s: want f32 or f16", mask.describe())
	case mask.Nb()[0] != int(TypeSize(mask.Type())):
		return fmt.Errorf("mask %s: want rows with contiguous elements", mask.describe())
	case mn[0] != an[0] || mn[1] < an[1]:
		return fmt.Errorf("mask %s for %s: want rows of %d and at least %d of them", mask.describe(), a.describe(), an[0], an[1])
	case mn[2] < 1 || mn[3] < 1 || an[2]%mn[2] != 0 || an[3]%mn[3] != 0:
		return fmt.Errorf("mask %s cannot broadcast over %s", mask.describe(), a.describe())
	}
	return nil
}

// SwigluBackCPU is the backward of SwiGLU, h = silu(g)·u (SwigluSplit(g, u)), computed by toy's
// own CPU kernel (kernels/cpu/c/swiglu_back.c) as a ggml custom operation: from g, u and h's
// gradient dh, f32 [n, rows] with contiguous rows, it returns f32 [n, rows, 2], g's gradient
// dh·u·σ(g)·(1 + g·(1 − σ(g))) then u's, dh·silu(g), in one vectorized pass, where ggml's
// autodiff takes two products, a scalar SILU_BACK and a SILU. Only the CPU backend computes
// it.
func (c *Context) SwigluBackCPU(g, u, dh *Tensor) *Tensor {
	return c.op("SwigluBackCPU", []*Tensor{g, u, dh}, 1, func() error {
		for _, x := range []*Tensor{g, u, dh} {
			if err := needF32Rows(x, "operand"); err != nil {
				return err
			}
		}
		gn := g.Ne()
		if gn[2] != 1 || gn[3] != 1 || u.Ne() != gn || dh.Ne() != gn {
			return fmt.Errorf("%s, %s and %s: want three matrices of one shape", g.describe(), u.describe(), dh.describe())
		}
		return nil
	}, func() ggmlc.Tensor {
		ne := g.Ne()
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, ne[0], ne[1], 2, 1, []ggmlc.Tensor{g.t, u.t, dh.t}, 3,
			cpuops.SwigluBackAddress(), allThreads, nil)
	})
}

// RMSNormMulCPU is Mul(RMSNorm(x, eps), w), each row of x over the root of the mean of its
// squares plus eps, times the scale w, computed by toy's own CPU kernel
// (kernels/cpu/c/rms_norm.c) as one ggml custom operation: x f32 with contiguous rows, w f32
// [x's row length], contiguous. ggml's RMSNorm sums a row's squares one after the other in
// double (about 0.6 µs a row of 576 here) and the Mul is a node of its own; the kernel sums
// them eight at a time and scales and multiplies in one pass, with ggml's float operations, so
// the results are ggml's to the bit unless the other order of the double sums moves a mean
// across a float rounding. Only the CPU backend computes it, and autodiff cannot
// differentiate it.
func (c *Context) RMSNormMulCPU(x, w *Tensor, eps float32) *Tensor {
	return c.op("RMSNormMulCPU", []*Tensor{x, w}, 1, func() error { return RMSNormMulCPUFits(x, w, eps) }, func() ggmlc.Tensor {
		ne := x.Ne()
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, ne[0], ne[1], ne[2], ne[3], []ggmlc.Tensor{x.t, w.t}, 2,
			cpuops.RMSNormMulAddress(), allThreads, pinned(c, eps))
	})
}

// RMSNormMulCPUFits says why RMSNormMulCPU cannot take x, w and eps, or nil when it can.
func RMSNormMulCPUFits(x, w *Tensor, eps float32) error {
	if err := needF32Rows(x, "operand"); err != nil {
		return err
	}
	if err := needType(w, F32, "scale"); err != nil {
		return err
	}
	if wn := w.Ne(); wn[0] != x.Ne()[0] || wn[1] != 1 || wn[2] != 1 || wn[3] != 1 || !w.IsContiguous() {
		return fmt.Errorf("scale %s for %s: want %d contiguous values", w.describe(), x.describe(), x.Ne()[0])
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return fmt.Errorf("eps %g: want a finite number, at least 0", eps)
	}
	return nil
}

// RopeTableCPU is the table RopeApplyCPU rotates by: for each of the i32 positions pos [n], the
// cosine and sine of each pair of r's Dims dimensions side by side, f32 [Dims, n], computed by
// toy's own CPU kernel (kernels/cpu/c/rope.c) as ggml's ROPE computes them; freqFactors (f32,
// at least Dims/2) may be nil. One table serves every layer that rotates alike, where ggml's
// ROPE makes it again in each node, on each thread, for each token. r must pass RopeCPUFits.
func (c *Context) RopeTableCPU(pos, freqFactors *Tensor, r Rope) *Tensor {
	inputs := []*Tensor{pos}
	if freqFactors != nil {
		inputs = append(inputs, freqFactors)
	}
	return c.op("RopeTableCPU", inputs, 1, func() error { return RopeTableCPUFits(pos, freqFactors, r) }, func() ggmlc.Tensor {
		args := make([]ggmlc.Tensor, len(inputs))
		for i, t := range inputs {
			args[i] = t.t
		}
		p := ropeParams{Dims: int32(r.Dims), FreqBase: r.FreqBase, FreqScale: r.FreqScale, AttnFactor: r.AttnFactor}
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, int64(r.Dims), pos.Len(), 1, 1, args, len(args),
			cpuops.RopeTableAddress(), allThreads, pinned(c, p))
	})
}

// ropeParams is rope.c's struct rope_params.
type ropeParams struct {
	Dims                            int32
	FreqBase, FreqScale, AttnFactor float32
}

// RopeApplyCPU is RopeExt(x, pos, freqFactors, r) by the table of RopeTableCPU(pos, freqFactors,
// r): x f32 [headDim, heads, n] with contiguous rows, table f32 [r.Dims, n], the values past
// r.Dims copied. The results are ggml's ROPE's to the bit.
func (c *Context) RopeApplyCPU(x, table *Tensor, mode RopeMode) *Tensor {
	return c.op("RopeApplyCPU", []*Tensor{x, table}, 1, func() error { return RopeApplyCPUFits(x, table, mode) }, func() ggmlc.Tensor {
		ne := x.Ne()
		neox := int32(0)
		if mode == RopeNeox {
			neox = 1
		}
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, ne[0], ne[1], ne[2], 1, []ggmlc.Tensor{x.t, table.t}, 2,
			cpuops.RopeApplyAddress(), allThreads, pinned(c, neox))
	})
}

// RopeTableCPUFits says why RopeTableCPU cannot take pos, freqFactors and r, or nil when it can.
func RopeTableCPUFits(pos, freqFactors *Tensor, r Rope) error {
	if err := RopeCPUFits(r); err != nil {
		return err
	}
	switch {
	case pos.Type() != I32 || pos.Rows() != 1:
		return fmt.Errorf("positions %s: want an i32 vector", pos.describe())
	case freqFactors != nil && (freqFactors.Type() != F32 || freqFactors.Ne()[0] < int64(r.Dims/2) || !freqFactors.IsContiguous()):
		return fmt.Errorf("freq factors %s: want %d contiguous f32 values or more", freqFactors.describe(), r.Dims/2)
	}
	return nil
}

// RopeApplyCPUFits says why RopeApplyCPU cannot take x, table and mode, or nil when it can.
func RopeApplyCPUFits(x, table *Tensor, mode RopeMode) error {
	if err := needF32Rows(x, "operand"); err != nil {
		return err
	}
	xn, tn := x.Ne(), table.Ne()
	switch {
	case mode != RopeNormal && mode != RopeNeox:
		return fmt.Errorf("mode %d: want RopeNormal or RopeNeox", mode)
	case table.Type() != F32 || tn[2] != 1 || tn[3] != 1 || !table.IsContiguous():
		return fmt.Errorf("table %s: want a contiguous f32 [dims, n]", table.describe())
	case xn[3] != 1 || tn[1] != xn[2] || tn[0] <= 0 || tn[0]%2 != 0 || tn[0] > xn[0]:
		return fmt.Errorf("table %s for %s: want [even dims ≤ %d, %d]", table.describe(), x.describe(), xn[0], xn[2])
	}
	return nil
}

// RopeCPUFits says why toy's RoPE (RopeTableCPU, RopeApplyCPU) cannot rotate as r does, or nil
// when it can: adjacent or NeoX pairs, without YaRN's extrapolation.
func RopeCPUFits(r Rope) error {
	switch {
	case r.Mode != RopeNormal && r.Mode != RopeNeox:
		return fmt.Errorf("mode %d: want RopeNormal or RopeNeox", r.Mode)
	case r.Dims <= 0 || r.Dims%2 != 0:
		return fmt.Errorf("Dims %d: want a positive even number", r.Dims)
	case r.ExtFactor != 0:
		return fmt.Errorf("ExtFactor %g: YaRN's extrapolation is ggml's alone", r.ExtFactor)
	case !(r.FreqBase > 0) || math.IsInf(float64(r.FreqBase), 0) || !(r.FreqScale > 0) || math.IsInf(float64(r.FreqScale), 0) ||
		math.IsNaN(float64(r.AttnFactor)) || math.IsInf(float64(r.AttnFactor), 0):
		return fmt.Errorf("base %g, scale %g, attention factor %g: want finite, the first two positive", r.FreqBase, r.FreqScale, r.AttnFactor)
	}
	return nil
}
