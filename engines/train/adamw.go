package train

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Mode names how the bias-correction slots 5 and 6 of the 7-float AdamW parameter tensor
// are filled. The zero Mode is unset and fails validation, so a hand-built AdamW must
// choose one explicitly.
type Mode int

const (
	// ModeTorch fills slots 5-6 with 1/(1-β1^t) and 1/(1-β2^t), t = step+1, as PyTorch's
	// AdamW and ggml-opt do. It requires AdamW.BiasCorrection to be true.
	ModeTorch Mode = iota + 1
	// ModeNoBiasCorrection fills slots 5-6 with 1, so the raw moment estimates are used.
	// It requires AdamW.BiasCorrection to be false.
	ModeNoBiasCorrection
)

// String returns the mode's name as ParseMode accepts it: "torch" or "none".
func (m Mode) String() string {
	switch m {
	case ModeTorch:
		return "torch"
	case ModeNoBiasCorrection:
		return "none"
	case 0:
		return "unset"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// known reports whether m is ModeTorch or ModeNoBiasCorrection.
func (m Mode) known() bool { return m == ModeTorch || m == ModeNoBiasCorrection }

// biasCorrects reports whether the mode applies bias correction.
func (m Mode) biasCorrects() bool { return m == ModeTorch }

// ParseMode returns the Mode named s ("torch" or "none", as Mode.String writes them).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "torch":
		return ModeTorch, nil
	case "none":
		return ModeNoBiasCorrection, nil
	}
	return 0, fmt.Errorf("train: unknown AdamW mode %q (want \"torch\" or \"none\")", s)
}

// AdamW holds the hyper-parameters of decoupled-weight-decay Adam as ggml's
// OPT_STEP_ADAMW kernel applies it:
//
//	m = β1·m + (1-β1)·g
//	v = β2·v + (1-β2)·g²
//	w = w·(1 - lr·wd) - lr·(m·b1h) / (sqrt(v·b2h) + ε)
//
// where b1h, b2h are the bias-correction factors chosen by Mode. BiasCorrection and Mode
// state the same choice twice on purpose: Validate rejects a disagreement rather than
// silently picking one.
type AdamW struct {
	// LR is the base learning rate (alpha); a schedule usually supplies the per-step value
	// passed to Params instead.
	LR float64 `json:"lr"`
	// Beta1 is the decay rate of the first-moment (mean) estimate, in [0, 1).
	Beta1 float64 `json:"beta1"`
	// Beta2 is the decay rate of the second-moment (uncentred variance) estimate, in [0, 1).
	Beta2 float64 `json:"beta2"`
	// Eps is added to the square root of the second moment; it must be positive.
	Eps float64 `json:"eps"`
	// WeightDecay is the decoupled weight-decay coefficient (≥ 0), applied as w·(1-lr·wd).
	WeightDecay float64 `json:"weight_decay"`
	// BiasCorrection says whether the moment estimates are bias-corrected; it must agree
	// with Mode.
	BiasCorrection bool `json:"bias_correction"`
	// Mode says how Params fills the bias-correction slots.
	Mode Mode `json:"mode"`
}

// FromScratch returns AdamW settings for pretraining a small language model from random
// initialisation: lr 3e-4, β1 0.9, β2 0.95, ε 1e-8, weight decay 0.1, PyTorch-style bias
// correction.
func FromScratch() AdamW {
	return AdamW{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1,
		BiasCorrection: true, Mode: ModeTorch}
}

