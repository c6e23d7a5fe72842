//go:build unix

package runs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockHolderEnv makes the test binary a process that opens the run directory it names, logs one
// step, says "ready" and waits to be killed (TestRunLockAcrossProcesses).
const lockHolderEnv = "TOY_RUNS_TEST_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHolderEnv); dir != "" {
		r, err := OpenRun(dir)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if err := r.LogStep(Step{Step: 100}); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newLoggedRun creates a run under a temporary directory with a run_start and returns its
// directory, closed.
func newLoggedRun(t *testing.T) string {
	t.Helper()
	r, err := Create(t.TempDir(), "run")
	require.NoError(t, err)
	require.NoError(t, r.LogStart(RunStart{Model: map[string]int{"layers": 1}, Config: map[string]int{"steps": 2}}))
	require.NoError(t, r.Close())
	return r.Dir
}

// TestRunLockInProcess: a run directory has one writer. Every way of opening it for writing
// (Create, OpenRun) while another open Run of this process holds it is refused with an
// InUseError naming this process, through separate file descriptions as two processes would
// have; Close hands it on; Follow reads it meanwhile but cannot log or save.
func TestRunLockInProcess(t *testing.T) {
	dir := newLoggedRun(t)
	first, err := OpenRun(dir)
	require.NoError(t, err)
	for i := range 3 {
		_, err := OpenRun(dir)
		var inUse *InUseError
		require.ErrorAs(t, err, &inUse, "attempt %d", i)
		assert.Equal(t, os.Getpid(), inUse.PID)
		assert.Equal(t, dir, inUse.Dir)
		assert.Contains(t, err.Error(), "is in use")
	}
	// A follower reads the log the writer appends to, and writes nothing.
	require.NoError(t, first.LogStep(Step{Step: 0, Loss: 1}))
	f, err := Follow(dir)
	require.NoError(t, err)
	assert.Len(t, f.Events, 2)
	assert.Error(t, f.LogStep(Step{Step: 1}))
	_, err = f.SaveCheckpoint(1, func(string) error { return nil })
	assert.ErrorContains(t, err, "Follow")
	require.NoError(t, f.Close())

	require.NoError(t, first.Close())
	second, err := OpenRun(dir)
	require.NoError(t, err, "closed, the lock passes on")
	require.NoError(t, second.Close())
	require.NoError(t, second.Close(), "closing twice is harmless")

	// Create holds the lock of the run it makes.
	root := t.TempDir()
	c, err := Create(root, "new")
	require.NoError(t, err)
	_, err = OpenRun(c.Dir)
	assert.ErrorAs(t, err, new(*InUseError))
	require.NoError(t, c.Close())
	r, err := OpenRun(c.Dir)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	// A directory without a log is refused for the log, and gets no lock file.
	empty := t.TempDir()
	_, err = OpenRun(empty)
	assert.ErrorContains(t, err, EventsFile)
	_, err = os.Stat(filepath.Join(empty, LockFile))
	assert.True(t, os.IsNotExist(err))
}

// TestRunLockAcrossProcesses: a run another process writes is refused with that process's pid,
// and its events are not interleaved with ours; once the holder is killed (kill -9, no Close),
// the lock it held does not block: the kernel released it.
func TestRunLockAcrossProcesses(t *testing.T) {
	dir := newLoggedRun(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready", strings.TrimSpace(line))

	_, err = OpenRun(dir)
	var inUse *InUseError
	require.ErrorAs(t, err, &inUse)
	assert.Equal(t, cmd.Process.Pid, inUse.PID, "the holder's pid")
	assert.Contains(t, err.Error(), fmt.Sprintf("process %d", cmd.Process.Pid))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed = true
	werr := cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(werr, &exit), "the holder died of the signal: %v", werr)

	r, err := OpenRun(dir)
	require.NoError(t, err, "a dead holder's lock does not block")
	defer r.Close()
	require.Len(t, r.Events, 2, "run_start and the holder's one step")
	assert.Equal(t, 100, r.Events[1].Data.(Step).Step)
	require.NoError(t, r.LogStep(Step{Step: 101}))
	events, err := ReadEvents(r.EventsPath())
	require.NoError(t, err)
	assert.Len(t, events, 3)
}
