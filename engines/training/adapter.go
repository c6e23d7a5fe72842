package training

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// LoRAOptions configure the adapters NewAdapter makes.
type LoRAOptions struct {
	// Rank is r, the inner size of each low-rank update (default 8).
	Rank int
	// Alpha scales the updates by Alpha/Rank (default: Rank, a scale of 1).
	Alpha float32
	// Targets names the adapted projections of every block: q, k, v, o, gate, up, down (qkv
	// for a fused projection, as gpt2's), or "all" for every one the architecture has (default
	// q and v; qkv where they are fused).
	Targets []string
	// Seed seeds the random initial A matrices.
	Seed uint64
	// Recompute is how many of the first blocks a Trainer recomputes in the backward pass
	// instead of keeping their activations (gradient checkpointing): less memory for one more
	// forward pass of those blocks a step. It changes no result and is not saved.
	Recompute int
	// RecomputeAttention recomputes each other block's attention probabilities (a
	// [T, T, heads] tensor a sequence, the largest activation the backward pass keeps) in the
	// backward pass instead of keeping them: one more product of queries and keys and softmax
	// a block and step. It changes no result and is not saved.
	RecomputeAttention bool
	// KeepTransposed keeps, for a block-quantized base, a transposed f32 copy of each frozen
	// weight for the backward pass (4 bytes a parameter, made once) instead of dequantizing and
	// transposing each weight every step: faster, for memory. Other bases always keep theirs.
	// Only where a copy is needed: on the CPU backend of a build with toy's vector kernels the
	// backward pass reads every base's weights transposed in place (ggml.MulMatPacked). It
	// changes no result and is not saved.
	KeepTransposed bool
}

// LoRATargets are the projections an adapter may adapt, by their short names.
var LoRATargets = []string{"q", "k", "v", "qkv", "o", "gate", "up", "down"}

// Adapter is a set of trainable LoRA updates of a frozen GGUFModel, as llama.cpp applies
// them: W·x + (Alpha/Rank)·B·(A·x) for each adapted weight W [in, out], with A [in, Rank] and
// B [Rank, out] in f32. The base stays in its own type, as loaded; only A and B (and their
// optimizer state) are trained. Save writes llama.cpp's LoRA GGUF, which OpenModel's
// ModelOptions.LoRA and llama.cpp's --lora load.
type Adapter struct {
	base  *decoding.GGUFModel
	opts  LoRAOptions
	ctx   *ggml.Context
	buf   *ggml.Buffer
	terms map[*ggml.Tensor][]decoding.LoRATerm // by base weight: the base's loaded adapters, then this one
	all   []*ggml.Tensor                       // every A and B, in file order
	in    map[*ggml.Tensor]int64               // each A's input width, for Init
}

// NewAdapter allocates zeroed adapters of opts on the projections of m (on m's backend); Init
// gives them their initial values.
func NewAdapter(m *decoding.GGUFModel, opts LoRAOptions) (*Adapter, error) {
	if opts.Rank == 0 {
		opts.Rank = 8
	}
	if opts.Alpha == 0 {
		opts.Alpha = float32(opts.Rank)
	}
	var have []string // the targets of this architecture
	for _, t := range LoRATargets {
		if len(m.Layers) > 0 && m.Layers[0].Target(t) != nil {
			have = append(have, t)
		}
	}
	switch {
	case len(opts.Targets) == 0 && m.Layers[0].Wqkv != nil:
		opts.Targets = []string{"qkv"}
	case len(opts.Targets) == 0:
		opts.Targets = []string{"q", "v"}
	case slices.Equal(opts.Targets, []string{"all"}):
		opts.Targets = have
	}
	switch {
	case opts.Rank < 1:
		return nil, fmt.Errorf("lora: rank %d: want at least 1", opts.Rank)
	case !(opts.Alpha > 0) || math.IsInf(float64(opts.Alpha), 0):
		return nil, fmt.Errorf("lora: alpha %g: want a positive finite number", opts.Alpha)
	case opts.Recompute < 0 || opts.Recompute > m.Arch.NLayers:
		return nil, fmt.Errorf("lora: recompute %d blocks: the model has %d", opts.Recompute, m.Arch.NLayers)
	case m.Arch.IsMoE():
		return nil, fmt.Errorf("lora: %s: adapters on mixtures of experts are not supported", m.Arch.Name)
	}
	for _, t := range opts.Targets {
		if !slices.Contains(have, t) {
			return nil, fmt.Errorf("lora: %s has no projection %q (its targets: %s, or all)", m.Arch.Name, t, strings.Join(have, ", "))
		}
		// A rank above a projection's narrower side is no low-rank update: B·A of rank r
		// cannot exceed min(inputs, outputs), so the extra rank only costs memory and time.
		for i := range m.Layers {
			w := m.Layers[i].Target(t)
			if width := min(w.Ne()[0], w.Ne()[1]); int64(opts.Rank) > width {
				return nil, fmt.Errorf("lora: rank %d exceeds the width of %s (%d inputs, %d outputs): want a rank of at most %d", opts.Rank, w.Name(), w.Ne()[0], w.Ne()[1], width)
			}
		}
	}
	ad := &Adapter{base: m, opts: opts, terms: map[*ggml.Tensor][]decoding.LoRATerm{}, in: map[*ggml.Tensor]int64{}}
	for w, ts := range m.LoRATerms() {
		ad.terms[w] = append([]decoding.LoRATerm(nil), ts...)
	}
	var err error
	if ad.ctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 2 * len(opts.Targets) * len(m.Layers)}); err != nil {
		return nil, err
	}
	scale := opts.Alpha / float32(opts.Rank)
	r := int64(opts.Rank)
	for i := range m.Layers {
		for _, name := range LoRATargets { // file order, whatever the order of opts.Targets
			if !slices.Contains(opts.Targets, name) {
				continue
			}
			w := m.Layers[i].Target(name)
			in, out := w.Ne()[0], w.Ne()[1]
			a := ad.ctx.NewTensor(ggml.F32, in, r).SetName(w.Name() + ".lora_a")
			b := ad.ctx.NewTensor(ggml.F32, r, out).SetName(w.Name() + ".lora_b")
			if a == nil || b == nil {
				break // the context holds the error
			}
			ad.all = append(ad.all, a, b)
			ad.in[a] = in
			ad.terms[w] = append(ad.terms[w], decoding.LoRATerm{A: a, B: b, Scale: scale})
		}
	}
	if err := ad.ctx.Err(); err != nil {
		ad.Close()
		return nil, err
	}
	if ad.buf, err = m.Backend().Alloc(ad.ctx); err != nil {
		ad.Close()
		return nil, err
	}
	ad.buf.Clear(0)
	return ad, nil
}

