// Package mpitest runs a test binary's own tests as the ranks of an Open MPI job, for the
// tests of toy's data-parallel code: a test that is not a rank launches
// `mpirun -np N <this test binary> -test.run '^Name$'`, and the ranks, which see Rank() ≥ 0,
// do the work.
package mpitest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Rank is this process's rank in the job mpirun started, or -1 outside one.
func Rank() int {
	v := os.Getenv("OMPI_COMM_WORLD_RANK")
	if v == "" {
		return -1
	}
	r, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return r
}

// MPIRun returns the path of Open MPI's mpirun, skipping the test where it is not installed,
// except on CI (CI set), which installs it, where its absence fails the test.
func MPIRun(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs Open MPI (openmpi-bin), but mpirun is not on PATH: %v", err)
		}
		t.Skip("mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	return path
}

// Result is how a job ended.
type Result struct {
	Output  string        // stdout and stderr of mpirun and every rank
	Err     error         // the exit status of mpirun
	Elapsed time.Duration // from launch to mpirun's exit
}

// Launch runs the test named test of this binary as np ranks on this machine, with env added
// to each rank's environment, and waits at most limit.
func Launch(t *testing.T, np int, test string, limit time.Duration, env ...string) Result {
	t.Helper()
	mpirun := MPIRun(t)
	self, err := os.Executable()
	require.NoError(t, err)
	args := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np)}
	for _, e := range env {
		args = append(args, "-x", e)
	}
	args = append(args, self, "-test.run", "^"+test+"$", "-test.count", "1")
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	// Loopback only: a test must not wait on the machine's other network interfaces.
	cmd.Env = append(os.Environ(), "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_oob_tcp_if_include=lo")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	res := Result{Output: string(out), Err: err, Elapsed: time.Since(t0)}
	if ctx.Err() != nil {
		t.Fatalf("mpirun did not end within %s:\n%s", limit, out)
	}
	return res
}
