package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/ggml"
)

// buildToy builds the toy binary into a temporary directory, with this process's environment
// (make test passes the cgo flags through it, so ggml's build cache is reused).
func buildToy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toy")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// checkpointTensors reads every tensor of a run's latest model.gguf, and its step.
func checkpointTensors(t *testing.T, runDir string) (map[string][]byte, any) {
	t.Helper()
	f, err := ggml.OpenGGUF(filepath.Join(runDir, runs.WeightsDir, "model.gguf"))
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]byte{}
	for _, ti := range f.Tensors() {
		out[ti.Name], err = f.ReadTensorData(ti.Name)
		require.NoError(t, err)
	}
	step, err := f.Value("toy.train.step")
	require.NoError(t, err)
	return out, step
}

// stepLosses maps each step of a run's log to its loss; a step logged more than once (run
// again after a crash) must have the same loss every time.
func stepLosses(t *testing.T, runDir string) map[int]float64 {
	t.Helper()
	evs, err := runs.ReadEvents(filepath.Join(runDir, runs.EventsFile))
	require.NoError(t, err)
	out := map[int]float64{}
	for _, e := range evs {
		if st, ok := e.Data.(runs.Step); ok {
			if prev, ok := out[st.Step]; ok {
				require.Equal(t, prev, st.Loss, "step %d run twice gives another loss", st.Step)
			}
			out[st.Step] = st.Loss
		}
	}
	return out
}

// TestCrashConsistency kills a training run with SIGKILL at random moments — while it starts,
// trains, logs or writes a checkpoint — at least 20 times, resuming it after each kill, and
// checks that the final weights equal an uninterrupted run's, bit for bit, and that every
// logged step's loss equals the uninterrupted run's.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("builds toy and trains 2 runs (about 20 s)")
	}
	bin := buildToy(t)
	text := clitest.WriteCorpus(t, 5)
	const steps, kills = 450, 20
	args := func(runsDir string) []string {
		return []string{"train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-seq", "16", "-batch", "2",
			"-steps", fmt.Sprint(steps), "-eval-every", "50", "-eval-batches", "1", "-sample", "0", "-t", "1",
			"-save-every", "1", "-save-minutes", "0", "-text", text, "-runs", runsDir}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		return cmd, &stderr
	}
	runDirOf := func(runsDir string) string {
		dirs, _ := filepath.Glob(filepath.Join(runsDir, "*"))
		if len(dirs) != 1 {
			return ""
		}
		return dirs[0]
	}

	refRuns := t.TempDir()
	cmd, stderr := start(args(refRuns)...)
	require.NoError(t, cmd.Wait(), stderr.String())
	ref := runDirOf(refRuns)
	want, wantStep := checkpointTensors(t, ref)
	wantLosses := stepLosses(t, ref)
	require.Len(t, wantLosses, steps)

	// stepsLogged counts the step events in a run's log so far.
	stepsLogged := func(dir string) int {
		b, _ := os.ReadFile(filepath.Join(dir, runs.EventsFile))
		return bytes.Count(b, []byte(`"type":"step"`))
	}
	crashRuns := t.TempDir()
	var done chan error
	launch := func(args ...string) {
		cmd, stderr = start(args...)
		done = make(chan error, 1)
		go func(c *exec.Cmd) { done <- c.Wait() }(cmd)
	}
	launch(args(crashRuns)...)
	var dir string
	for dir == "" || !fileExists(filepath.Join(dir, runs.WeightsDir, runs.CheckpointFile)) {
		time.Sleep(time.Millisecond)
		dir = runDirOf(crashRuns)
	}
	// waitSteps waits until n more steps are logged; it reports an exit of the run meanwhile.
	waitSteps := func(n int) (exited bool, err error) {
		for target := stepsLogged(dir) + n; stepsLogged(dir) < target; {
			select {
			case err := <-done:
				return true, err
			case <-time.After(time.Millisecond):
			}
		}
		return false, nil
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill moments drawn with seed %d", seed)
	killRng := rand.New(rand.NewPCG(seed, 7))
	for k := 0; k < kills; k++ {
		if k > 0 {
			launch("train", "-resume", dir, "-t", "1")
		}
		// A random moment: early in the start (loading, opening the log), or after a random
		// number of steps and a random fraction of the next (training, logging, saving).
		delay := time.Duration(killRng.IntN(5_000)) * time.Microsecond
		if killRng.IntN(4) == 0 {
			delay = time.Duration(killRng.IntN(30_000)) * time.Microsecond
		} else {
			exited, err := waitSteps(1 + killRng.IntN(15))
			require.False(t, exited, "run %d ended before its kill (%v): %s", k, err, stderr.String())
		}
		select {
		case err := <-done:
			require.Fail(t, "the run ended before its kill", "run %d (%v): %s", k, err, stderr.String())
		case <-time.After(delay):
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err := <-done
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, "run %d: %v: %s", k, err, stderr.String())
	}
	launch("train", "-resume", dir, "-t", "1") // the last resume runs to the end
	require.NoError(t, <-done, stderr.String())
	t.Logf("%d kills; %d step events for %d steps", kills, bytes.Count(must(os.ReadFile(filepath.Join(dir, runs.EventsFile))), []byte(`"type":"step"`)), steps)

	got, gotStep := checkpointTensors(t, dir)
	assert.Equal(t, wantStep, gotStep)
	require.Equal(t, len(want), len(got))
	for name := range want {
		assert.True(t, bytes.Equal(want[name], got[name]), "tensor %s differs from the uninterrupted run's", name)
	}
	gotLosses := stepLosses(t, dir)
	assert.Equal(t, wantLosses, gotLosses, "every step's loss is the uninterrupted run's")

	// Ctrl-C saves a checkpoint and exits with status 130.
	intRuns := t.TempDir()
	launch(args(intRuns)...)
	for dir = ""; dir == "" || !fileExists(filepath.Join(dir, runs.WeightsDir, runs.CheckpointFile)); dir = runDirOf(intRuns) {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := <-done
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v: %s", err, stderr.String())
	assert.Equal(t, 130, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "interrupted at step")
	st, err := os.Stat(filepath.Join(dir, runs.WeightsDir, "model.gguf"))
	require.NoError(t, err)
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	assert.Equal(t, os.FileMode(0o666&^umask), st.Mode().Perm(), "checkpoints get 0666 less the umask")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
