package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// TestBenchFinetune: one mode runs in process and prints its result line; bad modes are usage
// errors.
func TestBenchFinetune(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	for _, mode := range []string{"lora-f32", "full-f32"} {
		out, errOut, code := runToy("bench", "finetune", "-preset", "tiny", "-mode", mode, "-base", model, "-seq", "8", "-steps", "1", "-t", "1", "-profile", "2")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, benchFinetuneResult+" ", mode)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == benchFinetuneResult {
				require.Len(t, f, 7, "the result line: trained, s/step, tokens/s, peak MiB, compute MiB, processor s/step")
				cpu, err := strconv.ParseFloat(f[6], 64)
				require.NoError(t, err)
				assert.Positive(t, cpu, "a step takes processor time")
			}
		}
		// -profile: the step node by node, by op and by kind, and the graphs' memory peaks.
		assert.Contains(t, errOut, mode+": one step node by node", mode)
		assert.Contains(t, errOut, "MUL_MAT", mode)
		assert.Contains(t, errOut, mode+": graph 1 of ", mode)
	}
	for _, c := range []struct{ args, msg string }{
		{"-modes lora-f7", `"f7" is not a ggml weight type`},
		{"-modes half-f16", `want lora-TYPE or full-TYPE`},
		{"-mode full-f16", "-mode needs -base"},
		{"-seq 4096", "-seq 4096 exceeds the smollm2-135m context 2048"},
	} {
		_, errOut, code := runToy(append([]string{"bench", "finetune"}, strings.Fields(c.args)...)...)
		assert.Equal(t, 2, code, "%s: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg)
	}
}
