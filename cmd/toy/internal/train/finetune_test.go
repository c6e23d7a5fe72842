package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/runs"
)

// TestFinetuneModeUsage: flags of another mode, and both modes at once, are usage errors
// (status 2) naming the flags.
func TestFinetuneModeUsage(t *testing.T) {
	base := []string{"finetune", "-m", "base.gguf", "-data", "d.txt"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-full", "-warm-start"}, "-full and -warm-start exclude each other"},
		{[]string{"-full", "-r", "8", "-lora-targets", "all"}, "-r, -lora-targets: LoRA flags, but the mode is -full"},
		{[]string{"-warm-start", "-alpha", "8"}, "-alpha: LoRA flags, but the mode is -warm-start"},
		{[]string{"-preset", "tiny"}, "-preset: the new model's shape is for -warm-start only"},
		{[]string{"-full", "-d-model", "64", "-n-layers", "2"}, "-d-model, -n-layers: the new model's shape is for -warm-start only"},
		{[]string{"-freeze-embeddings"}, "-freeze-embeddings and -freeze-embeddings-steps are for -full and -warm-start"},
		{[]string{"-freeze-embeddings-steps", "3"}, "-freeze-embeddings and -freeze-embeddings-steps are for -full and -warm-start"},
		{[]string{"-full", "-recompute", "2"}, "-recompute: LoRA flags, but the mode is -full"},
		{[]string{"-warm-start", "-vocab", "100"}, "-vocab: a warm-started model's vocabulary is the donor's"},
		{[]string{"-warm-start", "-preset", "huge"}, `no Llama preset "huge"`},
		{[]string{"-warm-start", "-n-heads", "5"}, "d_model 192 is not a multiple of n_heads 5"},
	} {
		args := append(append([]string(nil), base...), c.args...)
		name := strings.Join(c.args, " ")
		out, errOut, code := runToy(args...)
		assert.Equal(t, 2, code, "%s: %s", name, errOut)
		assert.Empty(t, out, name)
		assert.Equal(t, 1, strings.Count(errOut, c.msg), "%s: the message once in %q", name, errOut)
	}
	_, errOut, code := runToy("finetune", "-resume", "runs/x", "-full")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "-full would change the run")
}

// TestFinetuneModeDefaults: the flags' defaults are the mode's (recipes.DefaultFinetune,
// DefaultFullFinetune, DefaultWarmStart): -h, after the mode flag, shows them, and a -full run
// given none of them records them in its run_start, where a flag given wins.
func TestFinetuneModeDefaults(t *testing.T) {
	for _, c := range []struct {
		mode []string
		want recipes.Finetune
	}{
		{nil, recipes.DefaultFinetune()},
		{[]string{"-full"}, recipes.DefaultFullFinetune()},
		{[]string{"-warm-start"}, recipes.DefaultWarmStart()},
	} {
		_, help, code := runToy(append(append([]string{"finetune"}, c.mode...), "-h")...)
		require.Equal(t, 0, code, help)
		for flag, v := range map[string]string{
			"lr": strconv.FormatFloat(c.want.LR, 'g', -1, 64), "min-lr": strconv.FormatFloat(c.want.MinLR, 'g', -1, 64),
			"warmup": strconv.Itoa(c.want.Warmup), "weight-decay": strconv.FormatFloat(c.want.AdamW.WeightDecay, 'g', -1, 64),
		} {
			if v == "0" { // the flag package shows no zero default
				assert.Regexp(t, `(?m)^  -`+flag+` \w+\n[^\n(]*$`, help, "%v: -%s", c.mode, flag)
				continue
			}
			assert.Regexp(t, `(?m)^  -`+flag+` \w+\n.*\(default `+regexp.QuoteMeta(v)+`\)$`, help, "%v: -%s", c.mode, flag)
		}
	}
	assert.NotEqual(t, recipes.DefaultFinetune().LR, recipes.DefaultFullFinetune().LR, "the modes' defaults differ")

	model := clitest.TinyCheckpoint(t)
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\n", 40)), 0o644))
	full := recipes.DefaultFullFinetune()
	for _, c := range []struct {
		flags  []string
		lr, wd float64
	}{
		{nil, full.LR, full.AdamW.WeightDecay},
		{[]string{"-lr", "1e-4", "-weight-decay", "0.2"}, 1e-4, 0.2},
	} {
		runsDir := t.TempDir()
		_, errOut, code := runToy(append([]string{"finetune", "-full", "-m", model, "-data", text, "-steps", "1", "-batch", "2", "-seq", "16",
			"-eval-batches", "1", "-runs", runsDir, "-t", "1"}, c.flags...)...)
		require.Equal(t, 0, code, errOut)
		logs, err := filepath.Glob(filepath.Join(runsDir, "*", runs.EventsFile))
		require.NoError(t, err)
		require.Len(t, logs, 1)
		events, err := runs.ReadEvents(logs[0])
		require.NoError(t, err)
		var cfg struct {
			LR    float64 `json:"lr"`
			MinLR float64 `json:"min_lr"`
			AdamW struct {
				WeightDecay float64 `json:"weight_decay"`
			} `json:"adamw"`
		}
		for _, e := range events {
			if rs, ok := e.Data.(runs.RunStart); ok {
				raw, _ := rs.Config.(json.RawMessage)
				require.NoError(t, json.Unmarshal(raw, &cfg))
			}
		}
		assert.Equal(t, c.lr, cfg.LR, "%v", c.flags)
		assert.Equal(t, full.MinLR, cfg.MinLR, "%v", c.flags)
		assert.Equal(t, c.wd, cfg.AdamW.WeightDecay, "%v", c.flags)
	}
}
