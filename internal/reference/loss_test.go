package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCrossEntropyByHand(t *testing.T) {
	logits := FromData([]float64{0, 0, 1, 2, 3, 0}, 2, 3)
	labels := FromData([]float64{1, 0, 0, 1, 0.5, 0.5}, 2, 3)
	// Row 0: -log(1/2). Row 1: -log(e^2/(e+e^2)). Row 2: -(0.5*log p0 + 0.5*log p1).
	r1 := -(2 - math.Log(math.E+math.E*math.E))
	lse := math.Log(math.Exp(3) + 1)
	r2 := -(0.5*(3-lse) + 0.5*(0-lse))
	want := (math.Ln2 + r1 + r2) / 3
	assert.InDelta(t, want, CrossEntropyLoss(logits, labels), 1e-15)
	assert.Panics(t, func() { CrossEntropyLoss(logits, New(3, 2)) })
}

func TestCrossEntropyGradient(t *testing.T) {
	rng := newRNG(90)
	const V, N = 7, 4
	logits := Rand(rng, -3, 3, V, N)
	labels := New(V, N)
	for n := 0; n < N; n++ {
		labels.Set(1, (3*n+1)%V, n) // one-hot
	}
	got := CrossEntropyLossBack(1, logits, labels)
	// (softmax - labels)/N.
	want := Scale(Sub(SoftMax(logits), labels), 1.0/N)
	nearT(t, want, got, 1e-15)
	f := func(x []float64) float64 { return CrossEntropyLoss(FromData(x, V, N), labels) }
	num := NumericGrad(f, append([]float64(nil), logits.Data...), 1e-5)
	require.Less(t, MaxRelErr(num, got.Data, 1e-6), 1e-7)
	// The incoming gradient scales it.
	nearT(t, Scale(got, 2.5), CrossEntropyLossBack(2.5, logits, labels), 1e-15)
}

func TestLogSoftMax(t *testing.T) {
	a := Rand(newRNG(91), -5, 5, 6, 3)
	nearT(t, Log(SoftMax(a)), LogSoftMax(a), 1e-14)
}

func TestAdamWStepByHand(t *testing.T) {
	w := []float64{1, -2}
	g := []float64{0.5, 0}
	m := []float64{0, 0.1}
	v := []float64{0, 0.04}
	b1h, b2h := AdamWBiasCorrection(0.9, 0.999, 1)
	assert.InDelta(t, 10, b1h, 1e-12)
	assert.InDelta(t, 1000, b2h, 1e-9)
	AdamWStep(w, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, b1h, b2h)
	// element 0: m = 0.05, v = 0.00025, mh = 0.5, vh = 0.5 + 1e-8.
	assert.InDelta(t, 0.05, m[0], 1e-15)
	assert.InDelta(t, 0.00025, v[0], 1e-15)
	assert.InDelta(t, 1*(1-0.001)-0.1*0.5/(0.5+1e-8), w[0], 1e-15)
	// element 1: g = 0, m = 0.09, v = 0.03996.
	assert.InDelta(t, 0.09, m[1], 1e-15)
	assert.InDelta(t, 0.03996, v[1], 1e-15)
	assert.InDelta(t, -2*(1-0.001)-0.1*(0.09*b1h)/(math.Sqrt(0.03996*b2h)+1e-8), w[1], 1e-12)
	assert.Panics(t, func() { AdamWStep(w, g[:1], m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1, 1) })
}

func TestAdamWFirstStepIsSignStep(t *testing.T) {
	// With bias correction at step 1 and wd = 0, Adam moves each weight by
	// about -alpha*sign(g).
	rng := newRNG(92)
	g := Rand(rng, -1, 1, 20).Data
	w := make([]float64, 20)
	m := make([]float64, 20)
	v := make([]float64, 20)
	b1h, b2h := AdamWBiasCorrection(0.9, 0.999, 1)
	AdamWStep(w, g, m, v, 0.01, 0.9, 0.999, 1e-12, 0, b1h, b2h)
	for i := range w {
		assert.InDelta(t, -0.01*math.Copysign(1, g[i]), w[i], 1e-9)
	}
}

func TestSGDStep(t *testing.T) {
	w := []float64{1, 2}
	SGDStep(w, []float64{0.5, -1}, 0.1, 0.5)
	near(t, []float64{0.95 - 0.05, 1.9 + 0.1}, w, 1e-15)
}
