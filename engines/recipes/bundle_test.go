package recipes

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
)

// The run bundles under testdata/bundles were written by toy train before the recipes' options
// were declared in specs/engines (commit 8f5632d), so their config{} keys are the ones the
// option groups (config.Training, Sequences, Compute, FinalSample) must go on reading:
//
//	scratch: toy train -text T -vocab 260 -d-model 16 -d-ff 32 -n-heads 2 -n-kv-heads 1 -n-layers 1
//	         -context 16 -seq 16 -steps 6 -batch 2 -warmup 1 -eval-every 3 -eval-batches 2
//	         -save-every 0 -save-minutes 0 -sample 4 -prompt func -t 1
//	vit:     toy train -arch vit -preset vit-tiny -image-size 16 -patch-size 4 -channels 1
//	         -d-model 16 -n-heads 2 -d-ff 32 -n-layers 1 -shapes 40 -steps 4 -batch 8 -held 8 -t 1
//	         -save-minutes 0 -save-every 0 -eval-every 2

// bundleCopy copies the bundle testdata/bundles/name to a temporary directory (a resumed run
// writes into it) and returns the copy.
func bundleCopy(t *testing.T, name string) string {
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "bundles", name))))
	return dir
}

// newSteps is the steps a resumed run logged after step from: each finite.
func newSteps(t *testing.T, dir string, from int) []int {
	events, err := runs.ReadEvents(filepath.Join(dir, runs.EventsFile))
	require.NoError(t, err)
	var steps []int
	for _, e := range events {
		if st, ok := e.Data.(runs.Step); ok && st.Step >= from {
			assert.False(t, math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0), "step %d's loss %v", st.Step, st.Loss)
			steps = append(steps, st.Step)
		}
	}
	return steps
}

// TestResumeScratchBundleOfBefore: a language model's bundle resumes to a new total, with every
// option the command line gave it back in the option groups.
func TestResumeScratchBundleOfBefore(t *testing.T) {
	dir := bundleCopy(t, "scratch")
	s := DefaultScratch()
	s.Resume, s.ResumeSteps = dir, 8
	res, err := s.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 8, res.Steps)
	assert.Equal(t, []int{6, 7}, newSteps(t, dir, 6), "steps 7 and 8 (0-based 6, 7) appended")
	// What the old command line set, read back from config{} (the defaults differ in each).
	assert.Equal(t, 2, s.Batch)
	assert.Equal(t, 16, s.SeqLen)
	assert.Equal(t, 1, s.Warmup)
	assert.Equal(t, 3, s.EvalEvery)
	assert.Equal(t, 2, s.EvalBatches)
	assert.Equal(t, 0, s.SaveEvery)
	assert.Equal(t, 0.0, s.SaveMinutes)
	assert.Equal(t, 1, s.Threads)
	assert.Equal(t, 4, s.SampleTokens)
	assert.Equal(t, "func", s.SamplePrompt)
	assert.Equal(t, 2e-3, s.LR)
	assert.Equal(t, 16, s.Model.DModel, "the model from the checkpoint")
}

// TestResumeViTBundleOfBefore: likewise a ViT classifier's bundle.
func TestResumeViTBundleOfBefore(t *testing.T) {
	dir := bundleCopy(t, "vit")
	v := DefaultViT()
	v.Resume, v.ResumeSteps = dir, 6
	res, err := v.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 6, res.Steps)
	assert.Equal(t, []int{4, 5}, newSteps(t, dir, 4))
	assert.Equal(t, 8, v.Batch)
	assert.Equal(t, 8, v.Held)
	assert.Equal(t, 40, v.Shapes)
	assert.Equal(t, 2, v.EvalEvery)
	assert.Equal(t, 0, v.SaveEvery)
	assert.Equal(t, 1, v.Threads)
	assert.Equal(t, 0, v.Warmup)
	assert.Equal(t, 16, v.Model.ImageSize)
}

// TestTrainingOptionsNameTheSchedules: the -schedule help the spec gives names every schedule
// train.ParseSchedule takes, and a preset's schedule is one of them.
func TestTrainingOptionsNameTheSchedules(t *testing.T) {
	var usage string
	for _, o := range config.TrainingOptions() {
		if o.JSON == "schedule" {
			usage = o.Usage
		}
	}
	require.NotEmpty(t, usage)
	for _, n := range train.ScheduleNames() {
		assert.Contains(t, usage, n)
	}
	for _, name := range config.TrainingPresetNames() {
		p, err := config.TrainingPreset(name)
		require.NoError(t, err)
		_, err = train.ParseSchedule(p.Schedule, p.LR, p.MinLR, p.Warmup, p.Steps)
		assert.NoError(t, err, "preset %s", name)
	}
}