// Close frees the adapters (not the base model).
func (ad *Adapter) Close() error {
	ad.buf.Close()
	if ad.ctx != nil {
		ad.ctx.Close()
	}
	return nil
}

// Options are the adapter's settings, defaults filled in.
func (ad *Adapter) Options() LoRAOptions { return ad.opts }

// Tensors lists every A and B, in file order.
func (ad *Adapter) Tensors() []*ggml.Tensor { return slices.Clone(ad.all) }

// Params is the number of trainable values.
func (ad *Adapter) Params() int64 {
	var n int64
	for _, t := range ad.all {
		n += t.Len()
	}
	return n
}

// Init gives every A values uniform in ±1/√in (PyTorch's default for a linear layer, as
// PEFT uses) and every B zeros, so a fresh adapter leaves the base model's output unchanged.
func (ad *Adapter) Init() error {
	rng := rand.New(rand.NewPCG(ad.opts.Seed, 0x6c6f7261))
	for _, t := range ad.all {
		vals := make([]float32, t.Len())
		if in, ok := ad.in[t]; ok {
			bound := 1 / math.Sqrt(float64(in))
			for i := range vals {
				vals[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
		if err := t.SetF32(vals); err != nil {
			return err
		}
	}
	return nil
}

// trainable is the base model with the adapters as the only trained tensors (without weight
// decay: their gradients come from ggml's autodiff).
func (ad *Adapter) trainable() *trainable {
	m := ad.base
	return &trainable{arch: &m.Arch, w: &m.Weights, backend: m.Backend(), params: ad.all,
		matrix: func(*ggml.Tensor) bool { return false }, lora: ad.terms,
		recompute: ad.opts.Recompute, recomputeAttention: ad.opts.RecomputeAttention, keepTransposed: ad.opts.KeepTransposed}
}

// Frozen is a GGUFModel as an Evaluator runs it: with its loaded adapters and nothing to
// train (a Trainer refuses it).
type Frozen struct{ *decoding.GGUFModel }

// trainable is the model with nothing to train.
func (m Frozen) trainable() *trainable {
	return &trainable{arch: &m.Arch, w: &m.Weights, backend: m.Backend(),
		matrix: func(*ggml.Tensor) bool { return false }, lora: m.LoRATerms()}
}

// Save writes the adapters as llama.cpp's LoRA GGUF: general.architecture of the base,
// general.type "adapter", adapter.type "lora", adapter.lora.alpha, and each adapted weight's
// <name>.lora_a [in, r] and <name>.lora_b [r, out]; extra metadata follows. The write is
// atomic.
func (ad *Adapter) Save(path string, extra []transformer.KV) error {
	w, err := ggml.NewGGUFWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	kvs := append([]transformer.KV{
		{Key: "general.architecture", Value: ad.base.Arch.Name},
		{Key: "general.type", Value: "adapter"},
		{Key: "adapter.type", Value: "lora"},
		{Key: "adapter.lora.alpha", Value: ad.opts.Alpha},
	}, extra...)
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("lora %s: %w", path, err)
		}
	}
	for _, t := range ad.all {
		if err := w.AddTensor(t); err != nil {
			return fmt.Errorf("lora %s: %w", path, err)
		}
	}
	return w.WriteFile(path)
}

// Load reads the values of every A and B from an adapter file Save wrote for the same base and
// options (to resume training); every tensor must be present with its shape.
func (ad *Adapter) Load(path string) error {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return err
	}
	defer f.Close()
	values, err := transformer.Metadata(f)
	if err != nil {
		return err
	}
	if alpha, _ := values["adapter.lora.alpha"].(float32); alpha != ad.opts.Alpha {
		return fmt.Errorf("lora %s: alpha %v, want %v", path, values["adapter.lora.alpha"], ad.opts.Alpha)
	}
	return transformer.ReadTensors(f, ad.all, "")
}
