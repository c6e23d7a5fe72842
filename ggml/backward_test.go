package ggml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/reference"
)

// Backward tests: ggml's gradients (BuildBackward) against central differences of the
// float64 reference forward pass, which shares no code with ggml. Each op y = op(x...) gets
// the loss Σ y·R for a fixed random R (or is the loss itself, for CrossEntropyLoss).

// fdEps is the central-difference step. The reference is float64, so the difference quotient
// is accurate to ~1e-8 for smooth ops; inputs stay further than fdEps from kinks.
const fdEps = 1e-4

// gradTol bounds reference.RelErr between ggml's float32 gradient and the finite difference,
// with an absolute floor of gradFloor times the largest |gradient| of that param.
const gradTol, gradFloor = 1e-2, 1e-2

// gradCheck differentiates build(params) with ggml and fwd() with finite differences, for
// every x in xs (made params; fwd reads xs, which NumericGrad perturbs in place). With
// lossIsOut the built tensor is the loss itself; otherwise the loss is Sum(Mul(out, R)).
// It returns the largest error over all params.
func (h *harness) gradCheck(name string, xs []ref, build func(p []*Tensor) *Tensor, fwd func() ref, lossIsOut bool) float64 {
	h.t.Helper()
	params := make([]*Tensor, len(xs))
	for i, x := range xs {
		params[i] = h.param(x)
	}
	out := build(params)
	require.NotNil(h.t, out, "%v", h.c.Err())
	loss, lossRef := out, func() float64 { return fwd().Data[0] }
	if !lossIsOut {
		ne := out.Ne()
		r := h.rand(-1, 1, int(ne[0]), int(ne[1]), int(ne[2]), int(ne[3]))
		loss = h.c.Sum(h.c.Mul(out, h.in(r)))
		lossRef = func() float64 { return reference.Sum(reference.Mul(fwd(), r)) }
	}
	grads := h.backward(loss, params, BuildBackwardFixed)
	near(h.t, name+" loss", reference.FromData([]float64{lossRef()}, 1), h.out(loss), 1e-5, 1)
	worst := 0.0
	for i, x := range xs {
		fd := reference.FromData(reference.NumericGrad(func([]float64) float64 { return lossRef() }, x.Data, fdEps), x.Ne[:]...)
		worst = math.Max(worst, near(h.t, fmt.Sprintf("%s ∂/∂x%d", name, i), fd, grads[i], gradTol, gradFloor*maxAbs(fd.Data)+1e-6))
	}
	return worst
}

// How backward builds the backward pass: with Graph.BuildBackward, or with ggml's
// build_backward_expand alone (without the in-place fix).
const (
	BuildBackwardFixed = iota
	BuildBackwardRaw
)

// backward marks loss, builds the backward pass, computes it and returns the gradients of
// params.
func (h *harness) backward(loss *Tensor, params []*Tensor, how int) []ref {
	h.t.Helper()
	loss.SetLoss()
	h.graph(true, loss)
	if how == BuildBackwardRaw {
		ggmlc.BuildBackwardExpand(h.c.c, h.g.g, nil)
	} else {
		require.NoError(h.t, h.g.BuildBackward(nil))
	}
	grads := make([]*Tensor, len(params))
	for i, p := range params {
		g := h.g.Grad(p)
		require.NotNil(h.t, g, "no gradient for param %d", i)
		if !g.IsContiguous() { // a gradient passed on through a Transpose is a strided view
			g = h.c.Cont(g)
			require.NoError(h.t, h.g.Expand(g))
		}
		grads[i] = g.SetOutput()
	}
	h.compute(true)
	out := make([]ref, len(grads))
	for i, g := range grads {
		out[i] = h.out(g)
	}
	return out
}

