package ggml

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input must come back as an error naming the problem, never as a ggml abort (which
// would kill this test binary).

// buildErr builds one op in a fresh graph context and returns the context's error; the op
// must have returned the invalid (nil) tensor.
func buildErr(t *testing.T, build func(h *harness) *Tensor) error {
	t.Helper()
	h := newHarness(t)
	out := build(h)
	assert.Nil(t, out, "the op should have failed")
	return h.c.Err()
}

func TestOpErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(h *harness) *Tensor
		want  string
	}{
		{"MulMat k mismatch", func(h *harness) *Tensor {
			return h.c.MulMat(h.w.NewTensor(F32, 13, 7), h.w.NewTensor(F32, 12, 5))
		}, "cannot multiply"},
		{"MulMat transposed b", func(h *harness) *Tensor {
			return h.c.MulMat(h.w.NewTensor(F32, 5, 7), h.c.Transpose(h.w.NewTensor(F32, 6, 5)))
		}, "strided rows"},
		{"MulMat a, a transposed column", func(h *harness) *Tensor {
			// [1, 7] transposed is [7, 1] with both strides one element: its first stride looks
			// dense, but ggml's GEMM asserts a row stride of at least a row (lda >= k).
			return h.c.MulMat(h.c.Transpose(h.w.NewTensor(F32, 1, 7)), h.w.NewTensor(F32, 7, 5))
		}, "overlapping rows"},
		{"MulMat b, a transposed column", func(h *harness) *Tensor {
			return h.c.MulMat(h.w.NewTensor(F32, 7, 5), h.c.Transpose(h.w.NewTensor(F32, 1, 7)))
		}, "overlapping rows"},
		{"GetRowsBack widths differ", func(h *harness) *Tensor {
			return h.c.GetRowsBack(h.w.NewTensor(F32, 6, 5), h.w.NewTensor(I32, 5), h.w.NewTensor(F32, 7, 9))
		}, "do not fit"},
		{"OutProd f16 a", func(h *harness) *Tensor {
			return h.c.OutProd(h.w.NewTensor(F16, 7, 5), h.w.NewTensor(F32, 3, 5))
		}, "want f32 or a block-quantized type"},
		{"OutProd f16 b", func(h *harness) *Tensor {
			return h.c.OutProd(h.w.NewTensor(Q8_0, 32, 5), h.w.NewTensor(F16, 3, 5))
		}, ": want f32"},
		{"Add not broadcastable", func(h *harness) *Tensor {
			return h.c.Add(h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 3))
		}, "does not broadcast"},
		{"Add f32 + f16", func(h *harness) *Tensor {
			return h.c.Add(h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F16, 7, 5))
		}, "b must be f32 or of a's type"},
		{"Mul transposed a", func(h *harness) *Tensor {
			return h.c.Mul(h.c.Transpose(h.w.NewTensor(F32, 5, 7)), h.w.NewTensor(F32, 7, 5))
		}, "strided rows"},
		{"Scale of a permuted view", func(h *harness) *Tensor {
			return h.c.Scale(h.c.Permute(h.w.NewTensor(F32, 7, 5, 3), [4]int{0, 2, 1, 3}), 2)
		}, "strided beyond dimension 1"},
		{"Exp of a permuted view", func(h *harness) *Tensor {
			return h.c.Exp(h.c.Permute(h.w.NewTensor(F32, 7, 5, 3), [4]int{0, 2, 1, 3}))
		}, "permuted beyond its rows"},
		{"RMSNorm of a transposed view", func(h *harness) *Tensor {
			return h.c.RMSNorm(h.c.Transpose(h.w.NewTensor(F32, 7, 5)), 1e-5)
		}, "strided rows"},
		{"RMSNorm negative eps", func(h *harness) *Tensor {
			return h.c.RMSNorm(h.w.NewTensor(F32, 7, 5), -1e-5)
		}, "eps -1e-05"},
		{"Norm NaN eps", func(h *harness) *Tensor {
			return h.c.Norm(h.w.NewTensor(F32, 7, 5), float32(math.NaN()))
		}, "eps NaN"},
		{"GetRows f32 indices", func(h *harness) *Tensor {
			return h.c.GetRows(h.w.NewTensor(F32, 7, 9), h.w.NewTensor(F32, 5))
		}, "must be i32"},
		{"RopeExt odd Dims", func(h *harness) *Tensor {
			return h.c.RopeExt(h.w.NewTensor(F32, 10, 3, 5), h.w.NewTensor(I32, 5), nil, Rope{Dims: 5, FreqBase: 1e4, FreqScale: 1})
		}, "Dims 5"},
		{"RopeExt Dims past the head", func(h *harness) *Tensor {
			return h.c.RopeExt(h.w.NewTensor(F32, 10, 3, 5), h.w.NewTensor(I32, 5), nil, Rope{Dims: 12, FreqBase: 1e4, FreqScale: 1})
		}, "Dims 12"},
		{"RopeExt wrong position count", func(h *harness) *Tensor {
			return h.c.RopeExt(h.w.NewTensor(F32, 10, 3, 5), h.w.NewTensor(I32, 4), nil, Rope{Dims: 10, FreqBase: 1e4, FreqScale: 1})
		}, "4 positions"},
		{"SoftMaxExt short mask", func(h *harness) *Tensor {
			return h.c.SoftMaxExt(h.w.NewTensor(F32, 9, 5, 3), h.w.NewTensor(F32, 9, 4), 1, 0)
		}, "does not fit"},
		{"SoftMaxExt ALiBi without a mask", func(h *harness) *Tensor {
			return h.c.SoftMaxExt(h.w.NewTensor(F32, 9, 5, 3), nil, 1, 8)
		}, "needs a mask"},
		{"FlashAttnExt f32 mask", func(h *harness) *Tensor {
			return h.c.FlashAttnExt(h.w.NewTensor(F32, 8, 5, 4), h.w.NewTensor(F16, 8, 7, 2), h.w.NewTensor(F16, 8, 7, 2), h.w.NewTensor(F32, 7, 5), 1, 0, 0)
		}, "must be f16"},
		{"Reshape element count", func(h *harness) *Tensor {
			return h.c.Reshape(h.w.NewTensor(F32, 7, 5), 6, 6)
		}, "cannot reshape"},
		{"View past the end", func(h *harness) *Tensor {
			return h.c.View(h.w.NewTensor(F32, 7, 5), []int64{7, 2}, []int{28}, 4*7*4)
		}, "reaches byte"},
		{"Permute repeated axis", func(h *harness) *Tensor {
			return h.c.Permute(h.w.NewTensor(F32, 7, 5), [4]int{0, 1, 1, 3})
		}, "not a permutation"},
		{"CrossEntropyLoss shape mismatch", func(h *harness) *Tensor {
			return h.c.CrossEntropyLoss(h.w.NewTensor(F32, 11, 6), h.w.NewTensor(F32, 11, 5))
		}, "shapes differ"},
		{"Concat mismatch", func(h *harness) *Tensor {
			return h.c.Concat(h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 6, 4), 1)
		}, "differ in dimension 0"},
		{"OptStepAdamW non-param", func(h *harness) *Tensor {
			w := h.w.NewTensor(F32, 7, 5)
			return h.c.OptStepAdamW(w, h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7))
		}, "not marked as a param"},
		{"OptStepAdamW 6 params", func(h *harness) *Tensor {
			w := h.w.NewTensor(F32, 7, 5).SetParam()
			return h.c.OptStepAdamW(w, h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 6))
		}, "want 7 elements"},
		{"OptStepAdamW strided gradient", func(h *harness) *Tensor {
			w := h.w.NewTensor(F32, 7, 5).SetParam()
			g := h.c.Transpose(h.w.NewTensor(F32, 5, 7))
			return h.c.OptStepAdamW(w, g, h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7, 5), h.w.NewTensor(F32, 7))
		}, "not contiguous"},
		{"NewTensor no dimensions", func(h *harness) *Tensor { return h.c.NewTensor(F32) }, "1 to 4 dimensions, not 0"},
		{"NewTensor 5 dimensions", func(h *harness) *Tensor { return h.c.NewTensor(F32, 1, 2, 3, 4, 5) }, "1 to 4 dimensions, not 5"},
		{"NewTensor zero dimension", func(h *harness) *Tensor { return h.c.NewTensor(F32, 7, 0) }, "dimension 1 is 0"},
		{"NewTensor negative dimension", func(h *harness) *Tensor { return h.c.NewTensor(F32, -3) }, "dimension 0 is -3"},
		{"NewTensor q4_0 row of 33", func(h *harness) *Tensor { return h.c.NewTensor(Q4_0, 33, 2) }, "multiple of 32"},
		{"SetName too long", func(h *harness) *Tensor {
			return h.c.NewTensor(F32, 3).SetName(string(make([]byte, 64)))
		}, "64 bytes; at most 63 fit"},
		{"SetParam on a computed tensor", func(h *harness) *Tensor {
			return h.c.Sqr(h.w.NewTensor(F32, 3)).SetParam()
		}, "only leaves can be parameters"},
		{"SetLoss on a vector", func(h *harness) *Tensor { return h.c.NewTensor(F32, 3).SetLoss() }, "f32 scalar"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorContains(t, buildErr(t, tc.build), tc.want)
		})
	}
}

