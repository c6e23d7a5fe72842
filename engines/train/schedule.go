package train

import (
	"fmt"
	"math"
	"strings"
)

// Schedule gives the learning rate for each 0-indexed optimizer step (0 is the first
// update), to be passed to AdamW.Params.
type Schedule interface {
	// LR returns the learning rate of step step.
	LR(step int) float64
}

// Constant is a Schedule whose learning rate is Rate at every step. (The field cannot be
// called LR, as that is the Schedule method.)
type Constant struct {
	// Rate is the learning rate of every step.
	Rate float64
}

// LR returns c.Rate whatever the step.
func (c Constant) LR(step int) float64 { return c.Rate }

// Validate reports an error unless Rate is positive and finite.
func (c Constant) Validate() error {
	if !(c.Rate > 0) || !finite(c.Rate) {
		return fmt.Errorf("train: constant learning rate %g must be positive and finite", c.Rate)
	}
	return nil
}

// Cosine is linear warmup followed by cosine decay:
//
//   - step < Warmup: Peak·(step+1)/Warmup. Warmup starts at Peak/Warmup rather than 0, so
//     no step is spent with a zero learning rate, and step Warmup-1 reaches Peak.
//   - Warmup ≤ step ≤ Total: Min + (Peak-Min)·(1+cos(π·(step-Warmup)/(Total-Warmup)))/2,
//     which is Peak at step Warmup and Min at step Total.
//   - step > Total: Min.
//
// For a run of N updates (steps 0..N-1) set Total = N; the last update then runs just above
// Min. Negative steps are treated as step 0.
type Cosine struct {
	// Peak is the learning rate at the end of warmup.
	Peak float64
	// Min is the learning rate at step Total and after; 0 ≤ Min ≤ Peak.
	Min float64
	// Warmup is the number of linear warmup steps (0 for none).
	Warmup int
	// Total is the step at which the decay reaches Min; it must exceed Warmup.
	Total int
}

// LR returns the learning rate of step step as described on Cosine.
func (c Cosine) LR(step int) float64 {
	if step < 0 {
		step = 0
	}
	if step < c.Warmup {
		return c.Peak * float64(step+1) / float64(c.Warmup)
	}
	if step >= c.Total {
		return c.Min
	}
	progress := float64(step-c.Warmup) / float64(c.Total-c.Warmup)
	return c.Min + (c.Peak-c.Min)*0.5*(1+math.Cos(math.Pi*progress))
}

// Validate reports an error unless Peak is positive and finite, 0 ≤ Min ≤ Peak,
// Warmup ≥ 0 and Total > Warmup.
func (c Cosine) Validate() error {
	switch {
	case !(c.Peak > 0) || !finite(c.Peak):
		return fmt.Errorf("train: cosine peak learning rate %g must be positive and finite", c.Peak)
	case !(c.Min >= 0) || !(c.Min <= c.Peak):
		return fmt.Errorf("train: cosine minimum learning rate %g must be in [0, peak %g]", c.Min, c.Peak)
	case c.Warmup < 0:
		return fmt.Errorf("train: cosine warmup %d must not be negative", c.Warmup)
	case c.Total <= c.Warmup:
		return fmt.Errorf("train: cosine total steps %d must exceed warmup %d", c.Total, c.Warmup)
	}
	return nil
}

// ScheduleNames returns the names ParseSchedule accepts.
func ScheduleNames() []string { return []string{"cosine", "constant"} }

// ParseSchedule builds a validated schedule by name (case-insensitive): "cosine" gives
// Cosine{peak, min, warmup, total}; "constant" gives Constant{peak} and ignores min, warmup
// and total, so that command-line defaults for them do not get in the way. Unknown names
// and invalid values are errors.
func ParseSchedule(name string, peak, min float64, warmup, total int) (Schedule, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "cosine":
		c := Cosine{Peak: peak, Min: min, Warmup: warmup, Total: total}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return c, nil
	case "constant":
		c := Constant{Rate: peak}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("train: unknown learning-rate schedule %q (want one of %q)", name, ScheduleNames())
}
