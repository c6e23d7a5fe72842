package runs

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/ggml"
)

type modelCfg struct {
	Layers int    `json:"layers"`
	Dim    int    `json:"dim"`
	Name   string `json:"name"`
}

func TestNewID(t *testing.T) {
	now := time.Date(2026, 11, 30, 16, 30, 12, 0, time.FixedZone("CET", 3600))
	id := NewID(now, rand.New(rand.NewPCG(1, 2)))
	assert.Regexp(t, regexp.MustCompile(`^20261130-153012-[0-9a-f]{4}$`), id, "UTC time, four hex digits")
	assert.Equal(t, id, NewID(now, rand.New(rand.NewPCG(1, 2))), "same rng, same id")
	assert.Regexp(t, `^\d{8}-\d{6}-[0-9a-f]{4}$`, NewID(time.Now(), nil))

	var ids []string
	for i := range 5 {
		ids = append(ids, NewID(now.Add(time.Duration(4-i)*time.Hour*30), rand.New(rand.NewPCG(uint64(i), 0))))
	}
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	for i := range ids {
		assert.Equal(t, ids[len(ids)-1-i], sorted[i], "ids sort by time")
	}
}

func TestCreateAndLog(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	r, err := Create(root, "20261130-153012-a1b2")
	require.NoError(t, err)
	assert.DirExists(t, r.WeightsDir())
	assert.FileExists(t, r.EventsPath())
	assert.Equal(t, filepath.Join(root, "20261130-153012-a1b2", "events.jsonl"), r.EventsPath())

	_, err = Create(root, "20261130-153012-a1b2")
	assert.ErrorContains(t, err, "already exists")
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`} {
		_, err = Create(root, bad)
		assert.Error(t, err, "id %q", bad)
	}

	t0 := time.Date(2026, 11, 30, 15, 30, 12, 123456789, time.UTC)
	require.NoError(t, r.LogStart(RunStart{Time: t0, Backend: Backend{Kind: "abacus"}, Model: modelCfg{2, 64, "tiny"},
		Config: map[string]any{"lr": 3e-4}, Seeds: map[string]uint64{"init": 1, "data": math.MaxUint64}}))
	require.NoError(t, r.LogStep(Step{Step: 1, Loss: 5.5, LR: 1e-4, TokensPerS: 1234.5, Time: t0.Add(time.Second)}))
	require.NoError(t, r.LogStep(Step{Step: 2, Loss: math.NaN(), LR: 2e-4, TokensPerS: math.Inf(1)}))
	require.NoError(t, r.LogEval(Eval{Step: 2, Loss: 4.25}))
	require.NoError(t, r.LogEnd(RunEnd{Step: 2, Loss: 4.5, Reason: ReasonDone, Time: t0.Add(time.Minute)}))
	assert.Error(t, r.LogEnd(RunEnd{Reason: "crashed"}))
	require.NoError(t, r.Close())
	assert.Error(t, r.LogEval(Eval{}), "closed")

	raw, err := os.ReadFile(r.EventsPath())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, 5)
	// The exact wire form of the first line.
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "toy/v1", first["schema"])
	assert.Equal(t, "run_start", first["type"])
	assert.Equal(t, "20261130-153012-a1b2", first["run_id"])
	assert.Equal(t, "2026-11-30T15:30:12.123456789Z", first["time"])
	assert.NotContains(t, first, "git", "git only when supplied")
	assert.Equal(t, ggml.BackendKind, first["backend"].(map[string]any)["kind"], "the run stamps its backend")
	assert.Equal(t, map[string]any{"init": 1.0, "data": float64(math.MaxUint64)}, first["seeds"])
	assert.Equal(t, map[string]any{"lr": 3e-4}, first["config"])
	assert.NotContains(t, first, "training")
	assert.NotContains(t, first, "seed")
	assert.Contains(t, lines[1], `"tokens_per_s":1234.5`)
	assert.Contains(t, lines[2], `"loss":"NaN"`)
	assert.Contains(t, lines[2], `"tokens_per_s":"+Inf"`)
	assert.Equal(t, `{"type":"eval","step":2,"loss":4.25}`, lines[3])
	assert.Contains(t, lines[4], `"reason":"done"`)

	events, err := ReadEvents(r.EventsPath())
	require.NoError(t, err)
	require.Len(t, events, 5)
	types := []string{TypeRunStart, TypeStep, TypeStep, TypeEval, TypeRunEnd}
	for i, e := range events {
		assert.Equal(t, types[i], e.Type)
		assert.Equal(t, i+1, e.Line)
	}
	start := events[0].Data.(RunStart)
	assert.Equal(t, "20261130-153012-a1b2", start.RunID)
	assert.True(t, start.Time.Equal(t0))
	assert.Equal(t, ThisBackend(), start.Backend)
	assert.Equal(t, map[string]uint64{"init": 1, "data": math.MaxUint64}, start.Seeds)
	assert.False(t, start.Legacy)
	assert.Nil(t, start.Git)
	var m modelCfg
	require.NoError(t, json.Unmarshal(start.Model.(json.RawMessage), &m))
	assert.Equal(t, modelCfg{2, 64, "tiny"}, m)
	assert.JSONEq(t, `{"lr":0.0003}`, string(start.Config.(json.RawMessage)))

	s1 := events[1].Data.(Step)
	assert.Equal(t, Step{Step: 1, Loss: 5.5, LR: 1e-4, TokensPerS: 1234.5, Time: s1.Time}, s1)
	assert.True(t, s1.Time.Equal(t0.Add(time.Second)))
	s2 := events[2].Data.(Step)
	assert.True(t, math.IsNaN(s2.Loss))
	assert.True(t, math.IsInf(s2.TokensPerS, 1))
	assert.WithinDuration(t, time.Now(), s2.Time, time.Minute, "zero time filled in")
	assert.Equal(t, Eval{Step: 2, Loss: 4.25}, events[3].Data)
	end := events[4].Data.(RunEnd)
	assert.Equal(t, ReasonDone, end.Reason)
	assert.Equal(t, 2, end.Step)
	assert.Equal(t, 4.5, end.Loss)
}

func TestGitInfoWritten(t *testing.T) {
	r, err := Create(t.TempDir(), "x")
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.LogStart(RunStart{Git: &GitInfo{SHA: "abc", Branch: "main"}}))
	events, err := ReadEvents(r.EventsPath())
	require.NoError(t, err)
	assert.Equal(t, &GitInfo{SHA: "abc", Branch: "main"}, events[0].Data.(RunStart).Git)
	err = r.LogStart(RunStart{Model: func() {}})
	assert.ErrorContains(t, err, "model config", "an unmarshalable config fails the log call")
}

const startLine = `{"schema":"toy/v1","type":"run_start","run_id":"r","time":"2026-01-02T03:04:05Z","backend":{"kind":"cpu"},"model":{},"config":null,"seeds":{"init":7,"data":7}}`
const stepLine = `{"type":"step","step":1,"loss":2.5,"lr":0.001,"tokens_per_s":100,"time":"2026-01-02T03:04:06Z"}`

// oldStartLine is a run_start of the first shape: "backend" a string, "training" with Go field
// names, one "seed".
const oldStartLine = `{"schema":"toy/v1","type":"run_start","run_id":"20261130-153012-a1b2","time":"2026-11-30T15:30:12Z","backend":"cpu","model":{"vocab":2048,"d_model":192,"n_layers":4},"training":{"Steps":800,"LR":0.002,"Seed":7},"seed":7}`

// TestReadOldRunStart reads a log written before run_start took its current shape, as resume
// and toy plot must, and appends to it.
func TestReadOldRunStart(t *testing.T) {
	path := writeLog(t, oldStartLine+"\n"+stepLine+"\n"+`{"type":"eval","step":1,"loss":2.25}`+"\n")
	events, err := ReadEvents(path)
	require.NoError(t, err)
	require.Len(t, events, 3)
	start := events[0].Data.(RunStart)
	assert.True(t, start.Legacy)
	assert.Equal(t, "20261130-153012-a1b2", start.RunID)
	assert.Equal(t, Backend{Kind: "cpu"}, start.Backend)
	assert.Equal(t, map[string]uint64{"seed": 7}, start.Seeds)
	assert.JSONEq(t, `{"Steps":800,"LR":0.002,"Seed":7}`, string(start.Config.(json.RawMessage)))
	assert.JSONEq(t, `{"vocab":2048,"d_model":192,"n_layers":4}`, string(start.Model.(json.RawMessage)))

	r, err := OpenRun(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, "20261130-153012-a1b2", r.ID)
	require.NoError(t, r.LogStart(RunStart{Config: map[string]int{"steps": 900}, Seeds: map[string]uint64{"init": 7, "data": 7}}))
	require.NoError(t, r.Close())
	events, err = ReadEvents(path)
	require.NoError(t, err, "old and new run_start lines in one log")
	require.Len(t, events, 4)
	resumed := events[3].Data.(RunStart)
	assert.False(t, resumed.Legacy)
	assert.Equal(t, ggml.BackendKind, resumed.Backend.Kind)
}

func writeLog(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, EventsFile)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestReadEventsRejects(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"schema", strings.Replace(startLine, "toy/v1", "toy/v2", 1) + "\n", `line 1: unknown schema "toy/v2"`},
		{"noschema", strings.Replace(startLine, `"schema":"toy/v1",`, "", 1) + "\n", `line 1: run_start event has no "schema"`},
		{"noseeds", strings.Replace(startLine, `,"seeds":{"init":7,"data":7}`, "", 1) + "\n", `line 1: run_start event has no "seeds"`},
		{"noconfig", strings.Replace(startLine, `"config":null,`, "", 1) + "\n", `line 1: run_start event has no "config"`},
		{"nokind", strings.Replace(startLine, `{"kind":"cpu"}`, `{}`, 1) + "\n", `line 1: run_start event: backend has no "kind"`},
		{"badbackend", strings.Replace(startLine, `{"kind":"cpu"}`, `7`, 1) + "\n", `line 1: run_start event: backend`},
		{"v0noseed", strings.Replace(oldStartLine, `,"seed":7`, "", 1) + "\n", `line 1: run_start event has no "seed"`},
		{"schemaOnStep", startLine + "\n" + strings.Replace(stepLine, `{`, `{"schema":"other",`, 1) + "\n", `line 2: unknown schema "other"`},
		{"garbage", startLine + "\n" + "not json\n" + stepLine + "\n", "line 2: not a JSON object"},
		{"array", startLine + "\n[1,2]\n", "line 2: not a JSON object"},
		{"trailing", startLine + "\n" + stepLine + " {}\n", "line 2: not a JSON object"},
		{"empty line", startLine + "\n\n" + stepLine + "\n", "line 2: empty line"},
		{"type", startLine + "\n" + `{"type":"metric","step":1}` + "\n", `line 2: unknown event type "metric"`},
		{"notype", startLine + "\n" + `{"step":1}` + "\n", `line 2: no string "type"`},
		{"missing", startLine + "\n" + `{"type":"eval","step":1}` + "\n", `line 2: eval event has no "loss"`},
		{"badloss", startLine + "\n" + `{"type":"eval","step":1,"loss":"x"}` + "\n", `line 2: eval event`},
		{"reason", startLine + "\n" + `{"type":"run_end","step":1,"loss":1,"time":"2026-01-02T03:04:06Z","reason":"bored"}` + "\n", `line 2: run_end event: reason "bored"`},
		{"first", stepLine + "\n" + startLine + "\n", `line 1: first event is "step"`},
		{"badtime", startLine + "\n" + strings.Replace(stepLine, "2026-01-02T03:04:06Z", "yesterday", 1) + "\n", "line 2: step event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeLog(t, tc.content)
			events, err := ReadEvents(path)
			require.Error(t, err)
			assert.Nil(t, events)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.want)
			assert.False(t, errors.Is(err, ErrTruncated))
		})
	}
	_, err := ReadEvents(filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Error(t, err)

	events, err := ReadEvents(writeLog(t, ""))
	assert.NoError(t, err)
	assert.Empty(t, events)
}

func TestReadEventsTruncated(t *testing.T) {
	intact := startLine + "\n" + stepLine + "\n"
	// Every cut inside the last line is reported as truncation, with the events before it.
	for cut := 1; cut < len(stepLine); cut++ {
		path := writeLog(t, intact+stepLine[:cut])
		events, err := ReadEvents(path)
		require.Error(t, err, "cut %d", cut)
		assert.ErrorIs(t, err, ErrTruncated)
		var te *TruncatedError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, 3, te.Line)
		assert.EqualValues(t, len(intact), te.Offset)
		assert.Equal(t, stepLine[:cut], string(te.Partial))
		assert.Contains(t, err.Error(), "line 3")
		require.Len(t, events, 2)
		assert.Equal(t, TypeStep, events[1].Type)
	}
	// A crash that leaves zeros (a file extended but not written) is a truncation too.
	_, err := ReadEvents(writeLog(t, intact+"\x00\x00\x00\x00"))
	assert.ErrorIs(t, err, ErrTruncated)

	// A complete last line missing only its newline is a whole event.
	events, err := ReadEvents(writeLog(t, intact+stepLine))
	require.NoError(t, err)
	assert.Len(t, events, 3)

	// A cut-off line that is not the last is corruption, not truncation.
	_, err = ReadEvents(writeLog(t, intact+stepLine[:20]+"\n"+stepLine+"\n"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrTruncated)
	assert.Contains(t, err.Error(), "line 3")
}

func TestOpenRunResume(t *testing.T) {
	root := t.TempDir()
	r, err := Create(root, "run1")
	require.NoError(t, err)
	require.NoError(t, r.LogStart(RunStart{Seeds: map[string]uint64{"init": 1}}))
	require.NoError(t, r.LogStep(Step{Step: 1, Loss: 3}))
	require.NoError(t, r.Close())

	// Simulate a crash in the middle of the next write.
	f, err := os.OpenFile(r.EventsPath(), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"step","step":2,"lo`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r2, err := OpenRun(r.Dir)
	require.NoError(t, err)
	assert.Equal(t, "run1", r2.ID)
	require.Len(t, r2.Events, 2)
	require.NotNil(t, r2.Recovered)
	assert.Equal(t, 3, r2.Recovered.Line)
	require.NoError(t, r2.LogStart(RunStart{Seeds: map[string]uint64{"init": 1}}))
	require.NoError(t, r2.LogStep(Step{Step: 2, Loss: 2}))
	require.NoError(t, r2.LogEnd(RunEnd{Step: 2, Loss: 2, Reason: ReasonInterrupted}))
	require.NoError(t, r2.Close())

	events, err := ReadEvents(r.EventsPath())
	require.NoError(t, err, "the repaired log reads cleanly")
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{TypeRunStart, TypeStep, TypeRunStart, TypeStep, TypeRunEnd}, types)
	assert.Equal(t, ReasonInterrupted, events[4].Data.(RunEnd).Reason)

	// A last line missing only its newline gets one before the next append.
	path := r.EventsPath()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw[:len(raw)-1], 0o644))
	r3, err := OpenRun(r.Dir)
	require.NoError(t, err)
	assert.Nil(t, r3.Recovered)
	require.NoError(t, r3.LogEval(Eval{Step: 2, Loss: 1.5}))
	require.NoError(t, r3.Close())
	events, err = ReadEvents(path)
	require.NoError(t, err)
	assert.Len(t, events, 6)

	// Not a run directory; a corrupt log.
	_, err = OpenRun(t.TempDir())
	assert.Error(t, err)
	require.NoError(t, os.WriteFile(path, []byte("junk\n"), 0o644))
	_, err = OpenRun(r.Dir)
	assert.ErrorContains(t, err, "line 1")
}

func TestAtomicWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.bin")
	require.NoError(t, AtomicWriteFile(path, func(w io.Writer) error {
		_, err := io.WriteString(w, "first")
		return err
	}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "first", string(b))
	st, err := os.Stat(path)
	require.NoError(t, err)
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	assert.Equal(t, os.FileMode(0o666&^umask), st.Mode().Perm(), "an ordinary new file's mode: 0666 less the umask")

	// A failed write leaves the old file and no temp file.
	err = AtomicWriteFile(path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("disk on fire")
	})
	assert.ErrorContains(t, err, "disk on fire")
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "first", string(b))

	// A failed first write leaves nothing; so does a panic.
	fresh := filepath.Join(dir, "new.bin")
	assert.Error(t, AtomicWriteFile(fresh, func(io.Writer) error { return errors.New("no") }))
	assert.NoFileExists(t, fresh)
	assert.Panics(t, func() {
		AtomicWriteFile(fresh, func(io.Writer) error { panic("boom") })
	})
	assert.NoFileExists(t, fresh)

	// Large content goes through the buffer intact.
	big := strings.Repeat("0123456789", 100_000)
	require.NoError(t, AtomicWriteFile(path, func(w io.Writer) error {
		_, err := io.WriteString(w, big)
		return err
	}))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, big, string(b))

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only ckpt.bin, no temp files")

	assert.Error(t, AtomicWriteFile(filepath.Join(dir, "nodir", "x"), func(io.Writer) error { return nil }))
}