func TestStickyError(t *testing.T) {
	h := newHarness(t)
	a := h.w.NewTensor(F32, 7, 5)
	bad := h.c.MulMat(a, h.w.NewTensor(F32, 6, 5))
	require.Nil(t, bad)
	first := h.c.Err()
	require.ErrorContains(t, first, "MulMat")
	// Ops on the invalid tensor return it again; no later op replaces the first error.
	assert.Nil(t, h.c.Sqr(bad), "an op on the invalid tensor")
	assert.Nil(t, h.c.Add(a, h.c.Sqr(bad)), "an op on the invalid tensor")
	assert.Nil(t, h.c.Reshape(a, 1, 1), "a second bad op")
	assert.Equal(t, first, h.c.Err())
	assert.Nil(t, bad.SetName("x"))
	// Anything that builds or computes reports it.
	_, err := h.c.NewGraph(16, false)
	assert.Equal(t, first, err)
}

func TestTensorIOErrors(t *testing.T) {
	h := newHarness(t)
	x := h.w.NewTensor(F32, 7, 5)
	i := h.w.NewTensor(I32, 3)
	// Before its context is allocated a tensor has no memory.
	assert.ErrorContains(t, x.SetF32(make([]float32, 35)), "has no memory")
	_, err := x.F32()
	assert.ErrorContains(t, err, "has no memory")
	h.upload()
	assert.ErrorContains(t, x.SetF32(make([]float32, 34)), "34 values")
	assert.ErrorContains(t, x.SetI32(make([]int32, 35)), "is not i32")
	assert.ErrorContains(t, i.SetF32(make([]float32, 3)), "is not f32")
	assert.ErrorContains(t, x.SetF16(make([]uint16, 35)), "is not f16")
	assert.ErrorContains(t, x.SetBytes(make([]byte, 10)), "bytes")
	assert.NoError(t, x.SetF32(make([]float32, 35)))
	assert.NoError(t, i.SetI32([]int32{1, 2, 3}))
	// ReadF32 fills the caller's buffer, which must have the tensor's length.
	assert.ErrorContains(t, x.ReadF32(make([]float32, 36)), "room for 36 values")
	assert.ErrorContains(t, i.ReadF32(make([]float32, 3)), "is not f32")
	vals := make([]float32, 35)
	for k := range vals {
		vals[k] = float32(k) - 17.5
	}
	require.NoError(t, x.SetF32(vals))
	got := make([]float32, 35)
	require.NoError(t, x.ReadF32(got))
	assert.Equal(t, vals, got)
	// A transposed view gets memory when its graph is allocated, but it is not contiguous.
	v := h.c.Transpose(x)
	h.graph(false, h.c.Cont(v))
	h.compute(false)
	_, err = v.F32()
	assert.ErrorContains(t, err, "is not contiguous")
}

