package recipes

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
)

// progressLine prints a recipe's per-step progress: one redrawn line when interactive, else a
// line every `every` steps and at the last.
type progressLine struct {
	out           io.Writer
	interactive   bool
	every, steps  int
	tokensPerStep int
}

func (p progressLine) printf(format string, args ...any) {
	if p.out != nil {
		fmt.Fprintf(p.out, format, args...)
	}
}

// step reports step (0-based) of a run that started at start at time t0.
func (p progressLine) step(step, start int, loss, lr float64, t0 time.Time) {
	done := step + 1 - start
	elapsed := time.Since(t0)
	eta := time.Duration(float64(elapsed) / float64(done) * float64(p.steps-step-1)).Round(time.Second)
	tps := float64(done*p.tokensPerStep) / elapsed.Seconds()
	if p.interactive {
		const width = 24
		filled := width * (step + 1) / p.steps
		bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
		p.printf("\rstep %*d/%d [%s] loss %.4f lr %.2e %6.0f tok/s ETA %-8s", len(fmt.Sprint(p.steps)), step+1, p.steps, bar, loss, lr, tps, eta)
		return
	}
	if (step+1)%max(p.every, 1) == 0 || step+1 == p.steps {
		p.printf("step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %s\n", step+1, p.steps, loss, lr, tps, eta)
	}
}

// end ends the redrawn line.
func (p progressLine) end() {
	if p.interactive {
		p.printf("\n")
	}
}

// keepOptions copies the options of a recipe's options struct named by their JSON keys from
// src to dst; each must be one of ResumableOptions and a field of T.
func keepOptions[T any](dst, src *T, keys []string) error {
	fields := map[string]int{}
	t := reflect.TypeFor[T]()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = i
	}
	var bad []string
	for _, k := range keys {
		i, ok := fields[k]
		if !ok || !slices.Contains(ResumableOptions, k) {
			bad = append(bad, k)
			continue
		}
		reflect.ValueOf(dst).Elem().Field(i).Set(reflect.ValueOf(src).Elem().Field(i))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s would change the run: a resumed run keeps its own (only %s may change)",
			strings.Join(bad, ", "), strings.Join(ResumableOptions, ", "))
	}
	return nil
}

// loop is the training loop the recipes share: from startStep to steps, each step takes the
// schedule's learning rate and AdamW's parameters, trains (step), checks the loss, logs and
// shows it; held-out evaluations every evalEvery steps; checkpoints every saveEvery steps or
// saveMinutes minutes, and at the end or on interruption, after which the final evaluation and
// run_end are logged.
type loop struct {
	run                  *runs.Run
	sched                train.Schedule
	adamw                train.AdamW
	steps, start         int
	evalEvery, saveEvery int
	saveMinutes          float64
	progress             progressLine
	command              string // how to resume: "toy train", "toy finetune"
	step                 func(step int, decay, noDecay [7]float32) (float32, error)
	evaluate             func() (float64, error)
	save                 func(step int) error
	// replicas, when the run is data-parallel, make every rank stop after the same step; only
	// rank 0 logs, shows progress, evaluates and saves.
	replicas             Replicas
	lastSave             time.Time
	elapsedSecs          float64 // the loop's time, for the summary
}

// do runs the loop until steps or until ctx is cancelled (res.Interrupted), and returns the
// step it stopped at.
func (l *loop) do(ctx context.Context, res *Result) (int, error) {
	var loss float32
	for _, e := range l.run.Events { // a resumed run interrupted before its first step ends with the last loss
		if st, ok := e.Data.(runs.Step); ok && st.Step < l.start {
			loss = float32(st.Loss)
		}
	}
	save := func(step int) error {
		l.lastSave = time.Now()
		return l.save(step)
	}
	follower := replicated(l.replicas) && l.replicas.Rank() != 0
	l.lastSave = time.Now()
	t0 := time.Now()
	step := l.start
	for ; step < l.steps; step++ {
		stop, err := agreeToStop(l.replicas, ctx.Err() != nil)
		if err != nil {
			return step, err
		}
		if stop {
			res.Interrupted = true
			break
		}
		lr := l.sched.LR(step)
		decay, err := l.adamw.Params(step, lr, true)
		if err != nil {
			return step, err
		}
		noDecay, _ := l.adamw.Params(step, lr, false)
		ts := time.Now()
		if loss, err = l.step(step, decay, noDecay); err != nil {
			return step, err
		}
		if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
			return step, fmt.Errorf("step %d: the loss is %v (lower the learning rate)", step, loss)
		}
		if follower {
			continue
		}
		tps := float64(l.progress.tokensPerStep) / time.Since(ts).Seconds()
		if err := l.run.LogStep(runs.Step{Step: step, Loss: float64(loss), LR: lr, TokensPerS: tps}); err != nil {
			return step, err
		}
		l.progress.step(step, l.start, float64(loss), lr, t0)
		if l.evalEvery > 0 && (step+1)%l.evalEvery == 0 && step+1 < l.steps {
			hl, err := l.evaluate()
			if err != nil {
				return step, err
			}
			if err := l.run.LogEval(runs.Eval{Step: step + 1, Loss: hl}); err != nil { // steps done, as the console says
				return step, err
			}
			l.progress.end()
			l.progress.printf("step %d: held-out loss %.4f\n", step+1, hl)
		}
		if l.saveEvery > 0 && (step+1)%l.saveEvery == 0 && step+1 < l.steps ||
			l.saveMinutes > 0 && time.Since(l.lastSave).Minutes() >= l.saveMinutes {
			if err := save(step + 1); err != nil {
				return step, err
			}
		}
	}
	l.progress.end()
	elapsed := time.Since(t0).Seconds()
	res.Steps, res.TrainLoss = step, float64(loss)
	if step > l.start {
		res.TokensPerS = float64(step-l.start) * float64(l.progress.tokensPerStep) / elapsed
	}
	l.elapsedSecs = elapsed
	if follower {
		return step, nil
	}
	if err := save(step); err != nil {
		return step, err
	}
	reason := runs.ReasonDone
	if res.Interrupted {
		reason = runs.ReasonInterrupted
		l.progress.printf("interrupted at step %d: checkpoint saved; continue with %s -resume %s\n", step, l.command, l.run.Dir)
	}
	var err error
	if res.HeldOutLoss, err = l.evaluate(); err != nil {
		return step, err
	}
	if err := l.run.LogEval(runs.Eval{Step: step, Loss: res.HeldOutLoss}); err != nil {
		return step, err
	}
	if err := l.run.LogEnd(runs.RunEnd{Step: step, Loss: float64(loss), Reason: reason}); err != nil {
		return step, err
	}
	return step, nil
}
