package reference

import "math"

// LogSoftMax returns log(softmax(row)) for every row of a: x - max - log Σ exp(x - max).
func LogSoftMax(a Tensor) Tensor {
	a.check("LogSoftMax")
	n := a.Ne[0]
	out := New(a.Ne[:]...)
	for r := 0; r < a.NRows(); r++ {
		x := a.Data[r*n : (r+1)*n]
		maxv := math.Inf(-1)
		for _, v := range x {
			maxv = cmax(maxv, v)
		}
		sum := 0.0
		for _, v := range x {
			sum += math.Exp(v - maxv)
		}
		ls := math.Log(sum)
		y := out.Data[r*n : (r+1)*n]
		for i, v := range x {
			y[i] = v - maxv - ls
		}
	}
	return out
}

// CrossEntropyLoss is ggml_cross_entropy_loss(logits, labels): logits and
// labels have the same shape [V, N, ...] (labels are dense probabilities, e.g.
// one-hot rows), and the scalar result is
//
//	-Σ_rows Σ_i labels_i * log_softmax(logits)_i / nrows
//
// where nrows = N*ne2*ne3 (ggml_nrows).
func CrossEntropyLoss(logits, labels Tensor) float64 {
	logits.check("CrossEntropyLoss")
	labels.check("CrossEntropyLoss")
	assertf(SameShape(logits, labels), "CrossEntropyLoss", "shapes %v and %v differ", logits.Ne, labels.Ne)
	ls := LogSoftMax(logits)
	s := 0.0
	for i, v := range ls.Data {
		s += labels.Data[i] * v
	}
	return -s / float64(logits.NRows())
}

// CrossEntropyLossBack is ggml_cross_entropy_loss_back(grad, logits, labels):
// the gradient of grad*CrossEntropyLoss(logits, labels) with respect to the
// logits, (softmax(logits) - labels) * grad / nrows. This equals the true
// gradient only when every label row sums to 1 (ggml assumes so too). Shape of
// logits.
func CrossEntropyLossBack(grad float64, logits, labels Tensor) Tensor {
	assertf(SameShape(logits, labels), "CrossEntropyLossBack", "shapes %v and %v differ", logits.Ne, labels.Ne)
	out := SoftMax(logits)
	k := grad / float64(logits.NRows())
	for i := range out.Data {
		out.Data[i] = (out.Data[i] - labels.Data[i]) * k
	}
	return out
}

// AdamWStep is one element-wise step of ggml_opt_step_adamw(w, g, m, v,
// params) with params = [alpha, beta1, beta2, eps, wd, beta1h, beta2h]
// (ggml's OPT_STEP_ADAMW kernel). It updates w, m and v in place:
//
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*g^2
//	w = w*(1 - alpha*wd) - alpha*(m*beta1h) / (sqrt(v*beta2h) + eps)
//
// beta1h and beta2h are the host-supplied bias corrections (see
// AdamWBiasCorrection). All four slices must have the same length.
func AdamWStep(w, g, m, v []float64, alpha, beta1, beta2, eps, wd, beta1h, beta2h float64) {
	assertf(len(g) == len(w) && len(m) == len(w) && len(v) == len(w), "AdamWStep",
		"lengths differ: w %d, g %d, m %d, v %d", len(w), len(g), len(m), len(v))
	keep := 1 - alpha*wd
	for i := range w {
		m[i] = m[i]*beta1 + g[i]*(1-beta1)
		v[i] = v[i]*beta2 + g[i]*g[i]*(1-beta2)
		mh := m[i] * beta1h
		vh := math.Sqrt(v[i]*beta2h) + eps
		w[i] = w[i]*keep - alpha*mh/vh
	}
}

// AdamWBiasCorrection returns the bias corrections ggml-opt passes as params
// slots 5 and 6 at 1-based optimizer step iter: 1/(1-beta1^iter) and
// 1/(1-beta2^iter).
func AdamWBiasCorrection(beta1, beta2 float64, iter int) (beta1h, beta2h float64) {
	return 1 / (1 - math.Pow(beta1, float64(iter))), 1 / (1 - math.Pow(beta2, float64(iter)))
}

// SGDStep is one step of ggml_opt_step_sgd(w, g, params) with params =
// [alpha, wd]: w = w*(1 - alpha*wd) - alpha*g, in place.
func SGDStep(w, g []float64, alpha, wd float64) {
	assertf(len(g) == len(w), "SGDStep", "lengths differ: w %d, g %d", len(w), len(g))
	keep := 1 - alpha*wd
	for i := range w {
		w[i] = w[i]*keep - alpha*g[i]
	}
}
