package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetsValidate(t *testing.T) {
	fs := FromScratch()
	require.NoError(t, fs.Validate())
	assert.Equal(t, AdamW{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, BiasCorrection: true, Mode: ModeTorch}, fs)
	lo := LoRA()
	require.NoError(t, lo.Validate())
	assert.Equal(t, 2e-4, lo.LR)
	assert.Equal(t, 0.999, lo.Beta2)
	assert.Equal(t, 0.0, lo.WeightDecay)
	assert.Equal(t, ModeTorch, lo.Mode)
}

func TestValidateRejects(t *testing.T) {
	base := FromScratch()
	cases := []struct {
		name string
		edit func(*AdamW)
		want string
	}{
		{"zero lr", func(a *AdamW) { a.LR = 0 }, "learning rate"},
		{"negative lr", func(a *AdamW) { a.LR = -1e-3 }, "learning rate"},
		{"NaN lr", func(a *AdamW) { a.LR = math.NaN() }, "learning rate"},
		{"Inf lr", func(a *AdamW) { a.LR = math.Inf(1) }, "learning rate"},
		{"beta1 one", func(a *AdamW) { a.Beta1 = 1 }, "Beta1"},
		{"beta1 negative", func(a *AdamW) { a.Beta1 = -0.1 }, "Beta1"},
		{"beta2 NaN", func(a *AdamW) { a.Beta2 = math.NaN() }, "Beta2"},
		{"beta2 rounds to 1 in f32", func(a *AdamW) { a.Beta2 = 1 - 1e-9 }, "float32"},
		{"eps zero", func(a *AdamW) { a.Eps = 0 }, "Eps"},
		{"eps underflows f32", func(a *AdamW) { a.Eps = 1e-60 }, "Eps"},
		{"wd negative", func(a *AdamW) { a.WeightDecay = -0.1 }, "WeightDecay"},
		{"lr*wd too big", func(a *AdamW) { a.LR, a.WeightDecay = 0.5, 2 }, "LR·WeightDecay"},
		{"mode unset", func(a *AdamW) { a.Mode = 0 }, "not a known AdamW mode"},
		{"mode bogus", func(a *AdamW) { a.Mode = 7 }, "not a known AdamW mode"},
		{"torch without correction", func(a *AdamW) { a.BiasCorrection = false }, "contradicts Mode torch"},
		{"none with correction", func(a *AdamW) { a.Mode = ModeNoBiasCorrection }, "contradicts Mode none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base
			c.edit(&a)
			err := a.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, err = a.Params(0, 1e-3, true)
			assert.Error(t, err, "Params must refuse invalid settings")
		})
	}
	ok := base
	ok.Mode, ok.BiasCorrection = ModeNoBiasCorrection, false
	assert.NoError(t, ok.Validate())
	ok = base
	ok.Beta1, ok.Beta2, ok.WeightDecay = 0, 0, 0
	assert.NoError(t, ok.Validate(), "β = 0 and wd = 0 are allowed")
}

