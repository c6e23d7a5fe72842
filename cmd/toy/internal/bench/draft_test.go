package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

func TestBenchModelDraft(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	out, errOut, code := runToy("bench", "model", "-m", model, "-draft", "self", "-p", "4", "-n", "8", "-r", "1", "-t", "1", "-draft-n", "4", "-draft-p-min", "0,0.99")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "| speculative | tg8   |   4 |  0.00 |")
	assert.Contains(t, out, "| speculative | tg8   |   4 |  0.99 |")
	assert.NotContains(t, out, "false", "identical output in every row")
	_, errOut, code = runToy("bench", "model", "-m", model, "-draft", "self", "-p", "4", "-n", "8", "-r", "1", "-t", "1", "-draft-p-min", "0,x")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not a probability")
}
