package recipes

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/mpi"
	"github.com/toyml/toy/mpi/mpitest"
)

// dpScratch is the run the data-parallel tests train: the tiny model, a global batch of 4, a
// constant learning rate (so a run extended by -resume follows the same schedule as one run of
// the whole length).
func dpScratch(t *testing.T, text, runsDir string, steps int) Scratch {
	s := tinyScratch(t, text)
	s.RunsDir, s.Steps, s.Batch, s.Schedule, s.Warmup = runsDir, steps, 4, "constant", 0
	s.Threads, s.EvalEvery, s.SaveEvery, s.SampleTokens = 1, 0, 0, 0
	return s
}

// onlyRun is the one run directory under dir.
func onlyRun(t *testing.T, dir string) string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one run in %s", dir)
	return filepath.Join(dir, entries[0].Name())
}

// TestScratchDataParallel: `mpirun -np 2 toy train` reproduces the losses of one process
// training the same global batch (within the float32 summation order; see
// training.TestDataParallelMatchesOneTrainer), rank 0 alone writes the run, and a run resumes with
// another number of ranks: 2 ranks then 1, and 1 rank then 2, each match the run of one process
// throughout.
func TestScratchDataParallel(t *testing.T) {
	if mpitest.Rank() >= 0 {
		scratchRank(t)
		return
	}
	mpitest.MPIRun(t)
	text := writeText(t)
	const half, steps = 4, 8
	ref := dpScratch(t, text, t.TempDir(), steps)
	res, err := ref.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, res.RunDir)
	require.Len(t, want, steps)

	launch := func(runsDir string, steps int, resume string) {
		t.Helper()
		r := mpitest.Launch(t, 2, "TestScratchDataParallel", 3*time.Minute,
			"TOY_DP_TEXT="+text, "TOY_DP_RUNS="+runsDir, "TOY_DP_STEPS="+strconv.Itoa(steps), "TOY_DP_RESUME="+resume)
		require.NoError(t, r.Err, r.Output)
	}
	same := func(got []float64, from int, what string) {
		t.Helper()
		require.Len(t, got, steps-from, what)
		for i, l := range got {
			assert.InEpsilon(t, want[from+i], l, 1e-5, "%s: step %d", what, from+i)
		}
	}

	whole := t.TempDir()
	launch(whole, steps, "")
	types, got := events(t, onlyRun(t, whole))
	same(got, 0, "2 ranks")
	assert.Equal(t, 1, countOf(types, "run_start"), "rank 0 alone logs")

	// 2 ranks, then 1.
	two := t.TempDir()
	launch(two, half, "")
	s := dpScratch(t, text, two, steps)
	s.Resume, s.ResumeSteps = onlyRun(t, two), steps
	_, err = s.Run(context.Background())
	require.NoError(t, err)
	_, got = events(t, onlyRun(t, two))
	same(got, 0, "2 ranks, resumed on 1")

	// 1 rank, then 2.
	one := t.TempDir()
	s = dpScratch(t, text, one, half)
	_, err = s.Run(context.Background())
	require.NoError(t, err)
	launch(one, steps, onlyRun(t, one))
	_, got = events(t, onlyRun(t, one))
	same(got, 0, "1 rank, resumed on 2")
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// scratchRank is one rank of TestScratchDataParallel's jobs.
func scratchRank(t *testing.T) {
	text := os.Getenv("TOY_DP_TEXT")
	if text == "" {
		t.Skip("a rank of another test")
	}
	w, err := mpi.Init(mpi.DefaultOptions())
	require.NoError(t, err)
	steps, err := strconv.Atoi(os.Getenv("TOY_DP_STEPS"))
	require.NoError(t, err)
	s := dpScratch(t, text, os.Getenv("TOY_DP_RUNS"), steps)
	s.Replicas = w
	if resume := os.Getenv("TOY_DP_RESUME"); resume != "" {
		s.Resume, s.ResumeSteps = resume, steps
	}
	_, err = s.Run(context.Background())
	require.NoError(t, err)
	require.NoError(t, w.Finalize())
}

// dpFinetune is the LoRA fine-tune of chat data the data-parallel test runs: a masked loss, so
// the ranks' losses cover different numbers of positions.
func dpFinetune(base, data, runsDir string) Finetune {
	f := DefaultFinetune()
	f.Base, f.Data, f.RunsDir = base, data, runsDir
	f.LoRA = LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"all"}, Seed: 1}
	f.Steps, f.Batch, f.SeqLen, f.LR, f.MinLR, f.Warmup = 6, 4, 24, 1e-2, 1e-3, 2
	f.Threads, f.EvalEvery, f.EvalBatches, f.SaveEvery, f.SaveMinutes = 1, 0, 1, 0, 0
	return f
}

// TestFinetuneDataParallel: `mpirun -np 2 toy finetune` on chat data reproduces one process's
// losses (the loss masks keep different numbers of positions on each rank).
func TestFinetuneDataParallel(t *testing.T) {
	if mpitest.Rank() >= 0 {
		base := os.Getenv("TOY_DP_BASE")
		if base == "" {
			t.Skip("a rank of another test")
		}
		w, err := mpi.Init(mpi.DefaultOptions())
		require.NoError(t, err)
		f := dpFinetune(base, os.Getenv("TOY_DP_DATA"), os.Getenv("TOY_DP_RUNS"))
		f.Replicas = w
		_, err = f.Run(context.Background())
		require.NoError(t, err)
		require.NoError(t, w.Finalize())
		return
	}
	mpitest.MPIRun(t)
	q := newQATask()
	base := tinyBase(t, q)
	var lines []string
	for _, k := range q.keys {
		for _, f := range q.fillers[:8] {
			lines = append(lines, q.chat(k, f))
		}
	}
	data := filepath.Join(t.TempDir(), "qa.jsonl")
	require.NoError(t, os.WriteFile(data, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	ref := dpFinetune(base, data, t.TempDir())
	res, err := ref.Run(context.Background())
	require.NoError(t, err)
	_, want := events(t, res.RunDir)

	runsDir := t.TempDir()
	r := mpitest.Launch(t, 2, "TestFinetuneDataParallel", 3*time.Minute, "TOY_DP_BASE="+base, "TOY_DP_DATA="+data, "TOY_DP_RUNS="+runsDir)
	require.NoError(t, r.Err, r.Output)
	_, got := events(t, onlyRun(t, runsDir))
	require.Len(t, got, len(want))
	for i := range want {
		assert.InEpsilon(t, want[i], got[i], 1e-5, "step %d", i)
	}
}
