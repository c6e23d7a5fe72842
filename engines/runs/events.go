package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/toyml/toy/ggml"
)

// SchemaV1 is the schema name every run_start event carries.
const SchemaV1 = "toy/v1"

// Event types, the "type" field of each line.
const (
	TypeRunStart = "run_start" // RunStart
	TypeStep     = "step"      // Step
	TypeEval     = "eval"      // Eval
	TypeRunEnd   = "run_end"   // RunEnd
)

// Reasons a run ends, the "reason" field of run_end.
const (
	ReasonDone        = "done"        // the run reached its last step
	ReasonInterrupted = "interrupted" // the run was stopped early (a signal, a user)
)

// GitInfo identifies the source a run was built from.
type GitInfo struct {
	// SHA is the commit hash of HEAD.
	SHA string `json:"sha"`
	// Branch is the checked-out branch, empty when HEAD is detached.
	Branch string `json:"branch"`
}

// Backend describes the compute backend a run ran on. Run.LogStart stamps it from the build
// (ThisBackend); callers do not choose it.
type Backend struct {
	// Kind is the backend toy was built for: "cpu", "cuda" or "metal" (ggml.BackendKind).
	Kind string `json:"kind"`
	// GGML is the ggml module linked, path and version.
	GGML string `json:"ggml,omitempty"`
	// CPUFeatures are the SIMD extensions ggml's CPU kernels were compiled for.
	CPUFeatures []string `json:"cpu_features,omitempty"`
}

// ThisBackend describes the backend of this build.
func ThisBackend() Backend {
	bi := ggml.Build()
	return Backend{Kind: ggml.BackendKind, GGML: bi.GGMLModule, CPUFeatures: bi.CPUFeatures}
}

// RunStart is the first event of a run (and of each resumption of it).
type RunStart struct {
	// RunID is the run's id; Run.LogStart fills it in when empty.
	RunID string
	// Time is when the run started; Run.LogStart uses the current time when zero.
	Time time.Time
	// Backend is the compute backend. Run.LogStart sets it to ThisBackend(), replacing any
	// value given; a log from before it was an object reads back with only Kind set.
	Backend Backend
	// Model is the model configuration ("model"): any value encoding/json can marshal, with
	// the GGUF/spec names as its keys (config.Llama's JSON). Events read back by ReadEvents
	// hold it as a json.RawMessage, to unmarshal into the caller's type.
	Model any
	// Config is the training configuration ("config"), handled like Model. In a log from
	// before "config" it holds the old "training" object, whose keys are Go field names.
	Config any
	// Seeds names every random seed the run depends on, e.g. "init" (the initial weights)
	// and "data" (the batch order). A log from before "seeds" reads back as {"seed": seed}.
	Seeds map[string]uint64
	// Git is the source revision, recorded only when non-nil.
	Git *GitInfo
	// Legacy is true for a run_start read from a log written before run_start took its
	// current shape (a string "backend", "training" and one "seed"); Config then has the old
	// keys. It is ignored when writing.
	Legacy bool
}

// Step records one optimizer step.
type Step struct {
	// Step is the step number.
	Step int
	// Loss is the training loss of the step.
	Loss float64
	// LR is the learning rate used for the step.
	LR float64
	// TokensPerS is the training throughput in tokens per second.
	TokensPerS float64
	// Time is when the step finished; Run.LogStep uses the current time when zero.
	Time time.Time
}

// Eval records a loss on held-out data.
type Eval struct {
	// Step is the training step the evaluation was made at.
	Step int
	// Loss is the held-out loss.
	Loss float64
	// Accuracy is a classifier's held-out accuracy in [0, 1] ("accuracy"); nil for a
	// language model's evaluation, and then not written.
	Accuracy *float64
	// Confusion is a classifier's held-out confusion matrix ("confusion"): Confusion[t][p]
	// images of class t were predicted as class p. Nil for a language model, and then not
	// written.
	Confusion [][]int
}

