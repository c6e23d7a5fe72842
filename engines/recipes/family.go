package recipes

import (
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// The model family a Scratch run trains: llama (Scratch.Model) or, when Scratch.GPT2 is set,
// gpt2. Both are one transformer (engines/transformer) with one trainer (engines/training); what differs is the spec their
// shape comes from, and these helpers are the only places the recipe looks at it.

// Family names the family the run trains: "llama" or "gpt2", the checkpoints'
// general.architecture.
func (s *Scratch) Family() string {
	if s.GPT2 != nil {
		return transformer.GPT2Arch
	}
	return transformer.Arch
}

// gpt2Record is a gpt2 run's model{} in run_start: the Gpt2 config's keys and "arch": "gpt2"
// (a run_start whose model{} has no "arch" is a llama run's).
type gpt2Record struct {
	Arch string `json:"arch"`
	config.Gpt2
}

// modelRecord is the run_start's model{}.
func (s *Scratch) modelRecord() any {
	if s.GPT2 != nil {
		return gpt2Record{Arch: transformer.GPT2Arch, Gpt2: *s.GPT2}
	}
	return s.Model
}

// validateModel checks the model's configuration.
func (s *Scratch) validateModel() error {
	if s.GPT2 != nil {
		return transformer.ValidateGPT2(*s.GPT2)
	}
	return transformer.Validate(s.Model)
}

// vocab and context are the model's vocabulary and context.
func (s *Scratch) vocab() int {
	if s.GPT2 != nil {
		return s.GPT2.Vocab
	}
	return s.Model.Vocab
}

func (s *Scratch) context() int {
	if s.GPT2 != nil {
		return s.GPT2.Context
	}
	return s.Model.Context
}

// initSeed is the seed of the initial weights.
func (s *Scratch) initSeed() int {
	if s.GPT2 != nil {
		return s.GPT2.Seed
	}
	return s.Model.Seed
}

// setVocab sets the model's vocabulary to the tokenizer's.
func (s *Scratch) setVocab(n int) {
	if s.GPT2 != nil {
		s.GPT2.Vocab = n
		return
	}
	s.Model.Vocab = n
}

// newModel allocates the model, with every weight zero.
func (s *Scratch) newModel(be *ggml.Backend) (*training.Model, error) {
	if s.GPT2 != nil {
		return training.NewGPT2(*s.GPT2, be)
	}
	return training.New(s.Model, be)
}

// presetName names the preset the model is, or "custom".
func (s *Scratch) presetName() string {
	if s.GPT2 != nil {
		for _, n := range config.Gpt2PresetNames() {
			if p, _ := config.Gpt2Preset(n); p == *s.GPT2 {
				return n
			}
		}
		return "custom gpt2"
	}
	for _, n := range config.LlamaPresetNames() {
		if p, _ := config.LlamaPreset(n); p == s.Model {
			return n
		}
	}
	return "custom"
}

// readCheckpointConfig reads the model configuration of a checkpoint of either family into s
// (Model for llama, GPT2 for gpt2) and returns its metadata.
func (s *Scratch) readCheckpointConfig(path string) (map[string]any, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch arch, _ := f.String("general.architecture"); arch {
	case transformer.GPT2Arch:
		c, values, err := transformer.GPT2ConfigFromGGUF(f)
		if err != nil {
			return nil, err
		}
		s.GPT2 = &c
		return values, nil
	default:
		c, values, err := transformer.ConfigFromGGUF(f) // refuses any other architecture
		if err != nil {
			return nil, err
		}
		s.Model, s.GPT2 = c, nil
		return values, nil
	}
}
