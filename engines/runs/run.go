package runs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toyml/toy/internal/fsutil"
)

// EventsFile is the name of the event log inside a run directory.
const EventsFile = "events.jsonl"

// WeightsDir is the name of the checkpoint directory inside a run directory.
const WeightsDir = "weights"

// NewID returns a run id made of now in UTC and four random hex digits from rng, such as
// "20261130-153012-a1b2". Ids sort by start time. A nil rng uses math/rand/v2's global source.
func NewID(now time.Time, rng *rand.Rand) string {
	var r uint32
	if rng != nil {
		r = rng.Uint32()
	} else {
		r = rand.Uint32()
	}
	return fmt.Sprintf("%s-%04x", now.UTC().Format("20060102-150405"), r&0xffff)
}

// checkID rejects ids that are not a single plain path element.
func checkID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`+"\x00") || filepath.Base(id) != id {
		return fmt.Errorf("runs: bad run id %q: want a plain directory name", id)
	}
	return nil
}

// Run is an open run directory with its event log open for appending. Its methods are safe
// for concurrent use.
type Run struct {
	// ID is the run's id: the run_id of the log's first run_start, else the directory name.
	ID string
	// Dir is the run directory.
	Dir string
	// Events holds the events already in the log when OpenRun opened it (nil after Create).
	// Events logged through the Run are not added to it.
	Events []Event
	// Recovered is non-nil when OpenRun found the log's last line cut off by a crash and
	// removed it before appending; it describes what was removed.
	Recovered *TruncatedError

	mu sync.Mutex
	f  *os.File
	// lock holds the writer's lock of the directory (LockFile) until Close; nil for a run
	// opened by Follow (a follower), which writes nothing.
	lock     *os.File
	follower bool
}

// Create makes a new run directory root/id with an empty event log and a weights directory,
// and holds its writer's lock (LockFile) until Close. It refuses an id that already exists
// under root.
func Create(root, id string) (*Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("runs: create run: %w", err)
	}
	dir := filepath.Join(root, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("runs: create run: run %q already exists in %s", id, root)
		}
		return nil, fmt.Errorf("runs: create run: %w", err)
	}
	lock, err := lockRun(dir)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, WeightsDir), 0o755); err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs: create run: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs: create run: %w", err)
	}
	syncDir(dir)
	syncDir(root)
	return &Run{ID: id, Dir: dir, f: f, lock: lock}, nil
}

// OpenRun opens an existing run directory to resume it: it reads the event log into
// Run.Events and opens the log for appending. A log whose last line was cut off by a crash
// (see ReadEvents) is repaired first: the partial line is removed and described in
// Run.Recovered. A complete last line missing only its newline gets the newline. Any other
// problem with the log is an error. The weights directory is created if missing.
//
// OpenRun holds the directory's writer's lock (LockFile) until Close, taken before it reads
// the log: a run that another process (or another open Run) is writing is refused with an
// *InUseError naming its pid, so two resumptions of one run never interleave their events and
// checkpoints.
func OpenRun(dir string) (*Run, error) {
	path := filepath.Join(dir, EventsFile)
	if _, err := os.Stat(path); err != nil {
		_, err = ReadEvents(path) // its error names the log
		return nil, err
	}
	lock, err := lockRun(dir)
	if err != nil {
		return nil, err
	}
	r, err := openRun(dir, lock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return r, nil
}

// openRun reads and repairs the log of dir and opens it for appending, under lock.
func openRun(dir string, lock *os.File) (*Run, error) {
	path := filepath.Join(dir, EventsFile)
	events, err := ReadEvents(path)
	var trunc *TruncatedError
	if err != nil && !errors.As(err, &trunc) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, WeightsDir), 0o755); err != nil {
		return nil, fmt.Errorf("runs: open run: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("runs: open run: %w", err)
	}
	if err := repairTail(f, trunc); err != nil {
		f.Close()
		return nil, fmt.Errorf("runs: open run %s: repair log: %w", dir, err)
	}
	r := &Run{ID: filepath.Base(dir), Dir: dir, Events: events, Recovered: trunc, f: f, lock: lock}
	r.setID()
	return r, nil
}

// setID takes the run's id from its log's first run_start, where it has one.
func (r *Run) setID() {
	if len(r.Events) > 0 {
		if s, ok := r.Events[0].Data.(RunStart); ok && s.RunID != "" {
			r.ID = s.RunID
		}
	}
}

// Follow opens a run directory that another process of the same job writes (a data-parallel
// rank other than 0, beside rank 0's OpenRun or Create) to read it: its event log goes into
// Run.Events, as OpenRun reads it (a log cut off by a crash is read up to its last complete
// line, not repaired), and its checkpoints can be read; it takes no lock, and logging or
// saving through it is an error.
func Follow(dir string) (*Run, error) {
	events, err := ReadEvents(filepath.Join(dir, EventsFile))
	var trunc *TruncatedError
	if err != nil && !errors.As(err, &trunc) {
		return nil, err
	}
	r := &Run{ID: filepath.Base(dir), Dir: dir, Events: events, Recovered: trunc, follower: true}
	r.setID()
	return r, nil
}

// repairTail makes the log end in a newline after its last complete event.
func repairTail(f *os.File, trunc *TruncatedError) error {
	if trunc != nil {
		if err := f.Truncate(trunc.Offset); err != nil {
			return err
		}
		return f.Sync()
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	var last [1]byte
	rf, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	defer rf.Close()
	if _, err := rf.ReadAt(last[:], st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return err
		}
		return f.Sync()
	}
	return nil
}

// EventsPath returns the path of the run's event log.
func (r *Run) EventsPath() string { return filepath.Join(r.Dir, EventsFile) }

// WeightsDir returns the run's checkpoint directory.
func (r *Run) WeightsDir() string { return filepath.Join(r.Dir, WeightsDir) }

// append writes one event as a single line and fsyncs the log.
func (r *Run) append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("runs: %s: encode event: %w", r.ID, err)
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return fmt.Errorf("runs: %s: run is closed", r.ID)
	}
	if _, err := r.f.Write(b); err != nil {
		return fmt.Errorf("runs: %s: write event: %w", r.ID, err)
	}
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("runs: %s: sync events: %w", r.ID, err)
	}
	return nil
}

// LogStart appends a run_start event, stamping it with this build's backend (ThisBackend) and
// filling in the run id and the current time when they are empty.
func (r *Run) LogStart(s RunStart) error {
	s.Backend = ThisBackend()
	if s.RunID == "" {
		s.RunID = r.ID
	}
	if s.Time.IsZero() {
		s.Time = time.Now()
	}
	return r.append(s)
}

// LogStep appends a step event, with the current time when s.Time is zero.
func (r *Run) LogStep(s Step) error {
	if s.Time.IsZero() {
		s.Time = time.Now()
	}
	return r.append(s)
}

// LogEval appends an eval event.
func (r *Run) LogEval(e Eval) error { return r.append(e) }

// LogEnd appends a run_end event, with the current time when e.Time is zero. The reason must
// be ReasonDone or ReasonInterrupted.
func (r *Run) LogEnd(e RunEnd) error {
	if err := checkReason(e.Reason); err != nil {
		return fmt.Errorf("runs: %s: run_end: %w", r.ID, err)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	return r.append(e)
}

// Close closes the event log and releases the directory's lock. Logging after Close is an
// error.
func (r *Run) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.f != nil {
		err = r.f.Close()
		r.f = nil
	}
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
	return err
}

// AtomicWriteFile writes a file all at once: write fills a temporary file in path's
// directory, which is then fsynced and renamed to path (replacing any file there), and the
// directory fsynced. If write or any step fails (or write panics), the temporary file is
// removed and path is left as it was. The file gets mode 0666 less the umask, as any new file.
func AtomicWriteFile(path string, write func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := fsutil.CreateTemp(dir, "."+base+".tmp-*") // 0666 less the umask
	if err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := write(bw); err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("runs: write %s: %w", path, err)
	}
	committed = true
	syncDir(dir)
	return nil
}

// syncDir fsyncs a directory so that entries created or renamed in it survive a crash.
// Errors are ignored: not every system can fsync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Git returns the commit hash of HEAD and the current branch of the git work tree containing
// dir, using the git command. branch is empty when HEAD is detached. ok is false when git is
// not installed, dir is not in a repository, or the repository has no commit yet.
func Git(dir string) (sha, branch string, ok bool) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD").Output()
	if err != nil {
		return "", "", false
	}
	sha = strings.TrimSpace(string(out))
	if !isHex(sha) || (len(sha) != 40 && len(sha) != 64) {
		return "", "", false
	}
	if out, err := exec.Command("git", "-C", dir, "symbolic-ref", "--short", "-q", "HEAD").Output(); err == nil {
		branch = strings.TrimSpace(string(out))
	}
	return sha, branch, true
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}
