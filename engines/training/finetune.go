package training

import (
	"fmt"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// FromGGUF makes a training Model of m's architecture whose f32 weights are m's, dequantized
// with ggml's CPU kernels whatever their type: the start of a full fine-tune. The model's
// checkpoints keep m's architecture keys (Save writes Architecture.metadata), so the result
// runs where m ran. Architectures ggml cannot differentiate are refused by name.
func FromGGUF(m *decoding.GGUFModel, b *ggml.Backend) (*Model, error) {
	if err := (Frozen{m}).trainable().checkTrainable(); err != nil {
		return nil, err
	}
	c := transformer.ConfigFromArch(&m.Arch)
	tm, err := newModel(m.Arch, transformer.Init{Scale: c.InitScale, Seed: c.Seed}, b)
	if err != nil {
		return nil, err
	}
	for _, t := range tm.all {
		src := m.Tensor(t.Name())
		if src == nil {
			tm.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q is missing", m.Path(), t.Name())
		}
		raw, err := decoding.DequantizeOnCPU(src, ggml.F32)
		if err == nil {
			err = t.SetBytes(raw)
		}
		if err != nil {
			tm.Close()
			return nil, fmt.Errorf("gguf %s: tensor %q: %w", m.Path(), t.Name(), err)
		}
	}
	return tm, nil
}

// FreezeEmbeddings keeps the token embeddings (and so a tied output projection) out of
// training: a Trainer built afterwards gives them no gradient and no optimizer state.
func (m *Model) FreezeEmbeddings() {
	if m.frozen == nil {
		m.frozen = map[*ggml.Tensor]bool{}
	}
	m.frozen[m.w.TokEmbd] = true
}

// WarmStart copies the donor's token embeddings into m (whose other weights keep their
// initialisation): a new model that starts from a trained vocabulary. The donor's embedding
// width and vocabulary must be m's.
func (m *Model) WarmStart(donor *decoding.GGUFModel) error {
	if err := CheckWarmStart(donor, transformer.ConfigFromArch(&m.Arch)); err != nil {
		return err
	}
	raw, err := decoding.DequantizeOnCPU(donor.TokEmbd, ggml.F32)
	if err != nil {
		return fmt.Errorf("warm start: %s: token_embd.weight: %w", donor.Path(), err)
	}
	return m.w.TokEmbd.SetBytes(raw)
}

// CheckWarmStart tells whether a model of configuration c can take the donor's token
// embeddings (Model.WarmStart): the donor's embedding width must be c's d_model and its
// vocabulary c's; the error names both.
func CheckWarmStart(donor *decoding.GGUFModel, c transformer.Config) error {
	switch {
	case donor.Arch.DModel != c.DModel:
		return fmt.Errorf("warm start: the donor %s has embeddings of width %d, the model's d_model is %d", donor.Path(), donor.Arch.DModel, c.DModel)
	case donor.Arch.Vocab != c.Vocab:
		return fmt.Errorf("warm start: the donor %s has %d tokens, the model %d (take the vocabulary from the donor)", donor.Path(), donor.Arch.Vocab, c.Vocab)
	}
	return nil
}

// CheckTrainable tells whether the model's architecture can be trained (FromGGUF, or an
// Adapter), without allocating anything.
func CheckTrainable(m *decoding.GGUFModel) error { return (Frozen{m}).trainable().checkTrainable() }
