package recipes

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	chatfmt "github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// qaTask is a synthetic question/answer set: the question is a key word and a number, the
// answer the key's value under a fixed random mapping, whatever the filler. The training
// conversations and the held-out questions share no (key, filler) pair.
type qaTask struct {
	keys, values, fillers []string
	answer                map[string]string
}

func newQATask() *qaTask {
	q := &qaTask{answer: map[string]string{}}
	q.keys = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	q.values = []string{"red", "green", "blue", "cyan", "pink", "gold", "gray", "white"}
	for i := range 48 {
		q.fillers = append(q.fillers, fmt.Sprint(i))
	}
	perm := rand.New(rand.NewPCG(7, 8)).Perm(len(q.values))
	for i, k := range q.keys {
		q.answer[k] = q.values[perm[i]]
	}
	return q
}

func (q *qaTask) chat(k, f string) string {
	return fmt.Sprintf(`{"messages":[{"role":"user","content":"%s %s"},{"role":"assistant","content":"%s"}]}`, k, f, q.answer[k])
}

// tinyBase writes a random llama model with a byte-level BPE tokenizer trained on the task's
// ChatML renderings (ChatML's markers are control tokens) and a ChatML chat template.
func tinyBase(t *testing.T, q *qaTask) string {
	var texts [][]byte
	for _, k := range q.keys {
		for _, f := range q.fillers {
			s, err := chatfmt.ChatML.Apply([]chatfmt.Message{{Role: "user", Content: k + " " + f}, {Role: "assistant", Content: q.answer[k]}}, false)
			require.NoError(t, err)
			texts = append(texts, []byte(s))
		}
	}
	tok, err := tokenizer.Train(slices.Values(texts), 300, tokenizer.TrainOptions{
		Special: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, EOS: "<|endoftext|>"})
	require.NoError(t, err)
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.Vocab, c.Context, c.DModel, c.DFF, c.NLayers = tok.VocabSize(), 32, 64, 128, 2
	c.InitScale = 0.3 // logits large enough for the adapters to make an answer certain
	be, err := ggml.NewCPUBackend(2)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	kvs := []transformer.KV{{Key: "tokenizer.chat_template", Value: "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}}
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
	}
	path := filepath.Join(t.TempDir(), "base.gguf")
	require.NoError(t, m.Save(path, kvs))
	return path
}

// accuracy is the share of held-out questions whose greedy answer under the base (with the
// adapter, when not "") is right.
func accuracy(t *testing.T, q *qaTask, base, adapter string, held [][2]string) float64 {
	opts := decoding.ModelOptions{Threads: 2}
	if adapter != "" {
		opts.LoRA = []decoding.LoRA{{Path: adapter}}
	}
	m, err := decoding.OpenModel(base, opts)
	require.NoError(t, err)
	defer m.Close()
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	require.NoError(t, err)
	ev, err := training.NewEvaluator(training.Frozen{GGUFModel: m}, 32, 1)
	require.NoError(t, err)
	defer ev.Close()
	end, _ := tok.ID("<|im_end|>")
	right := 0
	for _, kf := range held {
		prompt, err := chatfmt.ChatML.Apply([]chatfmt.Message{{Role: "user", Content: kf[0] + " " + kf[1]}}, true)
		require.NoError(t, err)
		ids := tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true})
		out, err := ev.Greedy(ids, 8, end)
		require.NoError(t, err)
		text, err := tok.Decode(out[len(ids):], tokenizer.DecodeOptions{Special: true})
		require.NoError(t, err)
		if strings.HasPrefix(text, q.answer[kf[0]]+"<|im_end|>") {
			right++
		} else if adapter != "" {
			t.Logf("%v: %q (want %q)", kf, text, q.answer[kf[0]])
		}
	}
	return float64(right) / float64(len(held))
}

// TestFinetuneLearns fine-tunes a random base with LoRA on chat data (loss on the assistant's
// replies) until it answers held-out questions it could not answer before (from about chance,
// 1/8, to at least 90%); a resumed run, and one recomputing a block, give the uninterrupted
// run's adapter bit for bit.
func TestFinetuneLearns(t *testing.T) {
	q := newQATask()
	base := tinyBase(t, q)
	var lines []string
	var held [][2]string
	for i, k := range q.keys {
		for j, f := range q.fillers {
			if (i+j)%4 == 0 {
				held = append(held, [2]string{k, f})
				continue
			}
			lines = append(lines, q.chat(k, f))
		}
	}
	dataPath := filepath.Join(t.TempDir(), "qa.jsonl")
	require.NoError(t, os.WriteFile(dataPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

	var probe [][2]string // half the held-out questions, for speed
	for i := 0; i < len(held); i += 2 {
		probe = append(probe, held[i])
	}
	held = probe
	before := accuracy(t, q, base, "", held)
	f := DefaultFinetune()
	f.Base, f.Data, f.RunsDir = base, dataPath, t.TempDir()
	f.LoRA = LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"all"}, Seed: 1}
	f.Steps, f.Batch, f.SeqLen, f.LR, f.MinLR, f.Warmup = 120, 8, 24, 1e-2, 1e-3, 10
	f.EvalEvery, f.SaveEvery, f.SaveMinutes = 0, 0, 0
	var out strings.Builder
	f.Out = &out
	res, err := f.Run(context.Background())
	require.NoError(t, err, out.String())
	adapter := filepath.Join(res.RunDir, "weights", adapterFile)
	after := accuracy(t, q, base, adapter, held)
	t.Logf("held-out accuracy %.0f%% before, %.0f%% after; held-out loss %.3f\n%s", 100*before, 100*after, res.HeldOutLoss, out.String())
	assert.LessOrEqual(t, before, 0.4, "the base answers at about chance")
	assert.GreaterOrEqual(t, after, 0.9, "the adapter answers held-out questions")
	assert.Contains(t, out.String(), "loss on the assistant's tokens")

	// Resume is bit for bit: 6 steps at once, or 3 steps and a resume to 6, give the same
	// adapter; and so does recomputing the first block in the backward pass.
	short := f
	short.Steps, short.Warmup, short.Out, short.Recompute = 6, 2, nil, 1
	whole, err := short.Run(context.Background())
	require.NoError(t, err)
	half := short
	half.Steps, half.Recompute = 3, 0
	first, err := half.Run(context.Background())
	require.NoError(t, err)
	resumed := Finetune{Resume: first.RunDir, ResumeSteps: 6}
	_, err = resumed.Run(context.Background())
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(whole.RunDir, "weights", adapterFile))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(first.RunDir, "weights", adapterFile))
	require.NoError(t, err)
	assert.Equal(t, len(want), len(got))
	assert.True(t, bytes.Equal(tensorBytes(t, want), tensorBytes(t, got)), "a resumed run's adapter equals the uninterrupted run's")
}

// tensorBytes is the tail of a GGUF file: its tensor data (the metadata holds the run id).
func tensorBytes(t *testing.T, b []byte) []byte {
	require.Greater(t, len(b), 4096)
	return b[len(b)-4096:]
}
