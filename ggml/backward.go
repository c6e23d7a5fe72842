package ggml

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/ggmlc"
)

// BuildBackward appends the backward pass for the loss (marked with SetLoss) to a graph made
// with grads, after its forward pass was expanded. gradAccs may give, for forward nodes by
// index, persistent tensors to accumulate gradients in; nil lets ggml allocate them in the
// graph's context. The context needs room for the gradient nodes (about twice the forward).
//
// Graphs on which ggml would abort are refused with an error first (see checkBackward): no
// param, a param that is not f32/f16, an op without a backward (NORM, GELU, CONCAT,
// FLASH_ATTN_EXT, ...) or an in-place op between a param and the loss, and the operand shapes
// and gradient layouts ggml's backward cannot handle.
//
// It also applies the fix for ggml's in-place bug on the CPU (docs/GGML.md, "The in-place bug
// in the CPU backward"): the inputs of RMS_NORM_BACK (src 0) and SOFT_MAX_BACK (src 1) are
// marked as outputs so the allocator never lets those kernels overwrite an input they still
// read.
func (g *Graph) BuildBackward(gradAccs []*Tensor) error {
	if err := g.ctx.err; err != nil {
		return err
	}
	if !g.grads {
		return fmt.Errorf("ggml: BuildBackward: the graph was made without gradients")
	}
	n := g.Len()
	hasLoss := false
	for i := 0; i < n; i++ {
		hasLoss = hasLoss || g.Node(i).t.Flags()&int32(ggmlc.TensorFlagLoss) != 0
	}
	if !hasLoss {
		return fmt.Errorf("ggml: BuildBackward: no node of the graph is marked as the loss")
	}
	if need := 3 * n; g.size < need {
		return fmt.Errorf("ggml: BuildBackward: the graph holds %d nodes; forward and backward of %d forward nodes need up to %d", g.size, n, need)
	}
	if err := g.ctx.room(3 * n); err != nil {
		return fmt.Errorf("ggml: BuildBackward: %w", err)
	}
	if gradAccs != nil && len(gradAccs) != n {
		return fmt.Errorf("ggml: BuildBackward: %d gradient accumulators for %d forward nodes", len(gradAccs), n)
	}
	if err := g.checkBackward(gradAccs); err != nil {
		return fmt.Errorf("ggml: BuildBackward: %w", err)
	}
	var accs []ggmlc.Tensor
	if gradAccs != nil {
		accs = make([]ggmlc.Tensor, n)
		for i, a := range gradAccs {
			if a != nil {
				accs[i] = a.t
			}
		}
	}
	ggmlc.BuildBackwardExpand(g.ctx.c, g.g, accs)
	g.checkedOn = ggmlc.Backend{}
	for i := 0; i < g.Len(); i++ {
		t := ggmlc.GraphNode(g.g, i)
		switch t.Op() {
		case ggmlc.OpRMSNormBack:
			ggmlc.SetOutput(t.Src()[0])
		case ggmlc.OpSoftMaxBack:
			ggmlc.SetOutput(t.Src()[1])
		}
	}
	return nil
}

// Grad is the gradient of t in a graph with a backward pass, or nil if t has none.
func (g *Graph) Grad(t *Tensor) *Tensor {
	if t == nil || !g.grads {
		return nil
	}
	return g.ctx.wrap(ggmlc.GraphGetGrad(g.g, t.t))
}

// Reset zeroes the gradient accumulators and AdamW moments and sets the loss gradient to 1.
// Call it once after the graph is allocated, not every step.
func (g *Graph) Reset() { ggmlc.GraphReset(g.g) }

// backwardSrcs lists, for every op ggml_compute_backward (ggml.c) handles (docs/GGML.md,
// "Autodiff: which ops have a backward"), the operands it passes a gradient to. An op missing
// here makes ggml abort when a gradient reaches it. OpUnary and OpGlu are refined in
// checkBackwardNode.
var backwardSrcs = map[ggmlc.Op][]int{
	ggmlc.OpDup: {0}, ggmlc.OpAdd: {0, 1}, ggmlc.OpAdd1: {0, 1}, ggmlc.OpAcc: {0, 1},
	ggmlc.OpSub: {0, 1}, ggmlc.OpMul: {0, 1}, ggmlc.OpDiv: {0, 1},
	ggmlc.OpSqr: {0}, ggmlc.OpSqrt: {0}, ggmlc.OpLog: {0}, ggmlc.OpSin: {0}, ggmlc.OpCos: {0},
	ggmlc.OpSum: {0}, ggmlc.OpSumRows: {0}, ggmlc.OpMean: {0},
	ggmlc.OpRepeat: {0}, ggmlc.OpRepeatBack: {0}, ggmlc.OpRMSNorm: {0}, ggmlc.OpMulMat: {0, 1},
	ggmlc.OpScale: {0}, ggmlc.OpSet: {0, 1}, ggmlc.OpCpy: {0}, ggmlc.OpCont: {0},
	ggmlc.OpReshape: {0}, ggmlc.OpView: {0}, ggmlc.OpPermute: {0}, ggmlc.OpTranspose: {0},
	ggmlc.OpGetRows: {0}, ggmlc.OpDiagMaskInf: {0}, ggmlc.OpDiagMaskZero: {0},
	ggmlc.OpSoftMax: {0}, ggmlc.OpRope: {0}, ggmlc.OpIm2col: {1}, ggmlc.OpPool2D: {0},
	ggmlc.OpUnary: {0}, ggmlc.OpCrossEntropyLoss: {0}, ggmlc.OpGlu: {0, 1}, ggmlc.OpNone: nil,
}