func TestContextFull(t *testing.T) {
	c, err := NewContext(ContextOptions{MaxTensors: 2})
	require.NoError(t, err)
	defer c.Close()
	var made int
	for k := 0; k < 5; k++ {
		if c.NewTensor(F32, 4) != nil {
			made++
		}
	}
	assert.GreaterOrEqual(t, made, 2)
	assert.Less(t, made, 5)
	assert.ErrorContains(t, c.Err(), "context is full")
}

func TestClosedContext(t *testing.T) {
	h := newHarness(t)
	old, err := NewContext(ContextOptions{MaxTensors: 4})
	require.NoError(t, err)
	x := old.NewTensor(F32, 7, 5)
	require.NoError(t, old.Close())
	assert.Nil(t, h.c.Sqr(x))
	assert.ErrorContains(t, h.c.Err(), "closed context")
	// The closed context itself refuses to build.
	assert.Nil(t, old.NewTensor(F32, 3))
	assert.ErrorIs(t, old.Err(), ErrClosed)
	assert.ErrorContains(t, x.SetF32(make([]float32, 35)), "use after Close")
}

func TestGraphErrors(t *testing.T) {
	t.Run("Expand past the graph size", func(t *testing.T) {
		h := newHarness(t)
		g, err := h.c.NewGraph(4, false)
		require.NoError(t, err)
		y := h.w.NewTensor(F32, 3)
		for k := 0; k < 5; k++ {
			y = h.c.Sqr(y)
		}
		assert.ErrorContains(t, g.Expand(y), "exceed the graph's size 4")
	})
	t.Run("Compute an unallocated graph", func(t *testing.T) {
		h := newHarness(t)
		x := h.in(h.rand(-1, 1, 7, 5))
		h.upload()
		g, err := h.c.NewGraph(16, false)
		require.NoError(t, err)
		require.NoError(t, g.Expand(h.c.Sqr(x)))
		assert.ErrorContains(t, h.be.Compute(g), "allocate the graph first")
	})
	t.Run("BuildBackward without grads", func(t *testing.T) {
		h := newHarness(t)
		loss := h.c.Sum(h.c.Sqr(h.w.NewTensor(F32, 3).SetParam())).SetLoss()
		g, err := h.c.NewGraph(64, false)
		require.NoError(t, err)
		require.NoError(t, g.Expand(loss))
		assert.ErrorContains(t, g.BuildBackward(nil), "made without gradients")
	})
	t.Run("BuildBackward without a loss", func(t *testing.T) {
		h := newHarness(t)
		g, err := h.c.NewGraph(64, true)
		require.NoError(t, err)
		require.NoError(t, g.Expand(h.c.Sum(h.c.Sqr(h.w.NewTensor(F32, 3).SetParam()))))
		assert.ErrorContains(t, g.BuildBackward(nil), "marked as the loss")
	})
	t.Run("BuildBackward without params", func(t *testing.T) {
		h := newHarness(t)
		g, err := h.c.NewGraph(64, true)
		require.NoError(t, err)
		require.NoError(t, g.Expand(h.c.Sum(h.c.Sqr(h.w.NewTensor(F32, 3))).SetLoss()))
		assert.ErrorContains(t, g.BuildBackward(nil), "marked as a param")
	})
	t.Run("BuildBackward with wrong accumulators", func(t *testing.T) {
		h := newHarness(t)
		g, err := h.c.NewGraph(64, true)
		require.NoError(t, err)
		require.NoError(t, g.Expand(h.c.Sum(h.c.Sqr(h.w.NewTensor(F32, 3).SetParam())).SetLoss()))
		assert.ErrorContains(t, g.BuildBackward(make([]*Tensor, 1)), "gradient accumulators")
	})
}

