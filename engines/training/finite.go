package training

import (
	"fmt"
	"math"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// NonFiniteError is a training step whose loss or gradient norm is NaN or infinite, or whose
// gradient vanished altogether because the activations overflowed: the weights it updated
// are no longer worth keeping, so a trainer that gets one stops, and saves nothing from that
// step on. The cross entropy never becomes NaN on its own (its probabilities are floored), so
// a NaN or infinity comes from the model: a weight that was already non-finite (a damaged
// base), or a learning rate so high that the weights overflowed. The last case also shows as a
// gradient of exactly zero under a positive loss: once a residual stream's squares overflow
// float32, RMSNorm's sum of them is infinite and its output zero, so nothing reaches the loss.
type NonFiniteError struct {
	// Quantity is what is wrong: "loss" or "gradient norm".
	Quantity string
	// Value is its value (NaN, +Inf or -Inf; a gradient norm of 0).
	Value float64
	// Loss is the step's loss (with a vanished gradient).
	Loss float64
}

func (e *NonFiniteError) Error() string {
	if e.Value == 0 {
		return fmt.Sprintf("the %s is 0 with a loss of %.4g: the activations overflowed float32 (infinite sums of squares in the norms), so no gradient reaches the weights (a learning rate so high that the weights grew out of range)", e.Quantity, e.Loss)
	}
	return fmt.Sprintf("the %s is %v: a value of the model is not finite (a base with NaN or infinite weights, or a learning rate so high that the weights overflowed)", e.Quantity, e.Value)
}

// CheckLoss returns a NonFiniteError for a non-finite loss, or nil.
func CheckLoss(loss float32) error {
	if !transformer.Finite(float64(loss)) {
		return &NonFiniteError{Quantity: "loss", Value: float64(loss)}
	}
	return nil
}

// GradNorm sums the squares of a graph's gradients into one f32 scalar: a NaN or an infinity
// in any gradient makes it NaN or infinite (as does a sum of squares beyond float32, a norm
// above 1.8e19, which is no gradient a step should take). Each square is a dot product of the
// gradient with itself (MulMat of [n, 1] by [n, 1]), which needs no copy of the gradient.
type GradNorm struct {
	total *ggml.Tensor // the running sum; the last one added is the graph's output
}

// sum adds grad's squared norm to the sum, built in ctx, and returns the new sum, which the
// caller expands into the graph (soon after the gradient, so that its memory is not kept
// until the end of the graph for it).
func (n *GradNorm) sum(ctx *ggml.Context, grad *ggml.Tensor) *ggml.Tensor {
	if grad == nil {
		return nil // the context holds the error
	}
	if !grad.IsContiguous() {
		grad = ctx.Cont(grad)
	}
	flat := ctx.Reshape(grad, grad.Len(), 1)
	sq := ctx.MulMat(flat, flat)
	if n.total == nil {
		n.total = sq
	} else {
		n.total = ctx.Add(n.total, sq)
	}
	return n.total.SetOutput()
}

// Add is sum, expanded into graph right away.
func (n *GradNorm) Add(ctx *ggml.Context, graph *ggml.Graph, grad *ggml.Tensor) error {
	t := n.sum(ctx, grad)
	if err := ctx.Err(); err != nil {
		return err
	}
	return graph.Expand(t)
}

// GradNormNodes bounds the nodes GradNorm adds to a graph for n gradients: a copy, a reshape,
// a product and a sum each.
func GradNormNodes(n int) int { return 4 * n }

// Value reads the squared norm after the graph computed (0 when no gradient was added).
func (n *GradNorm) Value() (float64, error) {
	if n == nil || n.total == nil {
		return 0, nil
	}
	v, err := n.total.F32()
	if err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

// CheckGradNorm returns a NonFiniteError for a non-finite squared gradient norm sq, or for a
// zero one under a positive loss (a vanished gradient), or nil.
func CheckGradNorm(sq float64, loss float32) error {
	if !transformer.Finite(sq) {
		return &NonFiniteError{Quantity: "gradient norm", Value: math.Sqrt(sq)}
	}
	if sq == 0 && loss > 0 {
		return &NonFiniteError{Quantity: "gradient norm", Value: 0, Loss: float64(loss)}
	}
	return nil
}

// checkFiniteTensors reports the first of the f32 tensors ts that holds a NaN or an infinity.
func checkFiniteTensors(ts []*ggml.Tensor) error {
	var buf []float32
	for _, t := range ts {
		if t.Type() != ggml.F32 {
			continue // trained tensors are f32
		}
		if n := int(t.Len()); cap(buf) < n {
			buf = make([]float32, n)
		} else {
			buf = buf[:n]
		}
		if err := t.ReadF32(buf); err != nil {
			return err
		}
		if i := decoding.NonFinite(buf); i >= 0 {
			return fmt.Errorf("training: %s holds %v at element %d", t.Name(), buf[i], i)
		}
	}
	return nil
}