// backwardUnary are the activations with a backward; SGN and STEP are piecewise constant.
var backwardUnary = map[ggmlc.UnaryOp]bool{
	ggmlc.UnaryOpAbs: true, ggmlc.UnaryOpSgn: true, ggmlc.UnaryOpNeg: true, ggmlc.UnaryOpStep: true,
	ggmlc.UnaryOpRelu: true, ggmlc.UnaryOpSilu: true, ggmlc.UnaryOpExp: true, ggmlc.UnaryOpExpm1: true,
	ggmlc.UnaryOpSoftplus: true,
}

// checkBackward replays the decisions of ggml_build_backward_expand in Go and refuses, with an
// error, every graph on which it would abort the process: no param, a differentiated operand
// that is not f32/f16, an in-place op on the gradient path, or a gradient reaching an op
// without a backward (NORM, GELU, CONCAT, FLASH_ATTN_EXT, ...) or one of the shape cases
// ggml's backward cannot handle.
func (g *Graph) checkBackward(gradAccs []*Tensor) error {
	n := g.Len()
	nodes := make([]ggmlc.Tensor, n)
	index := make(map[ggmlc.Tensor]int, n)
	for i := range nodes {
		nodes[i] = ggmlc.GraphNode(g.g, i)
		index[nodes[i]] = i
	}
	// Forward: which nodes need a gradient (grads_needed in ggml).
	needs := make([]bool, n)
	needed := func(s ggmlc.Tensor) bool { j, ok := index[s]; return ok && needs[j] }
	anyParam := false
	for i, t := range nodes {
		flags := t.Flags()
		anyParam = anyParam || flags&int32(ggmlc.TensorFlagParam) != 0
		if t.Type() == I32 {
			continue
		}
		need := flags&int32(ggmlc.TensorFlagParam|ggmlc.TensorFlagLoss) != 0
		for j, s := range t.Src() {
			if s.IsNil() || ignoredInBackward(t, j) || !needed(s) {
				continue
			}
			if s.Type() != F32 && s.Type() != F16 {
				return fmt.Errorf("%s (operand %d of %s) needs a gradient but is %s; gradients need f32 or f16", describeRaw(s), j, describeNode(t), TypeName(s.Type()))
			}
			need = true
		}
		if !need {
			continue
		}
		if !t.ViewSrc().IsNil() {
			switch t.Op() {
			case ggmlc.OpCpy, ggmlc.OpView, ggmlc.OpReshape, ggmlc.OpPermute, ggmlc.OpTranspose:
			default:
				return fmt.Errorf("%s works in place (a view of its input) and lies on the gradient path; ggml cannot differentiate in-place ops", describeNode(t))
			}
		}
		needs[i] = true
	}
	if !anyParam {
		return fmt.Errorf("no tensor of the graph is marked as a param (SetParam)")
	}
	// Backward, in ggml's order: which nodes receive a gradient, and can their op pass it on?
	// A node's gradient is final when it is reached (its consumers come later in the graph).
	// ggml hands a single contribution on as it is, so a Transpose or Permute of a node's
	// result gives the node a strided gradient, which some backward kernels cannot read.
	has := make([]bool, n)
	contribs := make([]int, n)    // gradient contributions received so far
	layout := make([][4]int64, n) // element strides of the single contribution
	for i, t := range nodes {
		if needs[i] && (t.Flags()&int32(ggmlc.TensorFlagLoss) != 0 || (gradAccs != nil && gradAccs[i] != nil)) {
			has[i], contribs[i] = true, 2 // accumulated in place: contiguous
		}
	}
	hasGrad := func(s ggmlc.Tensor) bool { j, ok := index[s]; return ok && has[j] }
	for i := n - 1; i >= 0; i-- {
		if !has[i] {
			continue
		}
		t := nodes[i]
		srcs := t.Src()
		srcNeeds := func(j int) bool { return !srcs[j].IsNil() && needed(srcs[j]) }
		grad := denseStrides(t.Ne())
		if contribs[i] == 1 {
			grad = layout[i]
		}
		if err := checkGradLayout(t, grad, srcNeeds); err != nil {
			return err
		}
		to, err := checkBackwardNode(t, srcNeeds, hasGrad)
		if err != nil {
			return err
		}
		for _, j := range to {
			if srcNeeds(j) {
				k := index[srcs[j]]
				has[k] = true
				contribs[k]++
				layout[k] = passedLayout(t, j, grad)
			}
		}
	}
	return nil
}