// TestBackwardRefused builds graphs on which ggml_build_backward_expand (or the backward
// kernels) would abort; BuildBackward must refuse each with an error naming the problem.
func TestBackwardRefused(t *testing.T) {
	cases := []struct {
		name string
		loss func(h *harness, x *Tensor) *Tensor // x is a param [6, 5, 3]
		want string
	}{
		{"Norm", func(h *harness, x *Tensor) *Tensor { return h.c.Norm(x, 1e-5) }, "NORM"},
		{"Gelu", func(h *harness, x *Tensor) *Tensor { return h.c.Gelu(x) }, "UNARY(GELU)"},
		{"GeluErf", func(h *harness, x *Tensor) *Tensor { return h.c.GeluErf(x) }, "GELU_ERF"},
		{"GeluQuick", func(h *harness, x *Tensor) *Tensor { return h.c.GeluQuick(x) }, "GELU_QUICK"},
		{"Tanh", func(h *harness, x *Tensor) *Tensor { return h.c.Tanh(x) }, "TANH"},
		{"Sigmoid", func(h *harness, x *Tensor) *Tensor { return h.c.Sigmoid(x) }, "SIGMOID"},
		{"GegluSplit", func(h *harness, x *Tensor) *Tensor { return h.c.GegluSplit(x, x) }, "GLU(GEGLU)"},
		{"Concat", func(h *harness, x *Tensor) *Tensor { return h.c.Concat(x, x, 1) }, "CONCAT"},
		{"OutProd", func(h *harness, x *Tensor) *Tensor { return h.c.OutProd(x, x) }, "OUT_PROD"},
		{"FlashAttnExt", func(h *harness, x *Tensor) *Tensor {
			kv := h.c.Cast(h.w.NewTensor(F32, 6, 4, 3), F16)
			return h.c.FlashAttnExt(x, kv, kv, nil, 1, 0, 0)
		}, "FLASH_ATTN_EXT"},
		{"Clamp (in place)", func(h *harness, x *Tensor) *Tensor { return h.c.Clamp(x, -1, 1) }, "in place"},
		{"Sub with b broadcast", func(h *harness, x *Tensor) *Tensor {
			return h.c.Sub(h.w.NewTensor(F32, 6, 5, 3), h.c.Reshape(h.c.SumRows(x), 1, 5, 3))
		}, "needs b of a's shape"},
		{"Div with b broadcast", func(h *harness, x *Tensor) *Tensor {
			return h.c.Div(h.w.NewTensor(F32, 6, 5, 3), h.c.View(x, []int64{6, 1, 3}, []int{24, 120}, 0))
		}, "needs b of a's shape"},
		{"Add1 scalar", func(h *harness, x *Tensor) *Tensor {
			return h.c.Add1(h.w.NewTensor(F32, 6, 5), h.c.Sum(x))
		}, "scalar operand"},
		{"MulMat broadcast over dim 3", func(h *harness, x *Tensor) *Tensor {
			return h.c.MulMat(h.c.Reshape(x, 6, 5, 3, 1), h.w.NewTensor(F32, 6, 2, 3, 2))
		}, "fold dimension 3 into 2"},
		{"MulMat by f16 into b", func(h *harness, x *Tensor) *Tensor {
			return h.c.MulMat(h.w.NewTensor(F16, 6, 4), x)
		}, "OUT_PROD cannot read"},
		{"SoftMaxExt ALiBi", func(h *harness, x *Tensor) *Tensor {
			return h.c.SoftMaxExt(x, h.w.NewTensor(F32, 6, 5), 1, 8)
		}, "maxBias 0"},
		{"SoftMaxExt mask param", func(h *harness, x *Tensor) *Tensor {
			return h.c.SoftMaxExt(h.w.NewTensor(F32, 6, 5, 3), x, 1, 0)
		}, "mask"},
		{"RopeExt freq factors param", func(h *harness, x *Tensor) *Tensor {
			ff := h.c.Reshape(h.c.SumRows(h.c.Reshape(x, 6, 15)), 15)
			return h.c.RopeExt(h.w.NewTensor(F32, 6, 5, 3), h.w.NewTensor(I32, 3), ff, Rope{Dims: 6, FreqBase: 1e4, FreqScale: 1})
		}, "freq factors"},
		{"CrossEntropyLoss labels param", func(h *harness, x *Tensor) *Tensor {
			return h.c.CrossEntropyLoss(h.w.NewTensor(F32, 6, 5, 3), x)
		}, "labels"},
		{"Mean with a second consumer", func(h *harness, x *Tensor) *Tensor {
			return h.c.Add(h.c.Repeat(h.c.Mean(x), x), x)
		}, "MEAN"},
		{"transposed gradient into Mul", func(h *harness, x *Tensor) *Tensor {
			return h.c.Cont(h.c.Transpose(h.c.Mul(x, x)))
		}, "MUL"},
		{"transposed gradient into Cont", func(h *harness, x *Tensor) *Tensor {
			return h.c.Cont(h.c.Transpose(h.c.Cont(x)))
		}, "CONT"},
		{"permuted gradient into Silu", func(h *harness, x *Tensor) *Tensor {
			return h.c.Cont(h.c.Permute(h.c.Silu(x), [4]int{0, 2, 1, 3}))
		}, "UNARY(SILU)"},
		{"permuted gradient into Scale", func(h *harness, x *Tensor) *Tensor {
			return h.c.Cont(h.c.Permute(h.c.Scale(x, 2), [4]int{0, 2, 1, 3}))
		}, "SCALE"},
		{"permuted gradient into SoftMax", func(h *harness, x *Tensor) *Tensor {
			return h.c.Cont(h.c.Permute(h.c.SoftMax(x), [4]int{0, 2, 1, 3}))
		}, "SOFT_MAX"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			x := h.w.NewTensor(F32, 6, 5, 3).SetParam()
			out := tc.loss(h, x)
			require.NotNil(t, out, "%v", h.c.Err())
			loss := h.c.Sum(out).SetLoss()
			g, err := h.c.NewGraph(1024, true)
			require.NoError(t, err)
			require.NoError(t, g.Expand(loss))
			err = g.BuildBackward(nil)
			assert.ErrorContains(t, err, "BuildBackward")
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("quantized param", func(t *testing.T) {
		h := newHarness(t)
		w := h.w.NewTensor(Q8_0, 32, 3).SetParam()
		loss := h.c.Sum(h.c.MulMat(w, h.w.NewTensor(F32, 32, 2))).SetLoss()
		g, err := h.c.NewGraph(64, true)
		require.NoError(t, err)
		require.NoError(t, g.Expand(loss))
		assert.ErrorContains(t, g.BuildBackward(nil), "gradients need f32 or f16")
	})
	t.Run("unused op without backward is fine", func(t *testing.T) {
		h := newHarness(t)
		x := h.w.NewTensor(F32, 6, 5).SetParam()
		loss := h.c.Sum(h.c.Sqr(x)).SetLoss()
		g, err := h.c.NewGraph(64, true)
		require.NoError(t, err)
		require.NoError(t, g.Expand(h.c.Norm(x, 1e-5))) // depends on x, but the loss does not use it
		require.NoError(t, g.Expand(loss))
		assert.NoError(t, g.BuildBackward(nil))
	})
}

// TestThreadsClamped checks that a CPU backend never computes with more threads than the
// process has cores: ggml's spinning threads would stall each other.
func TestThreadsClamped(t *testing.T) {
	cores := runtime.NumCPU()
	n, clamped := UsableThreads(cores + 1000)
	require.Equal(t, cores, n)
	require.True(t, clamped)
	n, clamped = UsableThreads(1)
	require.Equal(t, 1, n)
	require.False(t, clamped)
	n, clamped = UsableThreads(0)
	require.Equal(t, cores, n)
	require.False(t, clamped)

	be, err := NewCPUBackend(cores + 1000)
	require.NoError(t, err)
	defer be.Close()
	require.Equal(t, cores, be.Threads())
	require.NoError(t, be.SetThreads(4*cores))
	require.Equal(t, cores, be.Threads())
	require.NoError(t, be.SetThreads(1))
	require.Equal(t, 1, be.Threads())
}
