package training

import (
	"math"
	"math/rand/v2"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Model is a model being trained — LLaMA (New), GPT-2 (NewGPT2), ViT (NewViT) or any family a
// full fine-tune starts from (FromGGUF): f32 weights in one backend buffer, laid out by the
// architecture's tensor table (the one GGUFModel loads) and run by the same forward pass.
type Model struct {
	// Arch is the model: its family's description (LLaMA, GPT-2, ViT, or the family of the
	// file a fine-tune starts from) with its shape, as the tensor table, the forward pass and
	// the checkpoints read it.
	Arch transformer.Architecture
	// Initial is how Init fills the weights (checkpoints keep it).
	Initial transformer.Init
	w       transformer.Weights
	backend *ggml.Backend
	ctx     *ggml.Context
	buf     *ggml.Buffer
	all     []*ggml.Tensor // every weight, in GGUF order
	roles   map[*ggml.Tensor]transformer.TensorRole
	frozen  map[*ggml.Tensor]bool // weights a Trainer leaves alone (FreezeEmbeddings)
}

// New allocates a model of shape c on backend b, with every weight zero; Init or Load fills it.
func New(c transformer.Config, b *ggml.Backend) (*Model, error) {
	if err := transformer.Validate(c); err != nil {
		return nil, err
	}
	return newModel(transformer.ArchitectureFromConfig(c), transformer.Init{Scale: c.InitScale, Seed: c.Seed}, b)
}

// newModel allocates a model of architecture a, whose weights Init fills as init says.
func newModel(a transformer.Architecture, init transformer.Init, b *ggml.Backend) (*Model, error) {
	m := &Model{Arch: a, Initial: init, backend: b, roles: map[*ggml.Tensor]transformer.TensorRole{}}
	specs := m.Arch.TensorTable(&m.w)
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: len(specs)})
	if err != nil {
		return nil, err
	}
	m.ctx = ctx
	for _, s := range specs {
		t := ctx.NewTensor(ggml.F32, s.Ne...).SetName(s.Name)
		if t == nil {
			break // the context holds the error
		}
		*s.Slot = t
		m.all = append(m.all, t)
		m.roles[t] = s.Role
	}
	m.w.EmbLookup = m.w.TokEmbd
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
func (m *Model) IsMatrix(w *ggml.Tensor) bool { return m.roles[w].IsMatrix() }

// Params is the number of trainable parameters.
func (m *Model) Params() int64 {
	var n int64
	for _, t := range m.all {
		n += t.Len()
	}
	return n
}

// Init fills the weights with a random initialisation seeded by Initial.Seed, as GPT-2 and nanoGPT
// do: matrices and token embeddings from N(0, InitScale²) — the output projections of each
// block scaled by 1/√(2·layers) — learned position embeddings from N(0, (InitScale/2)²), norms
// at 1 and biases at 0. The same seed gives the same weights.
func (m *Model) Init() error {
	rng := rand.New(rand.NewPCG(uint64(m.Initial.Seed), 0x746f79))
	resid := 1 / math.Sqrt(2*float64(m.Arch.NLayers))
	for _, t := range m.all {
		vals := make([]float32, t.Len())
		std := float64(m.Initial.Scale)
		switch m.roles[t] {
		case transformer.RoleNorm:
			for i := range vals {
				vals[i] = 1
			}
			std = 0
		case transformer.RoleBias:
			std = 0
		case transformer.RoleResidualOut:
			std *= resid
		}
		if t == m.w.PosEmbd {
			std /= 2
		}
		if t == m.w.Output && m.Arch.Head == transformer.HeadClassToken {
			std = 0 // a classifier's head starts at zero, as timm's: every class equally likely
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

// NewGPT2 allocates a GPT-2 model of shape c on backend b, with every weight zero; Init or
// Load fills it. It is a Model like any other: the same Trainer, Evaluator and checkpoints.
func NewGPT2(c config.Gpt2, b *ggml.Backend) (*Model, error) {
	if err := transformer.ValidateGPT2(c); err != nil {
		return nil, err
	}
	return newModel(transformer.ArchitectureFromGPT2(c), transformer.Init{Scale: c.InitScale, Seed: c.Seed}, b)
}

// NewViT allocates a ViT classifier of shape c on backend b, with every weight zero; Init or
// Load fills it. It is a Model like any other: NewClassifierTrainer trains it,
// NewClassifierEvaluator runs it, Save and Load keep it.
func NewViT(c config.Vit, b *ggml.Backend) (*Model, error) {
	if err := transformer.ValidateViT(c); err != nil {
		return nil, err
	}
	return newModel(transformer.ArchitectureFromViT(c), transformer.Init{Scale: c.InitScale, Seed: c.Seed}, b)
}