// fakeRepo builds a minimal .git directory by hand (no git command that changes state).
func fakeRepo(t *testing.T, head string, refs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git", "refs", "heads"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte(head+"\n"), 0o644))
	for name, sha := range refs {
		p := filepath.Join(dir, ".git", filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(sha+"\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	return dir
}

func TestGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	dir := fakeRepo(t, "ref: refs/heads/feature/x", map[string]string{"refs/heads/feature/x": sha})
	got, branch, ok := Git(filepath.Join(dir, "sub"))
	require.True(t, ok)
	assert.Equal(t, sha, got)
	assert.Equal(t, "feature/x", branch)

	dir = fakeRepo(t, sha, nil) // detached HEAD
	got, branch, ok = Git(dir)
	require.True(t, ok)
	assert.Equal(t, sha, got)
	assert.Empty(t, branch)

	dir = fakeRepo(t, "ref: refs/heads/main", nil) // no commit yet
	_, _, ok = Git(dir)
	assert.False(t, ok)

	_, _, ok = Git(filepath.Join(t.TempDir(), "does-not-exist"))
	assert.False(t, ok)
}

// TestClassifierEval: a classifier's evaluation carries its accuracy and confusion matrix on
// the wire and reads back the same; a confusion matrix that is not square, or counts fewer
// than no images, is refused.
func TestClassifierEval(t *testing.T) {
	acc := 0.75
	e := Eval{Step: 3, Loss: 0.5, Accuracy: &acc, Confusion: [][]int{{2, 0}, {1, 1}}}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"eval","step":3,"loss":0.5,"accuracy":0.75,"confusion":[[2,0],[1,1]]}`, string(b))
	var back Eval
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, e, back)
	for _, bad := range []string{`[[1,2],[3]]`, `[[1,2]]`, `[[0,-1],[0,0]]`} {
		err := json.Unmarshal([]byte(`{"type":"eval","step":1,"loss":1,"confusion":`+bad+`}`), &back)
		assert.ErrorContains(t, err, "confusion matrix", bad)
	}
}
