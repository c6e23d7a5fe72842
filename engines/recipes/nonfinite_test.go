package recipes

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
)

// poison sets one value of the named weight of m to NaN.
func poison(name string) func(m *training.Model) {
	return func(m *training.Model) {
		for _, w := range m.Weights() {
			if w.Name() != name {
				continue
			}
			vals, err := w.F32()
			if err != nil {
				panic(err)
			}
			vals[len(vals)/3] = float32(math.NaN())
			if err := w.SetF32(vals); err != nil {
				panic(err)
			}
			return
		}
		panic("no weight " + name)
	}
}

// noCheckpoint checks that nothing under runsDir is a checkpoint: no manifest, no GGUF file.
func noCheckpoint(t *testing.T, runsDir string) {
	t.Helper()
	filepath.WalkDir(runsDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (d.Name() == runs.CheckpointFile || strings.HasSuffix(d.Name(), ".gguf")) {
			t.Errorf("a checkpoint was saved: %s", p)
		}
		return nil
	})
}

// TestTrainersStopAtNonFinite: every trainer stops with an error naming the step and the
// cause when a step's loss or gradient norm is not finite, and saves nothing: a learning rate
// of 1e30 (the weights overflow) in llama and GPT-2 from scratch, ViT and LoRA, and a base with
// one NaN weight in LoRA, full fine-tuning and a warm start (whose donor's embeddings hold it),
// which used to fine-tune to an all-NaN adapter with a loss of "-0.0000".
func TestTrainersStopAtNonFinite(t *testing.T) {
	text := writeText(t)
	huge := func(a *train.AdamW, lr *float64) { *lr, a.WeightDecay = 1e30, 0 }
	scratch := func(gpt2 bool) func(t *testing.T, runsDir string) error {
		return func(t *testing.T, runsDir string) error {
			s := tinyScratch(t, text)
			if gpt2 {
				s = tinyGPT2Scratch(t, text)
			}
			s.RunsDir, s.Steps, s.Warmup, s.EvalEvery, s.SampleTokens, s.Schedule = runsDir, 10, 0, 0, 0, "constant"
			huge(&s.AdamW, &s.LR)
			_, err := s.Run(context.Background())
			return err
		}
	}
	finetune := func(f Finetune, weight string, lr bool) func(t *testing.T, runsDir string) error {
		return func(t *testing.T, runsDir string) error {
			var edit func(*training.Model)
			if weight != "" {
				edit = poison(weight)
			}
			f.Base, f.Data, f.RunsDir = writeBase(t, text, nil, edit), text, runsDir
			f.Steps, f.Warmup, f.Batch, f.SeqLen, f.EvalEvery, f.EvalBatches, f.Threads, f.Schedule = 10, 0, 2, 8, 0, 1, 1, "constant"
			if f.NewModel != nil {
				m := *f.NewModel
				m.DModel, m.DFF, m.NHeads, m.NKVHeads, m.NLayers, m.Context = 32, 64, 4, 2, 1, 16
				f.NewModel = &m
			}
			if lr {
				huge(&f.AdamW, &f.LR)
			}
			_, err := f.Run(context.Background())
			return err
		}
	}
	for _, row := range []struct {
		name string
		run  func(t *testing.T, runsDir string) error
		want string // in the error besides the step
	}{
		{"llama lr 1e30", scratch(false), ""},
		{"gpt2 lr 1e30", scratch(true), ""},
		{"vit lr 1e30", func(t *testing.T, runsDir string) error {
			v := tinyViTRecipe(t)
			v.Shapes, v.Held, v.Steps, v.Warmup, v.EvalEvery, v.Batch, v.RunsDir, v.Schedule = 40, 8, 10, 0, 0, 4, runsDir, "constant"
			huge(&v.AdamW, &v.LR)
			_, err := v.Run(context.Background())
			return err
		}, ""},
		{"lora lr 1e30", finetune(DefaultFinetune(), "", true), ""},
		{"lora NaN base", finetune(DefaultFinetune(), "blk.0.attn_q.weight", false), "base.gguf"},
		{"lora NaN in a frozen feed-forward", finetune(DefaultFinetune(), "blk.1.ffn_down.weight", false), "base.gguf"},
		{"full NaN base", finetune(DefaultFullFinetune(), "blk.1.attn_v.weight", false), "base.gguf"},
		{"warm start NaN donor embedding", finetune(DefaultWarmStart(), "token_embd.weight", false), "base.gguf"},
	} {
		t.Run(row.name, func(t *testing.T) {
			runsDir := filepath.Join(t.TempDir(), "runs")
			err := row.run(t, runsDir)
			require.Error(t, err)
			msg := err.Error()
			var nf *training.NonFiniteError
			if errors.As(err, &nf) {
				assert.Regexp(t, `^step \d+: the (loss|gradient norm) is`, msg)
				assert.Contains(t, msg, "stopped: the run has no checkpoint")
			} else {
				assert.Contains(t, msg, "before the first step: the held-out loss")
			}
			assert.Contains(t, msg, row.want)
			noCheckpoint(t, runsDir)
		})
	}
}

// TestLoopKeepsTheLastGoodCheckpoint: the recipes' loop stops at the first non-finite step
// with its number, keeping the checkpoint saved before it (and saying so), and saves no
// checkpoint of weights that are not finite (its finite check), even at the end of a run or
// when it would save by steps.
func TestLoopKeepsTheLastGoodCheckpoint(t *testing.T) {
	newLoop := func(t *testing.T, bad int, finite func() error) (*loop, *[]int) {
		run, err := runs.Create(t.TempDir(), "run")
		require.NoError(t, err)
		t.Cleanup(func() { run.Close() })
		var saved []int
		l := &loop{run: run, sched: train.Constant{Rate: 1e-3}, adamw: train.FromScratch(), steps: 8, saveEvery: 2,
			step: func(step int, _, _ [7]float32) (float32, error) {
				switch {
				case step == bad:
					return 0, &training.NonFiniteError{Quantity: "gradient norm", Value: math.Inf(1)}
				case step == bad+100:
					return float32(math.NaN()), nil // a loss the step did not check
				}
				return 1, nil
			},
			evaluate: func() (runs.Eval, error) { return runs.Eval{Loss: 1}, nil },
			save:     func(step int) error { saved = append(saved, step); return nil },
			finite:   finite}
		return l, &saved
	}
	l, saved := newLoop(t, 5, nil)
	stopped, err := l.do(context.Background(), &Result{})
	require.Error(t, err)
	assert.Equal(t, 5, stopped)
	assert.Equal(t, []int{2, 4}, *saved, "checkpoints before the bad step only")
	assert.Contains(t, err.Error(), "step 5: the gradient norm is +Inf")
	assert.Contains(t, err.Error(), "stopped: its checkpoint of step 4 is kept")

	l, saved = newLoop(t, -100+3, nil) // step 3 returns a NaN loss without an error
	_, err = l.do(context.Background(), &Result{})
	require.Error(t, err)
	assert.Equal(t, []int{2}, *saved)
	assert.Contains(t, err.Error(), "step 3: the loss is NaN")

	l, saved = newLoop(t, 1000, func() error { return errors.New("w holds NaN") })
	_, err = l.do(context.Background(), &Result{})
	require.Error(t, err)
	assert.Empty(t, *saved, "no checkpoint of non-finite weights")
	assert.Contains(t, err.Error(), "step 2: the weights are not finite (w holds NaN), so no checkpoint is saved; the run has no checkpoint")
}
