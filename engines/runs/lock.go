package runs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the name of the lock file inside a run directory. The process that writes the
// run (Create, OpenRun) holds an exclusive flock(2) on it until Run.Close, and writes its pid
// into it. The kernel releases the lock when the process dies, however it dies, so a lock
// left by a killed process never blocks the next writer; the file itself stays.
const LockFile = "lock"

// InUseError is a run directory another process (or another open Run of this one) is writing.
type InUseError struct {
	// Dir is the run directory.
	Dir string
	// PID is the holder's process id, as it wrote it in the lock file (0 if unreadable).
	PID int
}

func (e *InUseError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	if e.PID == os.Getpid() {
		holder = "this process (another open run)"
	}
	return fmt.Sprintf("runs: %s is in use: %s is writing it (a toy train or toy finetune of this run); wait for it to end or stop it, then resume", e.Dir, holder)
}

// lockRun takes the writer's lock of run directory dir, or returns an *InUseError naming the
// process that holds it.
func lockRun(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("runs: lock %s: %w", dir, err)
	}
	held, err := flockExclusive(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("runs: lock %s: %w", dir, err)
	}
	if held {
		f.Close()
		return nil, &InUseError{Dir: dir, PID: lockHolder(path)}
	}
	// Ours: record the pid for the next one who finds it held.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder reads the pid the holder of a lock file wrote, 0 if there is none.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
