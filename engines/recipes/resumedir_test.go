package recipes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
)

// TestResumeFromAnotherDirectory: a fine-tuning run and a ViT run started with relative paths
// (base, data, images, runs directory) resume from another working directory, and reach the
// weights of an uninterrupted run: their run_start keeps the paths absolute. A run written
// before that, whose run_start holds the relative paths, resumes from another directory too:
// its paths are found under the directory it was started from, which its run directory and
// runs directory tell.
func TestResumeFromAnotherDirectory(t *testing.T) {
	text := writeText(t)
	base := edgeBase(t, text, nil)
	start := t.TempDir()
	require.NoError(t, os.Symlink(base, filepath.Join(start, "base.gguf")))
	require.NoError(t, os.CopyFS(filepath.Join(start, "texts"), os.DirFS(text)))
	elsewhere := t.TempDir()

	newFinetune := func() Finetune {
		f := DefaultFinetune()
		f.Base, f.Data, f.RunsDir = "base.gguf", "texts", filepath.Join("out", "runs")
		f.Steps, f.Warmup, f.Batch, f.SeqLen, f.EvalEvery, f.EvalBatches, f.Threads, f.Schedule = 4, 0, 2, 8, 0, 1, 1, "constant"
		return f
	}
	whole := func() map[string][]byte {
		t.Chdir(start)
		f := newFinetune()
		f.RunsDir = filepath.Join("whole", "runs")
		res, err := f.Run(context.Background())
		require.NoError(t, err)
		return ggufTensors(t, filepath.Join(start, res.RunDir, "weights", adapterFile))
	}()
	// interrupted runs the first 2 steps from start and returns the run directory, absolute.
	interrupted := func(relative bool) string {
		t.Chdir(start)
		f := newFinetune()
		f.RunsDir = filepath.Join(f.RunsDir, map[bool]string{false: "new", true: "old"}[relative])
		f.Steps = 2
		res, err := f.Run(context.Background())
		require.NoError(t, err)
		dir := filepath.Join(start, res.RunDir)
		if relative { // as toy wrote it before: the paths as given, relative to start
			log := filepath.Join(dir, runs.EventsFile)
			b, err := os.ReadFile(log)
			require.NoError(t, err)
			s := strings.ReplaceAll(string(b), `"`+filepath.Join(start, "base.gguf")+`"`, `"base.gguf"`)
			s = strings.ReplaceAll(s, `"`+filepath.Join(start, "texts")+`"`, `"texts"`)
			require.NotEqual(t, string(b), s)
			require.NoError(t, os.WriteFile(log, []byte(s), 0o644))
		} else {
			assert.Contains(t, runConfigOf(t, dir), filepath.Join(start, "base.gguf"), "the run_start keeps the base's absolute path")
		}
		return dir
	}
	for _, relative := range []bool{false, true} {
		dir := interrupted(relative)
		t.Chdir(elsewhere)
		f := DefaultFinetune()
		f.Resume, f.ResumeSteps = dir, 4
		_, err := f.Run(context.Background())
		require.NoError(t, err, "relative %v", relative)
		assert.Equal(t, whole, ggufTensors(t, filepath.Join(dir, "weights", adapterFile)), "relative %v: the uninterrupted run's adapter", relative)
	}

	// ViT: the images a run reads again on resume.
	t.Chdir(start)
	v := tinyViTRecipe(t)
	v.Shapes, v.Held, v.Steps, v.Warmup, v.EvalEvery, v.Batch, v.Schedule = 0, 4, 2, 0, 0, 4, "constant"
	require.NoError(t, data.WriteShapesFolder(filepath.Join(start, "imgs"), 40, 16, 1))
	v.Images, v.RunsDir = "imgs", "vruns"
	res, err := v.Run(context.Background())
	require.NoError(t, err)
	t.Chdir(elsewhere)
	r := tinyViTRecipe(t)
	r.Resume, r.ResumeSteps = filepath.Join(start, res.RunDir), 3
	_, err = r.Run(context.Background())
	require.NoError(t, err)
}

// runConfigOf is the text of a run's event log's first line (its run_start).
func runConfigOf(t *testing.T, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, runs.EventsFile))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(b), "\n")
	return first
}
