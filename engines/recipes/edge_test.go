package recipes

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// edgeBase writes a random llama base of the tiny preset changed by shape, with a byte-level
// BPE tokenizer of 300 tokens trained on the text under dir (as toy train makes one).
func edgeBase(t *testing.T, text string, shape func(*config.Llama)) string {
	t.Helper()
	return writeBase(t, text, shape, nil)
}

// writeBase is edgeBase, with edit (when not nil) changing the initialised model's weights
// before it is saved.
func writeBase(t *testing.T, text string, shape func(*config.Llama), edit func(*training.Model)) string {
	t.Helper()
	docs, err := data.ReadTexts(text, 0)
	require.NoError(t, err)
	texts := make([][]byte, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	tok, err := tokenizer.Train(slices.Values(texts), 300, tokenizer.TrainOptions{Special: []string{"<|endoftext|>"}, EOS: "<|endoftext|>"})
	require.NoError(t, err)
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.Vocab, c.Context = tok.VocabSize(), 16
	if shape != nil {
		shape(&c)
	}
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	if edit != nil {
		edit(m)
	}
	var kvs []transformer.KV
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
	}
	path := filepath.Join(t.TempDir(), "base.gguf")
	require.NoError(t, m.Save(path, kvs))
	return path
}

// edgeRun is one row of TestEdgeShapes: a recipe to run for two steps, and the error it must
// give (empty: it trains).
type edgeRun struct {
	name    string
	run     func(t *testing.T, runsDir string) (checkpoint string, err error)
	wantErr string
}