func TestModeStringParse(t *testing.T) {
	for _, m := range []Mode{ModeTorch, ModeNoBiasCorrection} {
		got, err := ParseMode(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	_, err := ParseMode("adam")
	assert.ErrorContains(t, err, `"adam"`)
	assert.Equal(t, "unset", Mode(0).String())
	assert.Equal(t, "Mode(9)", Mode(9).String())
}

func TestCheckMode(t *testing.T) {
	a := FromScratch()
	assert.NoError(t, a.CheckMode(ModeTorch))
	err := a.CheckMode(ModeNoBiasCorrection)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "saved with AdamW mode none")
	assert.Contains(t, err.Error(), "uses mode torch")
	assert.ErrorContains(t, a.CheckMode(0), "unknown")
	a.Mode = 0
	assert.Error(t, a.CheckMode(ModeTorch))
}

func TestParamsLayout(t *testing.T) {
	a := FromScratch()
	p, err := a.Params(0, 1e-3, true)
	require.NoError(t, err)
	assert.Equal(t, float32(1e-3), p[0])
	assert.Equal(t, float32(0.9), p[1])
	assert.Equal(t, float32(0.95), p[2])
	assert.Equal(t, float32(1e-8), p[3])
	assert.Equal(t, float32(0.1), p[4])
	// Step 0 is the first update: t = 1, so the factors are 1/(1-β), for the float32 β
	// in slots 1-2 (which the kernel decays the moments with).
	assert.InEpsilon(t, 1/(1-0.9), float64(p[5]), 1e-6)
	assert.InEpsilon(t, 1/(1-0.95), float64(p[6]), 1e-6)
	assert.Equal(t, float32(1/(1-float64(p[1]))), p[5])
	assert.Equal(t, float32(1/(1-float64(p[2]))), p[6])

	p, err = a.Params(0, 1e-3, false)
	require.NoError(t, err)
	assert.Equal(t, float32(0), p[4], "no decay for norms, biases, embeddings")

	p, err = a.Params(9, 2e-4, true)
	require.NoError(t, err)
	assert.InDelta(t, 1/(1-math.Pow(0.9, 10)), float64(p[5]), 1e-6)
	assert.InDelta(t, 1/(1-math.Pow(0.95, 10)), float64(p[6]), 1e-6)

	// Factors fall towards 1 and stay finite for long runs; β2 close to 1 keeps precision.
	lo := LoRA()
	lo.Beta2 = 0.9999
	p, err = lo.Params(0, 1e-4, true)
	require.NoError(t, err)
	assert.Equal(t, float32(1/(1-float64(p[2]))), p[6])
	assert.InEpsilon(t, 1e4, float64(p[6]), 1e-3)
	p, err = lo.Params(10_000_000, 1e-4, true)
	require.NoError(t, err)
	assert.Equal(t, float32(1), p[5])
	assert.Equal(t, float32(1), p[6])

	nb := FromScratch()
	nb.Mode, nb.BiasCorrection = ModeNoBiasCorrection, false
	p, err = nb.Params(0, 1e-3, true)
	require.NoError(t, err)
	assert.Equal(t, float32(1), p[5])
	assert.Equal(t, float32(1), p[6])

	zero := FromScratch()
	zero.Beta1 = 0
	p, err = zero.Params(3, 1e-3, true)
	require.NoError(t, err)
	assert.Equal(t, float32(1), p[5], "β1 = 0 means no first-moment bias")

	_, err = a.Params(-1, 1e-3, true)
	assert.ErrorContains(t, err, "negative")
	_, err = a.Params(0, -1e-3, true)
	assert.ErrorContains(t, err, "learning rate")
	_, err = a.Params(0, math.NaN(), true)
	assert.ErrorContains(t, err, "learning rate")
	_, err = a.Params(0, 20, true)
	assert.ErrorContains(t, err, "WeightDecay", "lr·wd ≥ 1 at the given lr")
	_, err = a.Params(0, 20, false)
	assert.NoError(t, err, "without decay a large lr is allowed")
	p, err = a.Params(5, 0, true)
	require.NoError(t, err, "a schedule may reach lr 0")
	assert.Equal(t, float32(0), p[0])
}

// torchAdamW is the textbook AdamW of PyTorch's documentation, in float64, for one
// parameter vector at 1-based step t:
//
//	θ ← θ − γλθ
//	m ← β1 m + (1−β1) g,  v ← β2 v + (1−β2) g²
//	m̂ = m / (1−β1^t),     v̂ = v / (1−β2^t)
//	θ ← θ − γ m̂ / (√v̂ + ε)
//
// With correct false, m̂ = m and v̂ = v.
func torchAdamW(theta, g, m, v []float64, t int, lr, b1, b2, eps, wd float64, correct bool) {
	for i := range theta {
		theta[i] -= lr * wd * theta[i]
		m[i] = b1*m[i] + (1-b1)*g[i]
		v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
		mHat, vHat := m[i], v[i]
		if correct {
			mHat /= 1 - math.Pow(b1, float64(t))
			vHat /= 1 - math.Pow(b2, float64(t))
		}
		theta[i] -= lr * mHat / (math.Sqrt(vHat) + eps)
	}
}

func TestParamsStepMatchTorchAdamW(t *testing.T) {
	fs := FromScratch()
	none := FromScratch()
	none.Mode, none.BiasCorrection = ModeNoBiasCorrection, false
	lora := LoRA()
	for _, c := range []struct {
		name  string
		opt   AdamW
		decay bool
	}{
		{"from-scratch decay", fs, true},
		{"from-scratch no decay", fs, false},
		{"no bias correction", none, true},
		{"lora", lora, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n, steps = 64, 25
			rng := rand.New(rand.NewPCG(1, 2))
			sched := Cosine{Peak: 1e-2, Min: 1e-3, Warmup: 5, Total: steps}
			w := make([]float32, n)
			m, v := make([]float32, n), make([]float32, n)
			theta, mr, vr := make([]float64, n), make([]float64, n), make([]float64, n)
			target := make([]float64, n)
			for i := range w {
				x := 0.5 + rng.Float64()
				if rng.IntN(2) == 0 {
					x = -x
				}
				w[i] = float32(x)
				theta[i] = float64(w[i])
				target[i] = rng.NormFloat64()
			}
			for step := range steps {
				// A noisy quadratic-bowl gradient, computed from the reference weights
				// and fed identically to both paths.
				g := make([]float32, n)
				g64 := make([]float64, n)
				for i := range g {
					g[i] = float32((theta[i]-target[i])*(0.1+float64(i%7)) + 0.3*rng.NormFloat64())
					g64[i] = float64(g[i])
				}
				lr := sched.LR(step)
				p, err := c.opt.Params(step, lr, c.decay)
				require.NoError(t, err)
				kernelStep(w, g, m, v, p)
				wd := 0.0
				if c.decay {
					wd = c.opt.WeightDecay
				}
				torchAdamW(theta, g64, mr, vr, step+1, lr, c.opt.Beta1, c.opt.Beta2, c.opt.Eps, wd, c.opt.BiasCorrection)
				for i := range w {
					require.InEpsilonf(t, theta[i], float64(w[i]), 1e-6, "step %d w[%d]", step, i)
					// ggml reads β in float32: for β2 = 0.999, 1-β2 is off by 1.3e-5
					// relative, so v (unlike w) can only match to that order.
					require.InEpsilonf(t, vr[i], float64(v[i]), 5e-5, "step %d v[%d]", step, i)
					require.InDeltaf(t, mr[i], float64(m[i]), 1e-6*math.Max(1, math.Abs(mr[i])), "step %d m[%d]", step, i)
				}
			}
		})
	}
}

