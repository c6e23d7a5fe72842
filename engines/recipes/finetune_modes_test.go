package recipes

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// qaData writes the task's training conversations as chat JSONL and as plain text, and
// returns both paths and some held-out questions.
func qaData(t *testing.T, q *qaTask) (chat, text string, held [][2]string) {
	var lines []string
	for i, k := range q.keys {
		for j, f := range q.fillers {
			if (i+j)%4 == 0 {
				if len(held) < 16 {
					held = append(held, [2]string{k, f})
				}
				continue
			}
			lines = append(lines, q.chat(k, f))
		}
	}
	dir := t.TempDir()
	chat, text = filepath.Join(dir, "qa.jsonl"), filepath.Join(dir, "qa.txt")
	require.NoError(t, os.WriteFile(chat, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	var sb strings.Builder
	for _, k := range q.keys {
		for _, f := range q.fillers {
			sb.WriteString(k + " " + f + " is " + q.answer[k] + ".\n")
		}
	}
	require.NoError(t, os.WriteFile(text, []byte(sb.String()), 0o644))
	return chat, text, held
}

// stepZeroLoss is the held-out loss a run logged before its first step.
func stepZeroLoss(t *testing.T, dir string) float64 {
	run, err := runs.OpenRun(dir)
	require.NoError(t, err)
	defer run.Close()
	for _, e := range run.Events {
		if ev, ok := e.Data.(runs.Eval); ok && ev.Step == 0 {
			return ev.Loss
		}
	}
	t.Fatalf("%s logged no step-0 evaluation", dir)
	return 0
}

// ggufTensors reads every tensor's data of a GGUF file, by name.
func ggufTensors(t *testing.T, path string) map[string][]byte {
	g, err := ggml.OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	out := map[string][]byte{}
	for _, ti := range g.Tensors() {
		out[ti.Name], err = g.ReadTensorData(ti.Name)
		require.NoError(t, err)
	}
	return out
}

// resumesBitForBit checks that f run for 6 steps, and for 3 then resumed to 6, end with the
// same weights.
func resumesBitForBit(t *testing.T, f Finetune) {
	f.Steps, f.Warmup, f.Out = 6, 2, nil
	whole, err := f.Run(context.Background())
	require.NoError(t, err)
	half := f
	half.Steps = 3
	first, err := half.Run(context.Background())
	require.NoError(t, err)
	_, err = (&Finetune{Resume: first.RunDir, ResumeSteps: 6}).Run(context.Background())
	require.NoError(t, err)
	want := ggufTensors(t, filepath.Join(whole.RunDir, "weights", modelFile))
	got := ggufTensors(t, filepath.Join(first.RunDir, "weights", modelFile))
	require.Equal(t, len(want), len(got))
	for name, w := range want {
		assert.True(t, bytes.Equal(w, got[name]), "%s: a resumed run's weights equal the uninterrupted run's", name)
	}
}

// TestFullFinetune trains every weight of a base on chat data (masked loss): the held-out loss
// drops, the checkpoint keeps the base's architecture, tokenizer and chat template and runs in
// the decoder; -freeze-embeddings keeps the base's embeddings; a resumed run (text data) is
// bit for bit.
func TestFullFinetune(t *testing.T) {
	q := newQATask()
	base := tinyBase(t, q)
	chat, text, held := qaData(t, q)
	f := DefaultFullFinetune()
	f.Base, f.Data, f.RunsDir = base, chat, t.TempDir()
	f.Steps, f.Batch, f.SeqLen, f.LR, f.MinLR, f.Warmup = 30, 8, 24, 3e-3, 3e-4, 5
	f.EvalEvery, f.SaveEvery, f.SaveMinutes = 0, 0, 0
	var out strings.Builder
	f.Out = &out
	res, err := f.Run(context.Background())
	require.NoError(t, err, out.String())
	before := stepZeroLoss(t, res.RunDir)
	t.Logf("held-out loss %.3f → %.3f\n%s", before, res.HeldOutLoss, out.String())
	assert.Less(t, res.HeldOutLoss, before-0.5, "the held-out loss drops")
	assert.Contains(t, out.String(), "full fine-tune of")

	ckpt := filepath.Join(res.RunDir, "weights", modelFile)
	src, err := decoding.OpenModel(base, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer src.Close()
	m, err := decoding.OpenModel(ckpt, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, src.Arch, m.Arch, "the checkpoint keeps the base's architecture")
	assert.Equal(t, src.Meta["tokenizer.chat_template"], m.Meta["tokenizer.chat_template"])
	assert.Equal(t, src.Meta["tokenizer.ggml.tokens"], m.Meta["tokenizer.ggml.tokens"])
	_, err = tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	require.NoError(t, err)
	t.Logf("held-out accuracy of the fine-tuned model: %.0f%%", 100*accuracy(t, q, ckpt, "", held))

	frozen := f
	frozen.Steps, frozen.Warmup, frozen.Out, frozen.FreezeEmbeddings = 2, 1, nil, true
	res, err = frozen.Run(context.Background())
	require.NoError(t, err)
	got := ggufTensors(t, filepath.Join(res.RunDir, "weights", modelFile))
	want := ggufTensors(t, base)
	assert.True(t, bytes.Equal(want["token_embd.weight"], got["token_embd.weight"]), "frozen embeddings stay the base's")
	assert.False(t, bytes.Equal(want["blk.0.attn_q.weight"], got["blk.0.attn_q.weight"]), "the rest trains")

	f.Data = text
	resumesBitForBit(t, f)
}

// TestWarmStart trains a new model with the donor's tokenizer and embeddings: frozen, they stay
// the donor's; the checkpoint carries the donor's tokenizer; a resumed run is bit for bit (with
// the embeddings frozen for its first steps, past the interruption); a
// donor of another width is refused, naming both, before a run directory is made.
func TestWarmStart(t *testing.T) {
	q := newQATask()
	donor := tinyBase(t, q) // d_model 64
	chat, text, _ := qaData(t, q)
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.DModel, c.NLayers = 64, 1
	f := DefaultWarmStart()
	f.NewModel = &c
	f.Base, f.Data, f.RunsDir = donor, text, t.TempDir()
	f.Steps, f.Batch, f.SeqLen, f.Warmup = 4, 4, 24, 1
	f.EvalEvery, f.SaveEvery, f.SaveMinutes = 0, 0, 0
	f.FreezeEmbeddings = true
	var out strings.Builder
	f.Out = &out
	res, err := f.Run(context.Background())
	require.NoError(t, err, out.String())
	t.Log(out.String())
	assert.Contains(t, out.String(), "warm start: a new model (1 layers, d_model 64")
	ckpt := filepath.Join(res.RunDir, "weights", modelFile)
	got, want := ggufTensors(t, ckpt), ggufTensors(t, donor)
	assert.True(t, bytes.Equal(want["token_embd.weight"], got["token_embd.weight"]), "the embeddings are the donor's")
	assert.False(t, bytes.Equal(want["blk.0.attn_q.weight"], got["blk.0.attn_q.weight"]), "the rest is new")
	m, err := decoding.OpenModel(ckpt, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	assert.Equal(t, 1, m.Arch.NLayers)
	assert.NotEmpty(t, m.Meta["tokenizer.chat_template"], "the donor's tokenizer and template")
	m.Close()

	f.FreezeEmbeddings, f.FreezeEmbeddingsSteps, f.Data = false, 4, chat
	resumesBitForBit(t, f) // the embeddings, held for 4 steps, are released after the interruption at 3

	wide := c
	wide.DModel = 32
	f.NewModel, f.RunsDir = &wide, filepath.Join(t.TempDir(), "runs")
	_, err = f.Run(context.Background())
	assert.ErrorContains(t, err, "width 64, the model's d_model is 32")
	assert.NoDirExists(t, f.RunsDir, "a refused run leaves nothing behind")
}

// twoRanks is a Replicas of size 2 that Validate can consult (it reduces nothing).
type twoRanks struct{}

func (twoRanks) AllReduceSum([]float32) error                    { return nil }
func (twoRanks) Rank() int                                       { return 0 }
func (twoRanks) Size() int                                       { return 2 }
func (twoRanks) BroadcastString(s string, _ int) (string, error) { return s, nil }
func (twoRanks) AllReduceMax([]float64) error                    { return nil }

// TestFinetuneRecomputeNotReplicated: -recompute is refused in a data-parallel run (a
// recomputed block steps its adapters before the ranks could average their gradients), and
// accepted alone.
func TestFinetuneRecomputeNotReplicated(t *testing.T) {
	f := DefaultFinetune()
	f.Base, f.Data, f.Recompute = "base.gguf", "data.txt", 1
	require.NoError(t, f.Validate())
	f.Replicas = twoRanks{}
	assert.ErrorContains(t, f.Validate(), "recomputing blocks is not data-parallel")
}
