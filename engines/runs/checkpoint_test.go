package runs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFiles(files map[string]string) func(dir string) error {
	return func(dir string) error {
		for n, v := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestCheckpointUnit saves checkpoints as units: a step directory and a manifest written last,
// the latest model linked at weights/model.gguf, older steps removed; a failed save keeps the
// previous checkpoint whole; a changed file or another run's manifest is refused.
func TestCheckpointUnit(t *testing.T) {
	r, err := Create(t.TempDir(), "run-a")
	require.NoError(t, err)
	defer r.Close()
	_, err = r.LatestCheckpoint()
	assert.ErrorIs(t, err, ErrNoCheckpoint)

	_, err = r.SaveCheckpoint(4, writeFiles(map[string]string{"model.gguf": "m4", "optimizer.gguf": "o4"}), "model.gguf")
	require.NoError(t, err)
	c, err := r.LatestCheckpoint()
	require.NoError(t, err)
	assert.Equal(t, 4, c.Step)
	assert.Equal(t, "run-a", c.RunID)
	assert.True(t, c.Has("optimizer.gguf"))
	b, err := os.ReadFile(c.Path("optimizer.gguf"))
	require.NoError(t, err)
	assert.Equal(t, "o4", string(b))
	b, err = os.ReadFile(filepath.Join(r.WeightsDir(), "model.gguf"))
	require.NoError(t, err)
	assert.Equal(t, "m4", string(b), "weights/model.gguf is the latest model")

	// A save that fails leaves the previous checkpoint, and no temporary directory.
	_, err = r.SaveCheckpoint(8, func(dir string) error {
		writeFiles(map[string]string{"model.gguf": "m8"})(dir)
		return errors.New("disk full")
	}, "model.gguf")
	assert.ErrorContains(t, err, "disk full")
	c, err = r.LatestCheckpoint()
	require.NoError(t, err)
	assert.Equal(t, 4, c.Step)
	entries, _ := os.ReadDir(r.WeightsDir())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{CheckpointFile, "model.gguf", "step-00000004"}, names)

	// A step directory a crash left without its manifest is ignored, then replaced.
	require.NoError(t, os.Mkdir(filepath.Join(r.WeightsDir(), "step-00000008"), 0o755))
	c, err = r.LatestCheckpoint()
	require.NoError(t, err)
	assert.Equal(t, 4, c.Step)
	_, err = r.SaveCheckpoint(8, writeFiles(map[string]string{"model.gguf": "m8", "optimizer.gguf": "o8"}), "model.gguf")
	require.NoError(t, err)
	c, err = r.LatestCheckpoint()
	require.NoError(t, err)
	assert.Equal(t, 8, c.Step)
	_, err = os.Stat(filepath.Join(r.WeightsDir(), "step-00000004"))
	assert.True(t, os.IsNotExist(err), "the older step is removed once the newer one is committed")
	b, _ = os.ReadFile(filepath.Join(r.WeightsDir(), "model.gguf"))
	assert.Equal(t, "m8", string(b))

	// Saving the step the checkpoint is at keeps it.
	_, err = r.SaveCheckpoint(8, func(string) error { t.Fatal("rewritten"); return nil })
	require.NoError(t, err)

	// A file changed under the manifest is refused.
	require.NoError(t, os.WriteFile(c.Path("optimizer.gguf"), []byte("o9"), 0o644))
	_, err = r.LatestCheckpoint()
	assert.ErrorContains(t, err, "not the file the manifest names")
	require.NoError(t, os.WriteFile(c.Path("optimizer.gguf"), []byte("o8"), 0o644))

	// Another run's checkpoint is refused (a second handle that reads the run: r holds the
	// writer's lock).
	other, err := Follow(r.Dir)
	require.NoError(t, err)
	defer other.Close()
	other.ID = "run-b"
	_, err = other.LatestCheckpoint()
	assert.ErrorContains(t, err, `saved by run "run-a"`)
}

// TestCheckpointLegacy reads the first layout, weights/model.gguf and optimizer.gguf without a
// manifest, and replaces it at the next save.
func TestCheckpointLegacy(t *testing.T) {
	r, err := Create(t.TempDir(), "old")
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, writeFiles(map[string]string{"model.gguf": "m", "optimizer.gguf": "o"})(r.WeightsDir()))
	c, err := r.LatestCheckpoint()
	require.NoError(t, err)
	assert.True(t, c.Legacy)
	assert.Equal(t, filepath.Join(r.WeightsDir(), "optimizer.gguf"), c.Path("optimizer.gguf"))
	_, err = r.SaveCheckpoint(3, writeFiles(map[string]string{"model.gguf": "m3", "optimizer.gguf": "o3"}), "model.gguf")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(r.WeightsDir(), "optimizer.gguf"))
	assert.True(t, os.IsNotExist(err), "the first layout's optimizer state is superseded")
	c, err = r.LatestCheckpoint()
	require.NoError(t, err)
	assert.False(t, c.Legacy)
	assert.Equal(t, 3, c.Step)
}