func TestStepFirstUpdateIsLR(t *testing.T) {
	// With bias correction, the first Adam update has magnitude ≈ lr whatever the
	// gradient's scale; a 1-indexed step passed as t would make it smaller.
	a := FromScratch()
	a.WeightDecay = 0
	p, err := a.Params(0, 1e-2, true)
	require.NoError(t, err)
	w := []float32{1, 1, 1, 1}
	g := []float32{1e-3, -5, 300, -0.2}
	m, v := make([]float32, 4), make([]float32, 4)
	kernelStep(w, g, m, v, p)
	for i := range w {
		assert.InDelta(t, 1-1e-2*math.Copysign(1, float64(g[i])), float64(w[i]), 1e-6, "w[%d]", i)
	}
}

func TestStepPanicsOnLengthMismatch(t *testing.T) {
	assert.PanicsWithValue(t, "train.kernelStep: lengths differ: w 2, g 1, m 2, v 2", func() {
		kernelStep(make([]float32, 2), make([]float32, 1), make([]float32, 2), make([]float32, 2), [7]float32{})
	})
}

// kernelStep applies one update of ggml's OPT_STEP_ADAMW kernel to w in place, reading the
// gradient g, updating the moments m and v in place, with p as returned by Params:
//
//	m = β1·m + (1-β1)·g
//	v = β2·v + (1-β2)·g²
//	w = w·(1-α·wd) - α·(m·b1h) / (sqrt(v·b2h) + ε)
//
// Arithmetic is done in float64 and the results are rounded to float32, as the kernel stores
// them. It panics if the four slices differ in length.
func kernelStep(w, g, m, v []float32, p [7]float32) {
	if len(g) != len(w) || len(m) != len(w) || len(v) != len(w) {
		panic(fmt.Sprintf("train.kernelStep: lengths differ: w %d, g %d, m %d, v %d", len(w), len(g), len(m), len(v)))
	}
	alpha, b1, b2, eps, wd := float64(p[0]), float64(p[1]), float64(p[2]), float64(p[3]), float64(p[4])
	b1h, b2h := float64(p[5]), float64(p[6])
	keep := 1 - alpha*wd
	for i := range w {
		gi := float64(g[i])
		mi := b1*float64(m[i]) + (1-b1)*gi
		vi := b2*float64(v[i]) + (1-b2)*gi*gi
		m[i], v[i] = float32(mi), float32(vi)
		w[i] = float32(float64(w[i])*keep - alpha*(mi*b1h)/(math.Sqrt(vi*b2h)+eps))
	}
}
