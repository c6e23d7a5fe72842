package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/generated/config"
)

// ResumableOptions are the options a resumed run may take from the caller (Scratch.ResumeKeep)
// because they do not change what the run computes: threads, how often it evaluates, saves
// and reports, and the final sample. The rest — the model, the data, the batch, the schedule,
// the optimizer, the seeds — are the run's own; a new total of steps is ResumeSteps.
// They are declared in specs/engines (resume:"keep").
var ResumableOptions = config.ResumableOptions()

// heldOutSeed seeds the choice of the held-out windows, the same at every evaluation.
const heldOutSeed = 0x5eed

// Result is what a run produced.
type Result struct {
	RunDir                 string
	Steps                  int
	TrainLoss, HeldOutLoss float64
	UnigramLoss            float64 // held-out loss of a unigram model of the training tokens
	TokensPerS             float64
	Sample                 string
	Interrupted            bool
}

const (
	trainFile, heldOutFile = "train.tok", "heldout.tok"
	modelFile, stateFile   = "model.gguf", "optimizer.gguf"
)

// progressLine prints a recipe's per-step progress: one redrawn line when interactive, else a
// line every `every` steps and at the last.
type progressLine struct {
	out           io.Writer
	interactive   bool
	every, steps  int
	tokensPerStep int    // the items one step trains on
	unit          string // what they are: "tok", "images"
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
		p.printf("\rstep %*d/%d [%s] loss %.4f lr %.2e %6.0f %s/s ETA %-8s", len(fmt.Sprint(p.steps)), step+1, p.steps, bar, loss, lr, tps, p.unit, eta)
		return
	}
	if (step+1)%max(p.every, 1) == 0 || step+1 == p.steps {
		p.printf("step %d/%d loss %.4f lr %.2e %.0f %s/s ETA %s\n", step+1, p.steps, loss, lr, tps, p.unit, eta)
	}
}

// end ends the redrawn line.
func (p progressLine) end() {
	if p.interactive {
		p.printf("\n")
	}
}