// RunEnd is the last event of a run (or of one resumption of it).
type RunEnd struct {
	// Step is the final step number.
	Step int
	// Loss is the final training loss.
	Loss float64
	// Time is when the run ended; Run.LogEnd uses the current time when zero.
	Time time.Time
	// Reason is ReasonDone or ReasonInterrupted.
	Reason string
}

// Event is one parsed line of an event log.
type Event struct {
	// Type is the event type: TypeRunStart, TypeStep, TypeEval or TypeRunEnd.
	Type string
	// Line is the 1-based line number in the log.
	Line int
	// Data is the decoded event: a RunStart, Step, Eval or RunEnd value matching Type.
	Data any
}

// jfloat is a float64 that survives JSON: NaN and ±Inf become the strings "NaN", "+Inf" and
// "-Inf" instead of failing the marshal.
type jfloat float64

func (f jfloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *jfloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = jfloat(math.NaN())
		return nil
	case `"+Inf"`:
		*f = jfloat(math.Inf(1))
		return nil
	case `"-Inf"`:
		*f = jfloat(math.Inf(-1))
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("want a number, \"NaN\", \"+Inf\" or \"-Inf\", got %s", b)
	}
	*f = jfloat(v)
	return nil
}

// The wire forms: the public structs plus the type (and schema) fields, with NaN-safe floats.

type runStartJSON struct {
	Schema  string            `json:"schema"`
	Type    string            `json:"type"`
	RunID   string            `json:"run_id"`
	Time    time.Time         `json:"time"`
	Backend json.RawMessage   `json:"backend"`
	Model   json.RawMessage   `json:"model"`
	Config  json.RawMessage   `json:"config"`
	Seeds   map[string]uint64 `json:"seeds"`
	Git     *GitInfo          `json:"git,omitempty"`
}

// runStartV0JSON holds the fields of the first run_start shape that the current one renamed
// or reshaped: "backend" a string, "training" for "config", one "seed" for "seeds".
type runStartV0JSON struct {
	Training json.RawMessage `json:"training"`
	Seed     uint64          `json:"seed"`
}

type stepJSON struct {
	Type       string    `json:"type"`
	Step       int       `json:"step"`
	Loss       jfloat    `json:"loss"`
	LR         jfloat    `json:"lr"`
	TokensPerS jfloat    `json:"tokens_per_s"`
	Time       time.Time `json:"time"`
}

type evalJSON struct {
	Type      string  `json:"type"`
	Step      int     `json:"step"`
	Loss      jfloat  `json:"loss"`
	Accuracy  *jfloat `json:"accuracy,omitempty"`
	Confusion [][]int `json:"confusion,omitempty"`
}