// denseStrides are the element strides of a contiguous tensor of shape ne.
func denseStrides(ne [4]int64) [4]int64 {
	return [4]int64{1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]}
}

// isDense is ggml_is_contiguous for element strides st of shape ne.
func isDense(ne, st [4]int64) bool {
	next := int64(1)
	for i := range ne {
		if ne[i] != 1 {
			if st[i] != next {
				return false
			}
			next *= ne[i]
		}
	}
	return true
}

// passedLayout is the layout of the gradient node t passes to operand j when its own gradient
// has element strides grad: ggml passes the same tensor on through DUP and ADD, a permuted view
// through PERMUTE and TRANSPOSE, and a new (contiguous) tensor otherwise.
func passedLayout(t ggmlc.Tensor, j int, grad [4]int64) [4]int64 {
	src := t.Src()[j]
	switch t.Op() {
	case ggmlc.OpDup:
		return grad
	case ggmlc.OpAdd:
		if src.Ne() == t.Ne() {
			return grad
		}
	case ggmlc.OpTranspose:
		grad[0], grad[1] = grad[1], grad[0]
		return grad
	case ggmlc.OpPermute:
		p := t.OpParams()
		var out [4]int64
		for i := range out {
			out[i] = grad[p[i]&3]
		}
		return out
	}
	return denseStrides(src.Ne())
}

// checkGradLayout refuses a strided gradient (one that reached t through a Transpose or
// Permute of t's result) where ggml's backward of t cannot take it: some builders assert a
// contiguous input (CONT, CPY, SCALE, MEAN, NEG, SUB's operand b), some kernels read it as if
// it were dense (SILU_BACK: silently wrong), and most element-wise kernels need contiguous
// rows. Only ops whose backward was checked against finite differences with such gradients
// (backward_test.go) are let through.
func checkGradLayout(t ggmlc.Tensor, grad [4]int64, srcNeeds func(int) bool) error {
	ne := t.Ne()
	if isDense(ne, grad) {
		return nil
	}
	rows := ne[0] == 1 || grad[0] == 1 // rows contiguous, as after Permute(0, 2, 1, 3)
	ok := false
	switch t.Op() {
	case ggmlc.OpNone, ggmlc.OpDup, ggmlc.OpReshape, ggmlc.OpPermute, ggmlc.OpTranspose, ggmlc.OpMulMat, ggmlc.OpSqr:
		ok = true
	case ggmlc.OpAdd:
		ok = rows || !srcNeeds(1) || t.Src()[1].Ne() == ne
	case ggmlc.OpUnary:
		switch ggmlc.GetUnaryOp(t) {
		case ggmlc.UnaryOpAbs, ggmlc.UnaryOpRelu, ggmlc.UnaryOpExp, ggmlc.UnaryOpSgn, ggmlc.UnaryOpStep:
			ok = true
		case ggmlc.UnaryOpSoftplus:
			ok = rows
		}
	case ggmlc.OpSub:
		ok = rows && !srcNeeds(1)
	case ggmlc.OpMul, ggmlc.OpDiv, ggmlc.OpSqrt, ggmlc.OpLog, ggmlc.OpSum, ggmlc.OpSumRows,
		ggmlc.OpRepeat, ggmlc.OpRMSNorm, ggmlc.OpGetRows, ggmlc.OpRope, ggmlc.OpGlu:
		ok = rows
	}
	if ok {
		return nil
	}
	what := "a strided gradient"
	if !rows {
		what = "a gradient with strided rows"
	}
	return fmt.Errorf("%s receives %s (its result is transposed or permuted), which ggml's backward of it cannot handle; insert a Reshape to the same shape between it and the Transpose/Permute, which makes the gradient contiguous", describeNode(t), what)
}

// ignoredInBackward mirrors the operands ggml_build_backward_expand never differentiates.
func ignoredInBackward(t ggmlc.Tensor, j int) bool {
	switch t.Op() {
	case ggmlc.OpIm2col, ggmlc.OpIm2colBack:
		return j == 0
	case ggmlc.OpUnary:
		u := ggmlc.GetUnaryOp(t)
		return j == 0 && (u == ggmlc.UnaryOpSgn || u == ggmlc.UnaryOpStep)
	case ggmlc.OpCpy, ggmlc.OpGetRows, ggmlc.OpGetRowsBack, ggmlc.OpRope:
		return j == 1
	}
	return false
}