// LoRA returns AdamW settings for fine-tuning low-rank adapters: lr 2e-4, β1 0.9,
// β2 0.999, ε 1e-8, no weight decay, PyTorch-style bias correction.
func LoRA() AdamW {
	return AdamW{LR: 2e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0,
		BiasCorrection: true, Mode: ModeTorch}
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate reports the first problem with the settings: LR must be positive and finite;
// Beta1 and Beta2 in [0, 1) (also after rounding to float32, which is what ggml reads);
// Eps positive and finite (and non-zero as a float32); WeightDecay non-negative and finite
// with LR·WeightDecay < 1; Mode must be ModeTorch or ModeNoBiasCorrection and agree with
// BiasCorrection.
func (a AdamW) Validate() error {
	var errs []error
	if !(a.LR > 0) || !finite(a.LR) || !(float32(a.LR) > 0) {
		errs = append(errs, fmt.Errorf("learning rate %g must be positive and finite", a.LR))
	}
	for _, b := range []struct {
		name string
		v    float64
	}{{"Beta1", a.Beta1}, {"Beta2", a.Beta2}} {
		switch {
		case !(b.v >= 0 && b.v < 1):
			errs = append(errs, fmt.Errorf("%s %g must be in [0, 1)", b.name, b.v))
		case float32(b.v) >= 1:
			errs = append(errs, fmt.Errorf("%s %g rounds to 1 in float32, so its moment would never update", b.name, b.v))
		}
	}
	if !(a.Eps > 0) || !finite(a.Eps) || !(float32(a.Eps) > 0) {
		errs = append(errs, fmt.Errorf("Eps %g must be positive and finite (and non-zero in float32)", a.Eps))
	}
	if !(a.WeightDecay >= 0) || !finite(a.WeightDecay) {
		errs = append(errs, fmt.Errorf("WeightDecay %g must be non-negative and finite", a.WeightDecay))
	} else if finite(a.LR) && a.LR*a.WeightDecay >= 1 {
		errs = append(errs, fmt.Errorf("LR·WeightDecay = %g must be < 1, or decay would flip or zero the weights", a.LR*a.WeightDecay))
	}
	switch {
	case !a.Mode.known():
		errs = append(errs, fmt.Errorf("Mode %v is not a known AdamW mode (want ModeTorch or ModeNoBiasCorrection)", a.Mode))
	case a.Mode.biasCorrects() != a.BiasCorrection:
		errs = append(errs, fmt.Errorf("BiasCorrection=%t contradicts Mode %v (which %s bias correction); set both consistently",
			a.BiasCorrection, a.Mode, map[bool]string{true: "applies", false: "omits"}[a.Mode.biasCorrects()]))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("train: invalid AdamW settings: %w", errors.Join(errs...))
}

// CheckMode returns an error unless optimizer state (the m and v moments) saved under mode
// saved may be resumed with these settings, that is unless saved equals a.Mode. The moments
// themselves evolve the same way in every mode, but resuming under a different mode would
// change the size of every later update, so a mismatch is refused rather than absorbed.
func (a AdamW) CheckMode(saved Mode) error {
	if !saved.known() {
		return fmt.Errorf("train: saved optimizer state has unknown AdamW mode %v", saved)
	}
	if !a.Mode.known() {
		return fmt.Errorf("train: AdamW mode %v is not known; cannot resume state saved with mode %v", a.Mode, saved)
	}
	if saved != a.Mode {
		return fmt.Errorf("train: optimizer state was saved with AdamW mode %v but this run uses mode %v; "+
			"resume with Mode %v or start the optimizer state afresh", saved, a.Mode, saved)
	}
	return nil
}

// Params returns the 7 floats ggml's OPT_STEP_ADAMW reads for the 0-indexed optimizer
// step step (0 is the first update) at learning rate lr (usually a Schedule's value;
// lr 0 is allowed so a schedule may reach zero):
//
//	[lr, β1, β2, ε, wd, b1h, b2h]
//
// wd is a.WeightDecay when decay is true and 0 otherwise: norms, biases and embeddings
// take their own params tensor built with decay false. In ModeTorch b1h = 1/(1-β1^(step+1))
// and b2h = 1/(1-β2^(step+1)), computed from the float32-rounded betas the kernel uses;
// in ModeNoBiasCorrection both are 1. It returns an error if
// the settings are invalid, step is negative, or lr is negative or not finite.
func (a AdamW) Params(step int, lr float64, decay bool) ([7]float32, error) {
	var p [7]float32
	if err := a.Validate(); err != nil {
		return p, err
	}
	if step < 0 {
		return p, fmt.Errorf("train: AdamW step %d is negative (steps are 0-indexed; 0 is the first update)", step)
	}
	if !(lr >= 0) || !finite(lr) {
		return p, fmt.Errorf("train: AdamW learning rate %g at step %d must be non-negative and finite", lr, step)
	}
	wd := 0.0
	if decay {
		wd = a.WeightDecay
		if lr*wd >= 1 {
			return p, fmt.Errorf("train: lr·WeightDecay = %g at step %d must be < 1", lr*wd, step)
		}
	}
	b1h, b2h := 1.0, 1.0
	if a.Mode == ModeTorch {
		// The kernel decays the moments with the float32 betas, so correct for those
		// same values: for β2 = 0.999 the float64 and float32 values of 1-β2 differ by
		// 1.3e-5 relative, which would otherwise leave that much bias in v̂.
		t := float64(step) + 1
		b1h = biasFactor(float64(float32(a.Beta1)), t)
		b2h = biasFactor(float64(float32(a.Beta2)), t)
	}
	p = [7]float32{float32(lr), float32(a.Beta1), float32(a.Beta2), float32(a.Eps), float32(wd),
		float32(b1h), float32(b2h)}
	return p, nil
}

// biasFactor returns 1/(1-beta^t) for beta in [0, 1) and t ≥ 1, computing 1-beta^t as
// -expm1(t·ln beta) so that beta close to 1 keeps its precision.
func biasFactor(beta, t float64) float64 {
	if beta == 0 {
		return 1
	}
	return 1 / -math.Expm1(t*math.Log(beta))
}
