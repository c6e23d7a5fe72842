// Package llama is toy's LLaMA/SmolLM2 engine: the model's weights on a ggml backend, the
// forward pass over packed token sequences, and the training step (cross-entropy, backward,
// AdamW) built once and reused.
//
// Tensor names and shapes follow llama.cpp's GGUF convention (token_embd.weight,
// blk.N.attn_q.weight, ...; ne[0] is a matrix's input width), so checkpoints load in llama.cpp
// and ollama. RoPE is mode 0 (adjacent pairs), as llama.cpp uses for the llama architecture.
//
// Inference (decode.go, arch.go, loader.go) runs GGUF checkpoints of llama (SmolLM2, and
// mistral-style sliding windows), qwen2, qwen3, gemma2, gemma3, qwen2moe and qwen3moe with any
// weight type ggml's CPU backend computes: OpenModel detects the Architecture and memory-maps
// the weights, a Decoder keeps a key/value cache and reuses its graphs between steps, Bench
// measures prompt processing and generation as llama-bench does.
package llama

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Config is the engine's configuration, generated from specs/engines.
type Config = config.Llama

// Layer holds one transformer block's weights. Biases are nil without QKVBias.
type Layer struct {
	AttnNorm, Wq, Wk, Wv, Wo *ggml.Tensor
	Bq, Bk, Bv               *ggml.Tensor
	FFNNorm, Gate, Up, Down  *ggml.Tensor
}

// Model is a LLaMA model whose weights live in one backend buffer.
type Model struct {
	Cfg      Config
	TokEmbd  *ggml.Tensor // [d_model, vocab]
	OutNorm  *ggml.Tensor // [d_model]
	Output   *ggml.Tensor // [d_model, vocab]; nil when the output is tied to TokEmbd
	Layers   []Layer
	backend  *ggml.Backend
	ctx      *ggml.Context
	buf      *ggml.Buffer
	all      []*ggml.Tensor // every weight, in GGUF order
	matrices map[*ggml.Tensor]bool
}

// HeadDim is the size of one attention head.
func HeadDim(c Config) int { return c.DModel / c.NHeads }

// Validate checks c beyond its generated bounds.
func Validate(c Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("llama config: %w", err)
	}
	if hd := HeadDim(c); hd%2 != 0 {
		return fmt.Errorf("llama config: head size d_model/n_heads = %d must be even for RoPE", hd)
	}
	return nil
}

// New allocates a model of shape c on backend b, with every weight zero; Init or Load fills it.
func New(c Config, b *ggml.Backend) (*Model, error) {
	if err := Validate(c); err != nil {
		return nil, err
	}
	n := 3 + c.NLayers*12
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: n})
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: c, backend: b, ctx: ctx, matrices: map[*ggml.Tensor]bool{}}
	d, v, ff := int64(c.DModel), int64(c.Vocab), int64(c.DFF)
	kv := int64(c.NKVHeads * HeadDim(c))
	mk := func(name string, matrix bool, ne ...int64) *ggml.Tensor {
		t := ctx.NewTensor(ggml.F32, ne...).SetName(name)
		if t != nil {
			m.all = append(m.all, t)
			m.matrices[t] = matrix
		}
		return t
	}
	m.TokEmbd = mk("token_embd.weight", false, d, v)
	for i := 0; i < c.NLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := Layer{
			AttnNorm: mk(p+"attn_norm.weight", false, d),
			Wq:       mk(p+"attn_q.weight", true, d, d),
			Wk:       mk(p+"attn_k.weight", true, d, kv),
			Wv:       mk(p+"attn_v.weight", true, d, kv),
			Wo:       mk(p+"attn_output.weight", true, d, d),
		}
		if c.QKVBias {
			l.Bq, l.Bk, l.Bv = mk(p+"attn_q.bias", false, d), mk(p+"attn_k.bias", false, kv), mk(p+"attn_v.bias", false, kv)
		}
		l.FFNNorm = mk(p+"ffn_norm.weight", false, d)
		l.Gate = mk(p+"ffn_gate.weight", true, d, ff)
		l.Up = mk(p+"ffn_up.weight", true, d, ff)
		l.Down = mk(p+"ffn_down.weight", true, ff, d)
		m.Layers = append(m.Layers, l)
	}
	m.OutNorm = mk("output_norm.weight", false, d)
	if !c.TiedOutput {
		m.Output = mk("output.weight", true, d, v)
	}
	if err := ctx.Err(); err != nil {
		ctx.Close()
		return nil, err
	}
	if m.buf, err = b.Alloc(ctx); err != nil {
		ctx.Close()
		return nil, err
	}
	return m, nil
}

// Close frees the weights.
func (m *Model) Close() error {
	m.buf.Close()
	return m.ctx.Close()
}

// Weights lists every weight tensor in GGUF order.
func (m *Model) Weights() []*ggml.Tensor { return append([]*ggml.Tensor(nil), m.all...) }

// IsMatrix reports whether w is a weight matrix (which weight decay applies to), as opposed
// to an embedding, a norm or a bias.
func (m *Model) IsMatrix(w *ggml.Tensor) bool { return m.matrices[w] }

// Params is the number of trainable parameters.
func (m *Model) Params() int64 {
	var n int64
	for _, t := range m.all {
		n += t.Len()
	}
	return n
}

// Init fills the weights with a seeded random initialisation: matrices and embeddings from
// N(0, InitScale²) — the output projections of each block scaled by 1/√(2·layers), as GPT-2
// does — norms at 1 and biases at 0. The same seed gives the same weights.
func (m *Model) Init() error {
	rng := rand.New(rand.NewPCG(uint64(m.Cfg.Seed), 0x746f79))
	resid := 1 / math.Sqrt(2*float64(m.Cfg.NLayers))
	for _, t := range m.all {
		vals := make([]float32, t.Len())
		std := float64(m.Cfg.InitScale)
		switch name := t.Name(); {
		case isNorm(name):
			for i := range vals {
				vals[i] = 1
			}
			std = 0
		case isBias(name):
			std = 0
		case hasSuffix(name, "attn_output.weight"), hasSuffix(name, "ffn_down.weight"):
			std *= resid
		}
		if std > 0 {
			for i := range vals {
				vals[i] = float32(rng.NormFloat64() * std)
			}
		}
		if err := t.SetF32(vals); err != nil {
			return err
		}
	}
	return nil
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}
func isNorm(name string) bool { return hasSuffix(name, "norm.weight") }
func isBias(name string) bool { return hasSuffix(name, ".bias") }