// TestEdgeShapes trains every shape at the edge of what the recipes take — a sequence of one
// token, a batch of one, one head, one key/value head for many, heads of 2 (and, in GPT-2, of 1)
// dimensions, a feed-forward block one wide, one layer, a context of one, a width that is no
// multiple of a SIMD block, the smallest vocabulary a trained tokenizer has — for two steps in
// every family and mode (llama and GPT-2 from scratch, LoRA, full fine-tune and warm start,
// ViT) and checks that each saves a finite checkpoint, where such shapes used to abort the
// process in ggml's GEMM (a transposed view of one row or column). The invalid ones (a width
// that is no multiple of the heads, key/value heads that do not divide the heads, an odd RoPE
// head, a vocabulary too small for a trained tokenizer, a sequence beyond the context, empty
// batches, too many heads for one batch, a patch that does not divide the image, a LoRA rank
// above a projection's width, a negative text bound) are refused with an error naming them,
// before any run directory exists.
func TestEdgeShapes(t *testing.T) {
	text := writeText(t)
	scratch := func(shape func(*Scratch)) func(t *testing.T, runsDir string) (string, error) {
		return func(t *testing.T, runsDir string) (string, error) {
			s := tinyScratch(t, text)
			s.RunsDir, s.Steps, s.Warmup, s.EvalEvery, s.EvalBatches, s.SampleTokens, s.Threads = runsDir, 2, 0, 0, 1, 0, 1
			shape(&s)
			res, err := s.Run(context.Background())
			if err != nil {
				return "", err
			}
			return filepath.Join(res.RunDir, "weights", modelFile), nil
		}
	}
	llamaShape := func(f func(*config.Llama), seq, batch int) func(t *testing.T, runsDir string) (string, error) {
		return scratch(func(s *Scratch) {
			if f != nil {
				f(&s.Model)
			}
			s.SeqLen, s.Batch = seq, batch
		})
	}
	gpt2Shape := func(f func(*config.Gpt2), seq, batch int) func(t *testing.T, runsDir string) (string, error) {
		return scratch(func(s *Scratch) {
			g, err := config.Gpt2Preset("gpt2-demo")
			require.NoError(t, err)
			g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context = 320, 32, 64, 4, 1, 16
			if f != nil {
				f(&g)
			}
			s.GPT2, s.SeqLen, s.Batch = &g, seq, batch
		})
	}
	finetune := func(f Finetune, base func(*config.Llama), shape func(*Finetune)) func(t *testing.T, runsDir string) (string, error) {
		return func(t *testing.T, runsDir string) (string, error) {
			f.Base, f.Data, f.RunsDir = edgeBase(t, text, base), text, runsDir
			f.Steps, f.Warmup, f.Batch, f.SeqLen, f.EvalEvery, f.EvalBatches, f.Threads = 2, 0, 2, 8, 0, 1, 1
			if f.NewModel != nil {
				m := *f.NewModel
				m.DModel, m.DFF, m.NHeads, m.NKVHeads, m.NLayers, m.Context = 32, 64, 4, 2, 1, 16
				f.NewModel = &m
			}
			if shape != nil {
				shape(&f)
			}
			res, err := f.Run(context.Background())
			if err != nil {
				return "", err
			}
			return filepath.Join(res.RunDir, "weights", f.weightsFile()), nil
		}
	}
	vit := func(shape func(*ViT)) func(t *testing.T, runsDir string) (string, error) {
		return func(t *testing.T, runsDir string) (string, error) {
			v := tinyViTRecipe(t)
			v.Shapes, v.Held, v.Steps, v.Warmup, v.EvalEvery, v.Batch, v.RunsDir = 40, 8, 2, 0, 0, 4, runsDir
			shape(&v)
			res, err := v.Run(context.Background())
			if err != nil {
				return "", err
			}
			return res.Checkpoint, nil
		}
	}
	heads := func(d, h, kv int) func(*config.Llama) {
		return func(c *config.Llama) { c.DModel, c.NHeads, c.NKVHeads = d, h, kv }
	}
	rows := []edgeRun{
		// llama from scratch
		{name: "llama seq 1", run: llamaShape(nil, 1, 2)},
		{name: "llama seq 1 batch 1", run: llamaShape(nil, 1, 1)},
		{name: "llama batch 1", run: llamaShape(nil, 16, 1)},
		{name: "llama seq = context", run: llamaShape(func(c *config.Llama) { c.Context = 8 }, 8, 2)},
		{name: "llama context 1", run: llamaShape(func(c *config.Llama) { c.Context = 1 }, 1, 2)},
		{name: "llama one head", run: llamaShape(heads(32, 1, 1), 4, 2)},
		{name: "llama one kv head for four", run: llamaShape(heads(32, 4, 1), 4, 2)},
		{name: "llama as many kv heads", run: llamaShape(heads(32, 4, 4), 1, 2)},
		{name: "llama heads of 2", run: llamaShape(heads(4, 2, 1), 4, 2)},
		{name: "llama d_model 2", run: llamaShape(heads(2, 1, 1), 1, 1)},
		{name: "llama d_model 36, 6 heads", run: llamaShape(heads(36, 6, 2), 3, 2)},
		{name: "llama d_ff 1", run: llamaShape(func(c *config.Llama) { c.DFF = 1 }, 4, 2)},
		{name: "llama d_ff 3", run: llamaShape(func(c *config.Llama) { c.DFF = 3 }, 1, 2)},
		{name: "llama one layer", run: llamaShape(func(c *config.Llama) { c.NLayers = 1 }, 1, 2)},
		{name: "llama qkv bias seq 1", run: llamaShape(func(c *config.Llama) { c.QKVBias = true }, 1, 2)},
		{name: "llama untied seq 1", run: llamaShape(func(c *config.Llama) { c.TiedOutput = false }, 1, 2)},
		{name: "llama smallest trained vocabulary", run: llamaShape(func(c *config.Llama) { c.Vocab = minTrainedVocab }, 4, 2)},
		{name: "llama d_model not a multiple of heads", run: llamaShape(heads(30, 4, 2), 4, 2), wantErr: "multiple"},
		{name: "llama kv heads not dividing heads", run: llamaShape(heads(36, 4, 3), 4, 2), wantErr: "multiple"},
		{name: "llama odd RoPE head", run: llamaShape(heads(12, 4, 2), 4, 2), wantErr: "even"},
		{name: "llama vocabulary below a trained tokenizer's", run: llamaShape(func(c *config.Llama) { c.Vocab = 256 }, 4, 2), wantErr: "257"},
		{name: "llama seq 0", run: llamaShape(nil, 0, 2), wantErr: "sequence length 0"},
		{name: "llama seq beyond the context", run: llamaShape(nil, 17, 2), wantErr: "sequence length 17"},
		{name: "llama batch 0", run: llamaShape(nil, 4, 0), wantErr: "batch 0"},
		{name: "llama batch × heads beyond 1024", run: llamaShape(nil, 1, 257), wantErr: "1024"},
		{name: "llama negative text bound", run: scratch(func(s *Scratch) { s.MaxTextBytes = -1 }), wantErr: "max text bytes -1"},
		// GPT-2 from scratch
		{name: "gpt2 seq 1", run: gpt2Shape(nil, 1, 2)},
		{name: "gpt2 seq 1 batch 1", run: gpt2Shape(nil, 1, 1)},
		{name: "gpt2 one head", run: gpt2Shape(func(g *config.Gpt2) { g.NHeads = 1 }, 4, 2)},
		{name: "gpt2 heads of 1", run: gpt2Shape(func(g *config.Gpt2) { g.DModel, g.NHeads = 3, 3 }, 4, 2)},
		{name: "gpt2 d_ff 1", run: gpt2Shape(func(g *config.Gpt2) { g.DFF = 1 }, 4, 2)},
		{name: "gpt2 context 1", run: gpt2Shape(func(g *config.Gpt2) { g.Context = 1 }, 1, 2)},
		{name: "gpt2 d_model not a multiple of heads", run: gpt2Shape(func(g *config.Gpt2) { g.DModel = 30 }, 4, 2), wantErr: "multiple"},
		// fine-tuning
		{name: "lora seq 1", run: finetune(DefaultFinetune(), nil, func(f *Finetune) { f.SeqLen = 1 })},
		{name: "lora seq 1 batch 1 rank 1 on all", run: finetune(DefaultFinetune(), nil, func(f *Finetune) {
			f.SeqLen, f.Batch, f.LoRA.Rank, f.LoRA.Targets = 1, 1, 1, []string{"all"}
		})},
		{name: "lora on heads of 2 and d_ff 1", run: finetune(DefaultFinetune(), func(c *config.Llama) { c.DModel, c.NHeads, c.NKVHeads, c.DFF = 4, 2, 1, 1 },
			func(f *Finetune) { f.SeqLen, f.LoRA.Rank, f.LoRA.Targets = 1, 1, []string{"all"} })},
		{name: "lora recompute seq 1", run: finetune(DefaultFinetune(), nil, func(f *Finetune) { f.SeqLen, f.Recompute, f.RecomputeAttention = 1, 1, true })},
		{name: "full seq 1", run: finetune(DefaultFullFinetune(), nil, func(f *Finetune) { f.SeqLen = 1 })},
		{name: "full seq 1 one head d_ff 1", run: finetune(DefaultFullFinetune(), func(c *config.Llama) { c.NHeads, c.NKVHeads, c.DFF = 1, 1, 1 },
			func(f *Finetune) { f.SeqLen, f.Batch = 1, 1 })},
		{name: "warm start seq 1", run: finetune(DefaultWarmStart(), nil, func(f *Finetune) { f.SeqLen = 1 })},
		{name: "lora rank above the width", run: finetune(DefaultFinetune(), nil, func(f *Finetune) { f.LoRA.Rank = 17 }), wantErr: "rank 17 exceeds the width"},
		{name: "lora seq beyond the context", run: finetune(DefaultFinetune(), nil, func(f *Finetune) { f.SeqLen = 17 }), wantErr: "sequence length 17"},
		{name: "full batch 0", run: finetune(DefaultFullFinetune(), nil, func(f *Finetune) { f.Batch = 0 }), wantErr: "batch 0"},
		{name: "finetune negative text bound", run: finetune(DefaultFinetune(), nil, func(f *Finetune) { f.MaxTextBytes = -5 }), wantErr: "max text bytes -5"},
		// ViT
		{name: "vit one patch", run: vit(func(v *ViT) { v.Model.PatchSize = 16 })},
		{name: "vit one head, batch 1", run: vit(func(v *ViT) { v.Model.NHeads, v.Batch = 1, 1 })},
		{name: "vit d_ff 1", run: vit(func(v *ViT) { v.Model.DFF = 1 })},
		{name: "vit patch not dividing the image", run: vit(func(v *ViT) { v.Model.PatchSize = 5 }), wantErr: "5"},
		{name: "vit batch 0", run: vit(func(v *ViT) { v.Batch = 0 }), wantErr: "batch 0"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			runsDir := filepath.Join(t.TempDir(), "runs")
			ckpt, err := row.run(t, runsDir)
			if row.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), row.wantErr)
				_, statErr := os.Stat(runsDir)
				assert.True(t, os.IsNotExist(statErr), "refused before a run directory exists: %v", statErr)
				return
			}
			require.NoError(t, err)
			require.FileExists(t, ckpt)
			assertFiniteGGUF(t, ckpt)
		})
	}
}

// assertFiniteGGUF checks that every f32 tensor of a GGUF file holds only finite values.
func assertFiniteGGUF(t *testing.T, path string) {
	t.Helper()
	g, err := ggml.OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	for _, ti := range g.Tensors() {
		if ti.Type != ggml.F32 {
			continue
		}
		b, err := g.ReadTensorData(ti.Name)
		require.NoError(t, err)
		for i := 0; i+4 <= len(b); i += 4 {
			v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s: %s holds %v at element %d", path, ti.Name, v, i/4)
			}
		}
	}
}
