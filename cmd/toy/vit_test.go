package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
)

// TestTrainViTAndClassify: toy train-vit on an ImageFolder of shapes writes a checkpoint that
// toy classify reads, printing top-k class names with probabilities; a bad image is named.
func TestTrainViTAndClassify(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, data.WriteShapesFolder(dir, 90, 16, 1))
	runsDir := t.TempDir()
	out, errOut, code := runToy("train-vit", "-data", dir, "-held", "30", "-steps", "20", "-batch", "8", "-eval-every", "10",
		"-image-size", "16", "-patch-size", "4", "-channels", "1", "-d-model", "16", "-n-heads", "2", "-d-ff", "32",
		"-n-layers", "1", "-classes", "3", "-runs", runsDir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "held-out loss")
	models, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "model.gguf"))
	require.NoError(t, err)
	require.Len(t, models, 1)

	img := filepath.Join(dir, "cross", "0001.png")
	out, errOut, code = runToy("classify", "-m", models[0], "-k", "2", img)
	require.Equal(t, 0, code, errOut)
	line := strings.TrimSpace(out)
	assert.True(t, strings.HasPrefix(line, img+":"), line)
	assert.Len(t, strings.Fields(line), 5, "the path and two classes with probabilities: %s", line)

	_, errOut, code = runToy("classify", "-m", models[0], filepath.Join(dir, "missing.png"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "missing.png")
}
