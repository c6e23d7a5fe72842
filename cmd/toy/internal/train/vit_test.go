package train

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// TestTrainViTRefusesMPIRun: under mpirun every rank would train a ViT run of its own, so toy
// train -arch vit refuses a job of several ranks before it writes anything.
func TestTrainViTRefusesMPIRun(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	runsDir := t.TempDir()
	_, errOut, code := runToy(append([]string{"train", "-arch", "vit", "-shapes", "30", "-steps", "2", "-runs", runsDir}, clitest.TinyViTFlags...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "does not train data-parallel yet")
	entries, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no run is written")
}