func TestBackwardElementwise(t *testing.T) {
	ne := []int{7, 5, 3}
	cases := []struct {
		name   string
		inputs func(h *harness) []ref
		build  func(c *Context, p []*Tensor) *Tensor
		fwd    func(x []ref) ref
	}{
		{"Add broadcast", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...), h.rand(-1, 1, 7, 1, 3)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Add(p[0], p[1]) },
			func(x []ref) ref { return reference.Add(x[0], x[1]) }},
		{"Mul broadcast", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...), h.rand(-1, 1, 1, 5, 3)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Mul(p[0], p[1]) },
			func(x []ref) ref { return reference.Mul(x[0], x[1]) }},
		{"Mul broadcast rows", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...), h.rand(-1, 1, 7)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Mul(p[0], p[1]) },
			func(x []ref) ref { return reference.Mul(x[0], x[1]) }},
		{"Sub", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...), h.rand(-1, 1, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Sub(p[0], p[1]) },
			func(x []ref) ref { return reference.Sub(x[0], x[1]) }},
		{"Div", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...), h.randAway(0.5, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Div(p[0], p[1]) },
			func(x []ref) ref { return reference.Div(x[0], x[1]) }},
		{"Scale", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Scale(p[0], -1.3) },
			func(x []ref) ref { return reference.Scale(x[0], float64(float32(-1.3))) }},
		{"Sqr", func(h *harness) []ref { return []ref{h.rand(-2, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Sqr(p[0]) },
			func(x []ref) ref { return reference.Sqr(x[0]) }},
		{"Sqrt", func(h *harness) []ref { return []ref{h.rand(0.3, 3, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Sqrt(p[0]) },
			func(x []ref) ref { return reference.Sqrt(x[0]) }},
		{"Log", func(h *harness) []ref { return []ref{h.rand(0.3, 3, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Log(p[0]) },
			func(x []ref) ref { return reference.Log(x[0]) }},
		{"Exp", func(h *harness) []ref { return []ref{h.rand(-2, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Exp(p[0]) },
			func(x []ref) ref { return reference.Exp(x[0]) }},
		{"Softplus", func(h *harness) []ref { return []ref{h.rand(-4, 4, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Softplus(p[0]) },
			func(x []ref) ref { return reference.Softplus(x[0]) }},
		{"Silu", func(h *harness) []ref { return []ref{h.rand(-4, 4, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Silu(p[0]) },
			func(x []ref) ref { return reference.Silu(x[0]) }},
		{"Relu", func(h *harness) []ref { return []ref{h.randAway(0.05, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Relu(p[0]) },
			func(x []ref) ref { return reference.Relu(x[0]) }},
		{"GeluComposite", func(h *harness) []ref { return []ref{h.rand(-5, 5, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.GeluComposite(p[0]) },
			func(x []ref) ref { return reference.GeluTanh(x[0]) }},
		{"SwigluSplit", func(h *harness) []ref { return []ref{h.rand(-4, 4, ne...), h.rand(-2, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.SwigluSplit(p[0], p[1]) },
			func(x []ref) ref { return reference.SwigluSplit(x[0], x[1]) }},
		{"Sum", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.Sum(p[0]) },
			func(x []ref) ref { return reference.FromData([]float64{reference.Sum(x[0])}, 1) }},
		{"SumRows", func(h *harness) []ref { return []ref{h.rand(-1, 1, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.SumRows(p[0]) },
			func(x []ref) ref { return reference.SumRows(x[0]) }},
		{"RMSNorm", func(h *harness) []ref { return []ref{h.rand(-2, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.RMSNorm(p[0], 1e-5) },
			func(x []ref) ref { return reference.RMSNorm(x[0], float64(float32(1e-5))) }},
		{"LayerNormComposite", func(h *harness) []ref { return []ref{h.rand(-2, 2, ne...)} },
			func(c *Context, p []*Tensor) *Tensor { return c.LayerNormComposite(p[0], 1e-5) },
			func(x []ref) ref { return reference.Norm(x[0], float64(float32(1e-5))) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			xs := tc.inputs(h)
			h.gradCheck(tc.name, xs, func(p []*Tensor) *Tensor { return tc.build(h.c, p) }, func() ref { return tc.fwd(xs) }, false)
		})
	}
}

func TestBackwardMulMat(t *testing.T) {
	for _, s := range []struct{ a, b []int }{
		{[]int{9, 7}, []int{9, 5}},
		{[]int{9, 7, 3}, []int{9, 5, 3}},
		{[]int{9, 7, 2}, []int{9, 5, 4}}, // GQA-style: a broadcast over dimension 2
	} {
		t.Run(fmt.Sprint(s.a, s.b), func(t *testing.T) {
			h := newHarness(t)
			xs := []ref{h.rand(-1, 1, s.a...), h.rand(-1, 1, s.b...)}
			h.gradCheck("MulMat", xs, func(p []*Tensor) *Tensor { return h.c.MulMat(p[0], p[1]) },
				func() ref { return reference.MulMat(xs[0], xs[1]) }, false)
		})
	}
}

func TestBackwardSoftMaxExt(t *testing.T) {
	h := newHarness(t)
	const n, heads, scale = 6, 3, 0.6
	mask := reference.CausalMask(n, n, 0)
	xs := []ref{h.rand(-2, 2, n, n, heads)}
	m := h.in(mask)
	h.gradCheck("SoftMaxExt causal", xs, func(p []*Tensor) *Tensor { return h.c.SoftMaxExt(p[0], m, scale, 0) },
		func() ref { return reference.SoftMaxExt(xs[0], &mask, float64(float32(scale)), 0) }, false)
}

func TestBackwardRopeExt(t *testing.T) {
	pos := []int32{4, 0, 2, 7, 1}
	for _, r := range []Rope{
		{Dims: 8, Mode: RopeNormal, FreqBase: 10000, FreqScale: 1, AttnFactor: 1},
		{Dims: 8, Mode: RopeNeox, FreqBase: 10000, FreqScale: 1, AttnFactor: 1},
		{Dims: 6, Mode: RopeNeox, FreqBase: 500, FreqScale: 0.5, AttnFactor: 1},
	} {
		t.Run(fmt.Sprintf("mode %d dims %d", r.Mode, r.Dims), func(t *testing.T) {
			h := newHarness(t)
			xs := []ref{h.rand(-1, 1, 8, 3, len(pos))}
			pi := h.inI32(pos, int64(len(pos)))
			p := reference.RopeParams{NDims: r.Dims, Mode: int(r.Mode), FreqBase: float64(r.FreqBase),
				FreqScale: float64(r.FreqScale), AttnFactor: float64(r.AttnFactor)}
			h.gradCheck("RopeExt", xs, func(ps []*Tensor) *Tensor { return h.c.RopeExt(ps[0], pi, nil, r) },
				func() ref { return p.Apply(xs[0], pos) }, false)
		})
	}
}

func TestBackwardGetRows(t *testing.T) {
	h := newHarness(t)
	rows := []int32{2, 5, 2, 0, 8, 5} // repeated rows accumulate
	xs := []ref{h.rand(-1, 1, 7, 9)}
	ri := h.inI32(rows, int64(len(rows)))
	h.gradCheck("GetRows", xs, func(p []*Tensor) *Tensor { return h.c.GetRows(p[0], ri) },
		func() ref { return reference.GetRows(xs[0], rows) }, false)
}

func TestBackwardLayout(t *testing.T) {
	t.Run("Transpose Cont Reshape Permute Cont", func(t *testing.T) {
		h := newHarness(t)
		xs := []ref{h.rand(-1, 1, 6, 5, 3)}
		h.gradCheck("layout chain", xs, func(p []*Tensor) *Tensor {
			x := h.c.Reshape(h.c.Cont(h.c.Transpose(p[0])), 10, 3, 3)
			return h.c.Cont(h.c.Permute(x, [4]int{1, 2, 0, 3}))
		}, func() ref {
			return reference.Permute(reference.Transpose(xs[0]).Reshape(10, 3, 3), 1, 2, 0, 3)
		}, false)
	})
	t.Run("View", func(t *testing.T) {
		h := newHarness(t)
		xs := []ref{h.rand(-1, 1, 6, 5, 3)}
		h.gradCheck("View", xs, func(p []*Tensor) *Tensor {
			nb := p[0].Nb()
			return h.c.Cont(h.c.View(p[0], []int64{3, 2, 2}, []int{2 * nb[1], nb[2]}, 4*(1+6)))
		}, func() ref {
			out := reference.New(3, 2, 2)
			for i2 := 0; i2 < 2; i2++ {
				for i1 := 0; i1 < 2; i1++ {
					for i0 := 0; i0 < 3; i0++ {
						out.Set(xs[0].At(1+i0, 1+2*i1, i2), i0, i1, i2)
					}
				}
			}
			return out
		}, false)
	})
	t.Run("Repeat", func(t *testing.T) {
		h := newHarness(t)
		xs := []ref{h.rand(-1, 1, 7, 1, 3)}
		like := h.c.NewTensor(F32, 14, 5, 3, 2)
		h.gradCheck("Repeat", xs, func(p []*Tensor) *Tensor { return h.c.Repeat(p[0], like) },
			func() ref { return reference.Repeat(xs[0], 14, 5, 3, 2) }, false)
	})
	t.Run("Acc", func(t *testing.T) {
		h := newHarness(t)
		xs := []ref{h.rand(-1, 1, 7, 5), h.rand(-1, 1, 3, 2)}
		h.gradCheck("Acc", xs, func(p []*Tensor) *Tensor {
			nb := p[0].Nb()
			return h.c.Sqr(h.c.Acc(p[0], p[1], 2*nb[1], nb[2], nb[3], 4*(2+7)))
		}, func() ref {
			out := xs[0].Clone()
			for i1 := 0; i1 < 2; i1++ {
				for i0 := 0; i0 < 3; i0++ {
					out.Data[out.Index(2+i0, 1+2*i1)] += xs[1].At(i0, i1)
				}
			}
			return reference.Sqr(out)
		}, false)
	})
	// Gradients that pass through a Transpose reach these ops as strided views; their
	// backward kernels read them correctly (BuildBackward refuses the ones that cannot).
	for _, tc := range []struct {
		name  string
		build func(c *Context, p []*Tensor) *Tensor
		fwd   func(x []ref) ref
		n     int
	}{
		{"Relu", func(c *Context, p []*Tensor) *Tensor { return c.Relu(p[0]) }, func(x []ref) ref { return reference.Relu(x[0]) }, 1},
		{"Exp", func(c *Context, p []*Tensor) *Tensor { return c.Exp(p[0]) }, func(x []ref) ref { return reference.Exp(x[0]) }, 1},
		{"Sqr", func(c *Context, p []*Tensor) *Tensor { return c.Sqr(p[0]) }, func(x []ref) ref { return reference.Sqr(x[0]) }, 1},
		{"Add", func(c *Context, p []*Tensor) *Tensor { return c.Add(p[0], p[1]) }, func(x []ref) ref { return reference.Add(x[0], x[1]) }, 2},
		{"MulMat", func(c *Context, p []*Tensor) *Tensor { return c.MulMat(p[0], p[1]) }, func(x []ref) ref { return reference.MulMat(x[0], x[1]) }, 2},
	} {
		t.Run("transposed gradient into "+tc.name, func(t *testing.T) {
			h := newHarness(t)
			xs := []ref{h.rand(-2, 2, 6, 5), h.rand(-2, 2, 6, 5)}[:tc.n]
			h.gradCheck("Transpose("+tc.name+")", xs, func(p []*Tensor) *Tensor {
				return h.c.Cont(h.c.Transpose(tc.build(h.c, p)))
			}, func() ref { return reference.Transpose(tc.fwd(xs)) }, false)
		})
	}
	// Permute(0, 2, 1, 3) keeps rows contiguous (as in attention, where q and k are permuted
	// after RoPE); BuildBackward lets such gradients reach these ops.
	pos := []int32{2, 0, 3}
	rope := Rope{Dims: 4, Mode: RopeNeox, FreqBase: 100, FreqScale: 1, AttnFactor: 1}
	ropeRef := reference.RopeParams{NDims: 4, Mode: reference.RopeNeox, FreqBase: 100, FreqScale: 1, AttnFactor: 1}
	rows := []int32{1, 4, 4, 0, 9, 14, 2, 3, 7, 11, 12, 5, 6, 8, 10}
	subB := reference.Rand(rand.New(rand.NewPCG(1, 2)), -1, 1, 6, 5, 3).Map(reference.RoundF32)
	for _, tc := range []struct {
		name  string
		ne1   []int // shape of the second param (if any)
		build func(h *harness, p []*Tensor) *Tensor
		fwd   func(x []ref) ref
	}{
		{"RMSNorm", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.RMSNorm(p[0], 1e-5) },
			func(x []ref) ref { return reference.RMSNorm(x[0], float64(float32(1e-5))) }},
		{"Mul", []int{6, 5, 3}, func(h *harness, p []*Tensor) *Tensor { return h.c.Mul(p[0], p[1]) },
			func(x []ref) ref { return reference.Mul(x[0], x[1]) }},
		{"SwigluSplit", []int{6, 5, 3}, func(h *harness, p []*Tensor) *Tensor { return h.c.SwigluSplit(p[0], p[1]) },
			func(x []ref) ref { return reference.SwigluSplit(x[0], x[1]) }},
		{"RopeExt", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.RopeExt(p[0], h.inI32(pos, 3), nil, rope) },
			func(x []ref) ref { return ropeRef.Apply(x[0], pos) }},
		{"Add", []int{6, 5, 3}, func(h *harness, p []*Tensor) *Tensor { return h.c.Add(p[0], p[1]) },
			func(x []ref) ref { return reference.Add(x[0], x[1]) }},
		{"Add broadcast", []int{6, 1, 3}, func(h *harness, p []*Tensor) *Tensor { return h.c.Add(p[0], p[1]) },
			func(x []ref) ref { return reference.Add(x[0], x[1]) }},
		{"Sub (a only)", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Sub(p[0], h.in(subB)) },
			func(x []ref) ref { return reference.Sub(x[0], subB) }},
		{"Div", []int{6, 5, 3}, func(h *harness, p []*Tensor) *Tensor { return h.c.Div(p[0], h.c.Exp(p[1])) },
			func(x []ref) ref { return reference.Div(x[0], reference.Exp(x[1])) }},
		{"Log", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Log(h.c.Exp(p[0])) },
			func(x []ref) ref { return reference.Log(reference.Exp(x[0])) }},
		{"Sqrt", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Sqrt(h.c.Exp(p[0])) },
			func(x []ref) ref { return reference.Sqrt(reference.Exp(x[0])) }},
		{"Sqr", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Sqr(p[0]) },
			func(x []ref) ref { return reference.Sqr(x[0]) }},
		{"Exp", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Exp(p[0]) },
			func(x []ref) ref { return reference.Exp(x[0]) }},
		{"Relu", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Relu(p[0]) },
			func(x []ref) ref { return reference.Relu(x[0]) }},
		{"Softplus", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Softplus(p[0]) },
			func(x []ref) ref { return reference.Softplus(x[0]) }},
		{"Repeat", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.Repeat(h.c.SumRows(p[0]), p[0]) },
			func(x []ref) ref { return reference.Repeat(reference.SumRows(x[0]), 6, 5, 3) }},
		{"SumRows", nil, func(h *harness, p []*Tensor) *Tensor { return h.c.SumRows(p[0]) },
			func(x []ref) ref { return reference.SumRows(x[0]) }},
		{"GetRows", nil, func(h *harness, p []*Tensor) *Tensor {
			return h.c.Reshape(h.c.GetRows(h.c.Reshape(p[0], 6, 15), h.inI32(rows, 15)), 6, 5, 3)
		}, func(x []ref) ref { return reference.GetRows(x[0].Reshape(6, 15), rows).Reshape(6, 5, 3) }},
	} {
		t.Run("permuted gradient into "+tc.name, func(t *testing.T) {
			h := newHarness(t)
			xs := []ref{h.rand(-2, 2, 6, 5, 3)}
			if tc.ne1 != nil {
				xs = append(xs, h.rand(-2, 2, tc.ne1...))
			}
			h.gradCheck("Permute0213("+tc.name+")", xs, func(p []*Tensor) *Tensor {
				return h.c.Cont(h.c.Permute(tc.build(h, p), [4]int{0, 2, 1, 3}))
			}, func() ref { return reference.Permute(tc.fwd(xs), 0, 2, 1, 3) }, false)
		})
	}
	t.Run("Reshape unblocks a transposed gradient", func(t *testing.T) {
		h := newHarness(t)
		xs := []ref{h.rand(-2, 2, 6, 5)}
		h.gradCheck("Transpose(Reshape(RMSNorm))", xs, func(p []*Tensor) *Tensor {
			return h.c.Cont(h.c.Transpose(h.c.Reshape(h.c.RMSNorm(p[0], 1e-5), 6, 5)))
		}, func() ref { return reference.Transpose(reference.RMSNorm(xs[0], float64(float32(1e-5)))) }, false)
	})
}

func TestBackwardCrossEntropyLoss(t *testing.T) {
	h := newHarness(t)
	const classes, rows = 11, 6
	labels := reference.New(classes, rows)
	for r := 0; r < rows; r++ {
		labels.Set(1, h.rng.IntN(classes), r) // one-hot rows
	}
	xs := []ref{h.rand(-3, 3, classes, rows)}
	li := h.in(labels)
	h.gradCheck("CrossEntropyLoss", xs, func(p []*Tensor) *Tensor { return h.c.CrossEntropyLoss(p[0], li) },
		func() ref { return reference.FromData([]float64{reference.CrossEntropyLoss(xs[0], labels)}, 1) }, true)
}

// transformerBlock is a small piece of a LLaMA block whose params sit upstream of RMS_NORM
// (and of SOFT_MAX): tokens x = W0·e → rms_norm → ·w → attention scores with a causal mask
// → softmax → ·v → rms_norm → cross-entropy against one-hot labels. It returns the ggml loss
// and the float64 reference loss over the same inputs.
type transformerBlock struct {
	xs     []ref // W0 [d, d], e [d, T], w [d], v [d, T]
	labels ref
	mask   ref
}

const tbD, tbT = 8, 6

func newTransformerBlock(h *harness) *transformerBlock {
	tb := &transformerBlock{
		xs:     []ref{h.rand(-1, 1, tbD, tbD), h.rand(-1, 1, tbD, tbT), h.rand(0.5, 1.5, tbD), h.rand(-1, 1, tbD, tbT)},
		labels: reference.New(tbD, tbT),
		mask:   reference.CausalMask(tbT, tbT, 0),
	}
	for r := 0; r < tbT; r++ {
		tb.labels.Set(1, h.rng.IntN(tbD), r)
	}
	return tb
}

func (tb *transformerBlock) build(h *harness, p []*Tensor) *Tensor {
	c := h.c
	x := c.Mul(c.RMSNorm(c.MulMat(p[0], p[1]), 1e-5), p[2])   // [d, T]
	s := c.SoftMaxExt(c.MulMat(x, x), h.in(tb.mask), 0.35, 0) // [T, T] (row per query)
	o := c.MulMat(c.Cont(c.Transpose(p[3])), s)               // [d, T]
	y := c.RMSNorm(c.Add(o, x), 1e-5)                         // [d, T]: d classes per token
	return c.CrossEntropyLoss(c.Scale(y, 2), h.in(tb.labels))
}

func (tb *transformerBlock) forward() ref {
	x := reference.Mul(reference.RMSNorm(reference.MulMat(tb.xs[0], tb.xs[1]), float64(float32(1e-5))), tb.xs[2])
	s := reference.SoftMaxExt(reference.MulMat(x, x), &tb.mask, float64(float32(0.35)), 0)
	o := reference.MulMat(reference.Transpose(tb.xs[3]), s)
	y := reference.RMSNorm(reference.Add(o, x), float64(float32(1e-5)))
	logits := reference.Scale(y, 2)
	return reference.FromData([]float64{reference.CrossEntropyLoss(logits, tb.labels)}, 1)
}

// TestBackwardInPlaceFix checks the gradients of params upstream of RMS_NORM and SOFT_MAX
// against finite differences. Without the fix BuildBackward applies (docs/GGML.md, "The in-place
// bug in the CPU backward") the allocator lets RMS_NORM_BACK / SOFT_MAX_BACK overwrite inputs
// they still read; the second subtest builds the same graph without the fix to show that this
// check would catch it.
func TestBackwardInPlaceFix(t *testing.T) {
	t.Run("with fix", func(t *testing.T) {
		h := newHarness(t)
		tb := newTransformerBlock(h)
		h.gradCheck("block", tb.xs, func(p []*Tensor) *Tensor { return tb.build(h, p) }, tb.forward, true)
	})
	t.Run("without fix the gradients are wrong", func(t *testing.T) {
		h := newHarness(t)
		tb := newTransformerBlock(h)
		params := make([]*Tensor, len(tb.xs))
		for i, x := range tb.xs {
			params[i] = h.param(x)
		}
		grads := h.backward(tb.build(h, params), params, BuildBackwardRaw)
		worst := 0.0
		for i, x := range tb.xs {
			fd := reference.NumericGrad(func([]float64) float64 { return tb.forward().Data[0] }, x.Data, fdEps)
			worst = math.Max(worst, reference.MaxRelErr(fd, grads[i].Data, gradFloor*maxAbs(fd)+1e-6))
		}
		t.Logf("without the in-place fix: max gradient error %.3g", worst)
		require.Greater(t, worst, 10*gradTol, "the graph no longer exposes ggml's in-place bug; the fix is untested")
	})
}