// checkBackwardNode checks the backward of one node that receives a gradient and returns the
// operands it passes the gradient to. srcNeeds(j) says whether operand j needs a gradient;
// hasGrad whether a tensor already has one (from a consumer ggml handled before).
func checkBackwardNode(t ggmlc.Tensor, srcNeeds func(int) bool, hasGrad func(ggmlc.Tensor) bool) ([]int, error) {
	to, ok := backwardSrcs[t.Op()]
	if !ok {
		return nil, fmt.Errorf("%s has no backward pass in ggml, but a param's gradient must flow through it (docs/GGML.md, \"Differentiable compositions\", builds some from ops that have one)", describeNode(t))
	}
	src := t.Src()
	switch t.Op() {
	case ggmlc.OpUnary:
		u := ggmlc.GetUnaryOp(t)
		if !backwardUnary[u] {
			return nil, fmt.Errorf("%s has no backward pass in ggml, but a param's gradient must flow through it (GeluComposite is a GELU that has one)", describeNode(t))
		}
		if u == ggmlc.UnaryOpSgn || u == ggmlc.UnaryOpStep {
			return nil, nil
		}
	case ggmlc.OpGlu:
		if u := ggmlc.GetGluOp(t); u != ggmlc.GluOpSwiglu || src[1].IsNil() {
			return nil, fmt.Errorf("%s has no backward pass in ggml; only the split SwiGLU (SwigluSplit) has one", describeNode(t))
		}
	case ggmlc.OpSub, ggmlc.OpDiv:
		if srcNeeds(1) && src[0].Ne() != src[1].Ne() {
			return nil, fmt.Errorf("%s: ggml's backward needs b of a's shape, but %s is broadcast over %s (Repeat b first, or use Add/Mul)", describeNode(t), describeRaw(src[1]), describeRaw(src[0]))
		}
	case ggmlc.OpAdd1:
		if srcNeeds(1) {
			return nil, fmt.Errorf("%s: ggml has no correct gradient for the scalar operand %s (it averages the gradient instead of summing it)", describeNode(t), describeRaw(src[1]))
		}
	case ggmlc.OpMean:
		if hasGrad(src[0]) && ggmlc.Nelements(t) != 1 {
			return nil, fmt.Errorf("%s: ggml's backward of MEAN fails when its input %s already has a gradient (use Scale(SumRows(x), 1/n))", describeNode(t), describeRaw(src[0]))
		}
	case ggmlc.OpMulMat:
		a, b := src[0].Ne(), src[1].Ne()
		if srcNeeds(0) && (a[2] != b[2] || a[3] != b[3]) && b[3] != 1 {
			return nil, fmt.Errorf("%s: ggml's backward reduces a broadcast a %s only over dimension 2 (b %s has ne[3] %d); fold dimension 3 into 2", describeNode(t), describeRaw(src[0]), describeRaw(src[1]), b[3])
		}
		if typ := src[0].Type(); srcNeeds(1) && typ != F32 && !ggmlc.IsQuantized(typ) {
			// b's gradient is OUT_PROD(a, ·), whose CPU kernel aborts on f16 and bf16.
			return nil, fmt.Errorf("%s: ggml's backward to b %s multiplies by a %s, which its CPU OUT_PROD cannot read (Cast a to f32)", describeNode(t), describeRaw(src[1]), describeRaw(src[0]))
		}
	case ggmlc.OpView:
		if srcNeeds(0) && src[0].Type() != F32 {
			return nil, fmt.Errorf("%s: ggml's backward of a view needs an f32 source, not %s", describeNode(t), describeRaw(src[0]))
		}
	case ggmlc.OpSoftMax:
		if srcNeeds(1) {
			return nil, fmt.Errorf("%s: the mask %s gets no gradient in ggml", describeNode(t), describeRaw(src[1]))
		}
		if p := t.OpParams(); math.Float32frombits(uint32(p[1])) != 0 && srcNeeds(0) {
			return nil, fmt.Errorf("%s: the CPU backward of SOFT_MAX needs maxBias 0 (no ALiBi)", describeNode(t))
		}
	case ggmlc.OpRope:
		if srcNeeds(2) {
			return nil, fmt.Errorf("%s: the freq factors %s get no gradient in ggml", describeNode(t), describeRaw(src[2]))
		}
	case ggmlc.OpCrossEntropyLoss:
		if srcNeeds(1) {
			return nil, fmt.Errorf("%s: the labels %s get no gradient in ggml", describeNode(t), describeRaw(src[1]))
		}
	}
	return to, nil
}