// keepOptions copies the options of a recipe's options struct named by their JSON keys from
// src to dst; each must be one of ResumableOptions and a field of T (or of an option group it
// embeds).
func keepOptions[T any](dst, src *T, keys []string) error {
	fields := map[string][]int{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && !f.Anonymous && name != "" && name != "-" {
			fields[name] = f.Index
		}
	}
	var bad []string
	for _, k := range keys {
		i, ok := fields[k]
		if !ok || !slices.Contains(ResumableOptions, k) {
			bad = append(bad, k)
			continue
		}
		reflect.ValueOf(dst).Elem().FieldByIndex(i).Set(reflect.ValueOf(src).Elem().FieldByIndex(i))
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
	evaluate             func() (runs.Eval, error) // the held-out loss (and a classifier's accuracy); the loop sets Step
	save                 func(step int) error
	// finite reports a trained tensor that holds a NaN or an infinity (training.Trainer.CheckFinite):
	// the loop saves no checkpoint of such weights.
	finite func() error
	// replicas, when the run is data-parallel, make every rank stop after the same step; only
	// rank 0 logs, shows progress, evaluates and saves.
	replicas    Replicas
	lastSave    time.Time
	elapsedSecs float64 // the loop's time, for the summary
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
	saved := l.start // the step of the run's latest checkpoint (0: none, but for a resumed run)
	save := func(step int) error {
		l.lastSave = time.Now()
		if l.finite != nil {
			if err := l.finite(); err != nil {
				return fmt.Errorf("step %d: the weights are not finite (%w), so no checkpoint is saved; %s", step, err, keptCheckpoint(saved))
			}
		}
		if err := l.save(step); err != nil {
			return err
		}
		saved = step
		return nil
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
		if loss, err = l.step(step, decay, noDecay); err == nil && (math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0)) {
			err = &training.NonFiniteError{Quantity: "loss", Value: float64(loss)}
		}
		if nf := (*training.NonFiniteError)(nil); errors.As(err, &nf) {
			return step, fmt.Errorf("step %d: %w; stopped: %s", step, err, keptCheckpoint(saved))
		} else if err != nil {
			return step, err
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
			if _, err := l.logEval(step+1, true); err != nil { // steps done, as the console says
				return step, err
			}
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
	if res.HeldOutLoss, err = l.logEval(step, false); err != nil {
		return step, err
	}
	if err := l.run.LogEnd(runs.RunEnd{Step: step, Loss: float64(loss), Reason: reason}); err != nil {
		return step, err
	}
	return step, nil
}

// keptCheckpoint says which checkpoint a run that stops at a non-finite step keeps: the one
// of step saved, or none (saved 0).
func keptCheckpoint(saved int) string {
	if saved == 0 {
		return "the run has no checkpoint"
	}
	return fmt.Sprintf("its checkpoint of step %d is kept", saved)
}

// logEval evaluates the model after step steps, logs the evaluation and, when show is set,
// prints it (the final evaluation is the recipe's summary's).
func (l *loop) logEval(step int, show bool) (float64, error) {
	e, err := l.evaluate()
	if err != nil {
		return 0, err
	}
	if math.IsNaN(e.Loss) || math.IsInf(e.Loss, 0) {
		return 0, fmt.Errorf("after step %d: the held-out loss is %v: a weight of the model is not finite", step, e.Loss)
	}
	e.Step = step
	if err := l.run.LogEval(e); err != nil {
		return 0, err
	}
	if show {
		l.progress.end()
		if e.Accuracy != nil {
			l.progress.printf("step %d: held-out loss %.4f, accuracy %.2f%%\n", step, e.Loss, 100**e.Accuracy)
		} else {
			l.progress.printf("step %d: held-out loss %.4f\n", step, e.Loss)
		}
	}
	return e.Loss, nil
}

// lossEval is an evaluation of the held-out loss alone: a language model's.
func lossEval(loss func() (float64, error)) func() (runs.Eval, error) {
	return func() (runs.Eval, error) {
		l, err := loss()
		return runs.Eval{Loss: l}, err
	}
}

// reopenOptions opens the run in dir to resume it and reads the options of its latest
// run_start (config{}; a legacy one's Go field names taken as T's JSON keys) into opts, then
// calls restore with opts as the caller gave them, to put back what stays the caller's: the
// output, the resume settings, the ResumeKeep options. what names the options in errors, which
// name the run; the run is closed on error. The run's writer (lead) holds its lock
// (runs.OpenRun); the other ranks of a data-parallel run follow it (runs.Follow).
func reopenOptions[T any](dir string, lead bool, opts *T, what string, restore func(saved *T) error) (*runs.Run, *runs.RunStart, error) {
	open := runs.OpenRun
	if !lead {
		open = runs.Follow
	}
	run, err := open(dir)
	if err != nil {
		return nil, nil, err
	}
	start, err := lastRunStart(run)
	if err == nil {
		saved := *opts
		raw, _ := start.Config.(json.RawMessage)
		if start.Legacy { // a run logged before config{} had snake_case keys
			raw, err = snakeKeys(raw, reflect.TypeFor[T]())
		}
		if err == nil {
			err = json.Unmarshal(raw, opts)
		}
		if err != nil {
			err = fmt.Errorf("reading the %s options: %w", what, err)
		} else {
			err = restore(&saved)
		}
	}
	if err != nil {
		run.Close()
		return nil, nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	return run, start, nil
}

// lastRunStart is a run's latest run_start: the options a resumed run continues with.
func lastRunStart(run *runs.Run) (*runs.RunStart, error) {
	var start *runs.RunStart
	for _, e := range run.Events {
		if rs, ok := e.Data.(runs.RunStart); ok {
			start = &rs
		}
	}
	if start == nil {
		return nil, fmt.Errorf("no run_start event in %s", run.EventsPath())
	}
	return start, nil
}

// resumedTotal is the total of steps of a run resumed at step: its own (steps), or
// resumeSteps when positive (the schedule then follows the new total).
func resumedTotal(step, steps, resumeSteps int) (int, error) {
	if resumeSteps > 0 {
		if resumeSteps <= step {
			return 0, fmt.Errorf("-steps %d: the run is already at step %d; give more steps to extend it", resumeSteps, step)
		}
		return resumeSteps, nil
	}
	if step >= steps {
		return 0, fmt.Errorf("the run is finished (%d of %d steps); extend it with a larger total of steps (-steps)", step, steps)
	}
	return steps, nil
}

// loadOptimizerState restores a resumed run's AdamW moments from path, refusing a state
// saved under another AdamW mode than adamw's.
func loadOptimizerState(tr *training.Trainer, path string, adamw train.AdamW) error {
	values, err := tr.LoadState(path)
	if err != nil {
		return err
	}
	mode, _ := values["toy.train.adamw_mode"].(string)
	saved, err := train.ParseMode(mode)
	if err != nil {
		return fmt.Errorf("resume: optimizer state: %w", err)
	}
	if err := adamw.CheckMode(saved); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// gitInfo is the run_start's git record when asked for (and the working directory is in a
// repository).
func gitInfo(asked bool) *runs.GitInfo {
	if !asked {
		return nil
	}
	if sha, branch, ok := runs.Git("."); ok {
		return &runs.GitInfo{SHA: sha, Branch: branch}
	}
	return nil
}

// absPath is p made absolute, so that a run resumed from another working directory finds the
// file its run_start names; "" and paths Abs cannot resolve stay as they are.
func absPath(p string) string {
	if p == "" {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// savedPath finds a file that a run's run_start names by a path relative to the working
// directory the run was started from (runs written before paths were stored absolute): p
// itself when it is absolute or exists from here, else p under the start directory, which the
// run directory dir and the runs directory runsDir the run was created in (as it was given
// then) tell when runsDir is relative: dir is <start>/<runsDir>/<id>. Otherwise p, whose error
// names it when it is read.
func savedPath(p, dir, runsDir string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if runsDir == "" || filepath.IsAbs(runsDir) {
		return p
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return p
	}
	start, rel := filepath.Dir(abs), filepath.Clean(runsDir)
	for rel != "." {
		if filepath.Base(start) != filepath.Base(rel) {
			return p
		}
		start, rel = filepath.Dir(start), filepath.Dir(rel)
	}
	if q := filepath.Join(start, p); fileExists(q) {
		return q
	}
	return p
}

// fileExists reports whether path names something that exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ensureHeldOut makes sure both parts hold text when the hash split left one of them empty
// (a small corpus): a single document keeps its first 95% for training and holds out its last
// 5%, whichever part the hash gave it; of several documents all on one side, the last one
// becomes the held-out part and the others the training part.
func ensureHeldOut(trainDocs, heldDocs []data.Document, source string) ([]data.Document, []data.Document, error) {
	all := trainDocs
	switch {
	case len(trainDocs) > 0 && len(heldDocs) > 0:
		return trainDocs, heldDocs, nil
	case len(trainDocs) == 0:
		all = heldDocs
	}
	switch {
	case len(all) > 1:
		return all[:len(all)-1], all[len(all)-1:], nil
	case len(all) == 1:
		d := all[0]
		cut := len(d.Text) - len(d.Text)/20
		return []data.Document{{Path: d.Path, Text: d.Text[:cut]}}, []data.Document{{Path: d.Path, Text: d.Text[cut:]}}, nil
	}
	if source == "" {
		source = "the Go source corpus"
	}
	return nil, nil, fmt.Errorf("%s holds no text", source)
}

// writeTokens tokenizes docs (each followed by the end-of-text token) into a token file.
func writeTokens(path string, docs []data.Document, tok *tokenizer.Tokenizer, eos int32) error {
	w, err := data.NewWriter(path, 4, tok.VocabSize())
	if err != nil {
		return err
	}
	for _, d := range docs {
		ids := tok.Encode(string(d.Text), tokenizer.EncodeOptions{})
		if eos >= 0 {
			ids = append(ids, eos)
		}
		if err := w.Write(ids); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// snakeKeys rewrites a JSON object written from a struct of type t without JSON tags (its keys
// the Go field names) to the keys t's tags give them, recursing into struct fields. Keys that
// name no field are dropped.
func snakeKeys(raw json.RawMessage, t reflect.Type) (json.RawMessage, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return raw, err
	}
	out := map[string]json.RawMessage{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// An embedded group of options: its fields were written at this level.
			sub, err := snakeKeys(raw, f.Type)
			if err != nil {
				return nil, err
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sub, &m); err != nil {
				return nil, err
			}
			maps.Copy(out, m)
			continue
		}
		v, ok := in[f.Name]
		if !ok || name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Type.Kind() == reflect.Struct {
			var err error
			if v, err = snakeKeys(v, f.Type); err != nil {
				return nil, err
			}
		}
		out[name] = v
	}
	return json.Marshal(out)
}

// split cuts a flat batch into windows.
func split(flat []int32, window int) [][]int32 {
	var out [][]int32
	for i := 0; i+window <= len(flat); i += window {
		out = append(out, flat[i:i+window])
	}
	return out
}

// writeIDs writes token ids (or mask values) into a token file of width bytes a value.
func writeIDs(path string, ids []int32, vocab, width int) error {
	w, err := data.NewWriter(path, width, vocab)
	if err != nil {
		return err
	}
	if err := w.Write(ids); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