type runEndJSON struct {
	Type   string    `json:"type"`
	Step   int       `json:"step"`
	Loss   jfloat    `json:"loss"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
}

// required lists the keys each event type must have; run_start must also have "config" and
// "seeds", or, in the first shape of run_start, "training" and "seed" (legacyKeys).
var required = map[string][]string{
	TypeRunStart: {"schema", "type", "run_id", "time", "backend", "model"},
	TypeStep:     {"type", "step", "loss", "lr", "tokens_per_s", "time"},
	TypeEval:     {"type", "step", "loss"},
	TypeRunEnd:   {"type", "step", "loss", "time", "reason"},
}

// isString reports whether raw JSON is a string.
func isString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

// MarshalJSON writes the run_start line, schema and type included.
func (s RunStart) MarshalJSON() ([]byte, error) {
	model, err := json.Marshal(s.Model)
	if err != nil {
		return nil, fmt.Errorf("model config: %w", err)
	}
	config, err := json.Marshal(s.Config)
	if err != nil {
		return nil, fmt.Errorf("training config: %w", err)
	}
	backend, err := json.Marshal(s.Backend)
	if err != nil {
		return nil, err
	}
	seeds := s.Seeds
	if seeds == nil {
		seeds = map[string]uint64{}
	}
	return json.Marshal(runStartJSON{SchemaV1, TypeRunStart, s.RunID, s.Time, backend, model, config, seeds, s.Git})
}

// UnmarshalJSON reads a run_start line, in its current shape or its first one (see Legacy);
// Model and Config become json.RawMessage.
func (s *RunStart) UnmarshalJSON(b []byte) error {
	var j runStartJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Schema != SchemaV1 {
		return fmt.Errorf("unknown schema %q, want %q", j.Schema, SchemaV1)
	}
	*s = RunStart{RunID: j.RunID, Time: j.Time, Model: j.Model, Config: j.Config, Seeds: j.Seeds, Git: j.Git}
	if isString(j.Backend) {
		// The first shape: "backend":"cpu", "training":{…}, "seed":N.
		var kind string
		var v0 runStartV0JSON
		if err := json.Unmarshal(j.Backend, &kind); err != nil {
			return fmt.Errorf("backend: %w", err)
		}
		if err := json.Unmarshal(b, &v0); err != nil {
			return err
		}
		s.Backend, s.Config, s.Seeds, s.Legacy = Backend{Kind: kind}, v0.Training, map[string]uint64{"seed": v0.Seed}, true
		return nil
	}
	if err := json.Unmarshal(j.Backend, &s.Backend); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	if s.Backend.Kind == "" {
		return errors.New(`backend has no "kind"`)
	}
	return nil
}

// MarshalJSON writes the step line, type included.
func (s Step) MarshalJSON() ([]byte, error) {
	return json.Marshal(stepJSON{TypeStep, s.Step, jfloat(s.Loss), jfloat(s.LR), jfloat(s.TokensPerS), s.Time})
}

// UnmarshalJSON reads a step line.
func (s *Step) UnmarshalJSON(b []byte) error {
	var j stepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Step{Step: j.Step, Loss: float64(j.Loss), LR: float64(j.LR), TokensPerS: float64(j.TokensPerS), Time: j.Time}
	return nil
}

// MarshalJSON writes the eval line, type included.
func (e Eval) MarshalJSON() ([]byte, error) {
	j := evalJSON{Type: TypeEval, Step: e.Step, Loss: jfloat(e.Loss), Confusion: e.Confusion}
	if e.Accuracy != nil {
		a := jfloat(*e.Accuracy)
		j.Accuracy = &a
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an eval line.
func (e *Eval) UnmarshalJSON(b []byte) error {
	var j evalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Eval{Step: j.Step, Loss: float64(j.Loss), Confusion: j.Confusion}
	if j.Accuracy != nil {
		a := float64(*j.Accuracy)
		e.Accuracy = &a
	}
	for _, row := range j.Confusion {
		if len(row) != len(j.Confusion) {
			return fmt.Errorf("the confusion matrix is not square (%d rows, a row of %d)", len(j.Confusion), len(row))
		}
		for _, n := range row {
			if n < 0 {
				return fmt.Errorf("the confusion matrix counts %d images", n)
			}
		}
	}
	return nil
}

// MarshalJSON writes the run_end line, type included.
func (e RunEnd) MarshalJSON() ([]byte, error) {
	return json.Marshal(runEndJSON{TypeRunEnd, e.Step, jfloat(e.Loss), e.Time, e.Reason})
}

// UnmarshalJSON reads a run_end line; the reason must be ReasonDone or ReasonInterrupted.
func (e *RunEnd) UnmarshalJSON(b []byte) error {
	var j runEndJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if err := checkReason(j.Reason); err != nil {
		return err
	}
	*e = RunEnd{Step: j.Step, Loss: float64(j.Loss), Time: j.Time, Reason: j.Reason}
	return nil
}

func checkReason(r string) error {
	if r != ReasonDone && r != ReasonInterrupted {
		return fmt.Errorf("reason %q: want %q or %q", r, ReasonDone, ReasonInterrupted)
	}
	return nil
}

// ErrTruncated is matched (with errors.Is) by the error ReadEvents returns for a log whose
// last line was cut off in the middle of a write.
var ErrTruncated = errors.New("truncated last line")

// TruncatedError describes a log whose last line has no newline and does not parse: the
// remains of a write interrupted by a crash. The events before it are intact.
type TruncatedError struct {
	// Path is the log file.
	Path string
	// Line is the 1-based number of the partial line.
	Line int
	// Offset is the byte offset where the partial line starts: the length of the intact log.
	Offset int64
	// Partial is the partial line's bytes.
	Partial []byte
	// Err is why the partial line does not parse.
	Err error
}

// Error describes the truncation.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("runs: %s: line %d: %v (%d bytes without a newline, from a crash mid-write?): %v",
		e.Path, e.Line, ErrTruncated, len(e.Partial), e.Err)
}

// Is reports whether target is ErrTruncated.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// Unwrap returns the parse error.
func (e *TruncatedError) Unwrap() error { return e.Err }

// ReadEvents parses an event log. Every line must be one JSON object of a known type with all
// its fields; every run_start must carry schema "toy/v1", and the first event must be a
// run_start. Any violation is an error naming the file and line, with no events returned,
// except for a truncated last line (no newline, does not parse): then the events before it
// are returned with a *TruncatedError. An empty file holds no events and is not an error.
func ReadEvents(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("runs: read events: %w", err)
	}
	return parseEvents(path, data)
}

func parseEvents(path string, data []byte) ([]Event, error) {
	var events []Event
	var off int64
	for lineNo := 1; len(data) > 0; lineNo++ {
		line, rest, terminated := bytes.Cut(data, []byte{'\n'})
		ev, err := parseLine(line, lineNo)
		if err != nil && !terminated {
			return events, &TruncatedError{Path: path, Line: lineNo, Offset: off, Partial: line, Err: err}
		}
		if err == nil && len(events) == 0 && ev.Type != TypeRunStart {
			err = fmt.Errorf("first event is %q, want %q", ev.Type, TypeRunStart)
		}
		if err != nil {
			return nil, fmt.Errorf("runs: %s: line %d: %w", path, lineNo, err)
		}
		events = append(events, ev)
		off += int64(len(line)) + 1
		data = rest
	}
	return events, nil
}

func parseLine(line []byte, lineNo int) (Event, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return Event{}, errors.New("empty line")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return Event{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var typ string
	if raw, ok := fields["type"]; !ok || json.Unmarshal(raw, &typ) != nil {
		return Event{}, errors.New(`no string "type" field`)
	}
	if raw, ok := fields["schema"]; ok {
		var schema string
		if err := json.Unmarshal(raw, &schema); err != nil || schema != SchemaV1 {
			return Event{}, fmt.Errorf("unknown schema %s, want %q", raw, SchemaV1)
		}
	}
	keys, ok := required[typ]
	if !ok {
		return Event{}, fmt.Errorf("unknown event type %q", typ)
	}
	if typ == TypeRunStart {
		// The first shape of run_start (a string backend) names two fields differently.
		if isString(fields["backend"]) {
			keys = append(keys, "training", "seed")
		} else {
			keys = append(keys, "config", "seeds")
		}
	}
	for _, k := range keys {
		if _, ok := fields[k]; !ok {
			return Event{}, fmt.Errorf("%s event has no %q field", typ, k)
		}
	}
	ev := Event{Type: typ, Line: lineNo}
	var err error
	switch typ {
	case TypeRunStart:
		var v RunStart
		err = json.Unmarshal(line, &v)
		ev.Data = v
	case TypeStep:
		var v Step
		err = json.Unmarshal(line, &v)
		ev.Data = v
	case TypeEval:
		var v Eval
		err = json.Unmarshal(line, &v)
		ev.Data = v
	case TypeRunEnd:
		var v RunEnd
		err = json.Unmarshal(line, &v)
		ev.Data = v
	}
	if err != nil {
		return Event{}, fmt.Errorf("%s event: %w", typ, err)
	}
	return ev, nil
}
