// Package sampleparams holds the parameters of drawing a token from a model's logits, below
// both the sampler (engines/sample, whose Params is this package's) and the device sampler
// (cuda/), which decides from them what it can compute. The fields, their defaults and their
// flags are declared once, in specs/engines' Sampling options (generated/config.Sampling);
// this package adds the rules that span fields.
package sampleparams

import (
	"errors"
	"fmt"
	"math"

	"github.com/toyml/toy/generated/config"
)

// Params configures a sampler: config.Sampling's fields, with its methods. The zero value is
// not valid (TopP and RepeatPenalty must be 1 to be off); start from DefaultParams or
// GreedyParams.
type Params config.Sampling

// DefaultParams returns llama.cpp's default sampling settings, the Sampling spec's defaults:
// temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty (over a window of
// 64 tokens when enabled) and seed 0.
func DefaultParams() Params { return Params(config.DefaultSampling()) }

// GreedyParams returns settings for greedy decoding with every filter off (the Sampling spec's
// greedy preset).
func GreedyParams() Params {
	p, _ := config.SamplingPreset("greedy")
	return Params(p)
}

// Validate reports every out-of-range setting, or nil when p is usable.
func (p Params) Validate() error {
	var errs []error
	if math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0) || p.Temperature < 0 {
		errs = append(errs, fmt.Errorf("sample: temperature %v must be a finite number >= 0 (0 = greedy)", p.Temperature))
	}
	if p.TopK < 0 {
		errs = append(errs, fmt.Errorf("sample: top-k %d must be >= 0 (0 = off)", p.TopK))
	}
	if !(p.TopP > 0 && p.TopP <= 1) {
		errs = append(errs, fmt.Errorf("sample: top-p %v must be in (0, 1] (1 = off)", p.TopP))
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		errs = append(errs, fmt.Errorf("sample: min-p %v must be in [0, 1] (0 = off)", p.MinP))
	}
	if !(p.RepeatPenalty > 0) || math.IsInf(p.RepeatPenalty, 1) {
		errs = append(errs, fmt.Errorf("sample: repeat penalty %v must be a finite number > 0 (1 = off)", p.RepeatPenalty))
	}
	if p.RepeatLastN < -1 {
		errs = append(errs, fmt.Errorf("sample: repeat-last-n %d must be >= -1 (0 = off, -1 = whole history)", p.RepeatLastN))
	}
	if !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2) {
		errs = append(errs, fmt.Errorf("sample: frequency penalty %v must be in [-2, 2] (0 = off)", p.FrequencyPenalty))
	}
	if !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2) {
		errs = append(errs, fmt.Errorf("sample: presence penalty %v must be in [-2, 2] (0 = off)", p.PresencePenalty))
	}
	for t, b := range p.LogitBias {
		if t < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
			errs = append(errs, fmt.Errorf("sample: logit bias %v for token %d: want a token id >= 0 and a finite bias", b, t))
			break
		}
	}
	return errors.Join(errs...)
}

// String is p as the commands print it: each setting by name, the logit bias by its size.
func (p Params) String() string {
	s := fmt.Sprintf("temperature %g, top-k %d, top-p %g, min-p %g, repeat penalty %g (last %d), frequency penalty %g, presence penalty %g, seed %d",
		p.Temperature, p.TopK, p.TopP, p.MinP, p.RepeatPenalty, p.RepeatLastN, p.FrequencyPenalty, p.PresencePenalty, p.Seed)
	if len(p.LogitBias) > 0 {
		s += fmt.Sprintf(", logit bias on %d token", len(p.LogitBias))
		if len(p.LogitBias) > 1 {
			s += "s"
		}
	}
	return s
}

// AdjustsLogits reports whether the logit bias or a penalty changes logits before the
// filters: a sampler that computes only temperature, top-k and top-p (an argmax at
// temperature 0) does not sample as p says.
func (p Params) AdjustsLogits() bool {
	return len(p.LogitBias) > 0 || p.RepeatLastN != 0 && (p.RepeatPenalty != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0)
}
