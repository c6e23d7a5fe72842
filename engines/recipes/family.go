package recipes

import (
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// The model family a Scratch run trains: llama (Scratch.Model) or, when Scratch.GPT2 is set,
// gpt2. Both are one model (the core's architecture, one trainer, one checkpoint format); what
// differs is the spec toy train names their shape by. shape is the one place the recipe looks
// at which, and scratchFamilies the one table of what each family's spec adds.

// modelShape is the configuration of the language model a Scratch run trains, in its family's
// spec.
type modelShape interface {
	// architecture is the model the configuration describes.
	architecture() transformer.Architecture
	// initial is how its weights start.
	initial() transformer.Init
	// record is the run_start's model{}.
	record() any
	// validate checks the configuration against its spec.
	validate() error
	// setVocab sets the vocabulary.
	setVocab(n int)
	// setSeed sets the seed of the initial weights.
	setSeed(n int)
	// preset names the spec's preset the configuration is, "" for none.
	preset() string
	// newModel allocates the model, with every weight zero.
	newModel(be *ggml.Backend) (*training.Model, error)
}

// shape is the configuration of the model s trains: GPT2's when set, Model's otherwise.
func (s *Scratch) shape() modelShape {
	if s.GPT2 != nil {
		return gpt2Shape{s.GPT2}
	}
	return llamaShape{&s.Model}
}

// scratchFamilies are the families a Scratch run trains, each with the reading of its
// checkpoints' configuration into s.
var scratchFamilies = map[string]func(s *Scratch, f *ggml.GGUF) (map[string]any, error){
	transformer.Arch: func(s *Scratch, f *ggml.GGUF) (map[string]any, error) {
		c, values, err := transformer.ConfigFromGGUF(f)
		if err == nil {
			s.Model, s.GPT2 = c, nil
		}
		return values, err
	},
	transformer.GPT2Arch: func(s *Scratch, f *ggml.GGUF) (map[string]any, error) {
		c, values, err := transformer.GPT2ConfigFromGGUF(f)
		if err == nil {
			s.GPT2 = &c
		}
		return values, err
	},
}

// Family names the family the run trains: "llama" or "gpt2", the checkpoints'
// general.architecture.
func (s *Scratch) Family() string { return s.Architecture().Name }

// Architecture is the model the run trains.
func (s *Scratch) Architecture() transformer.Architecture { return s.shape().architecture() }

// SetSeed sets the seed of the model's initial weights.
func (s *Scratch) SetSeed(n int) { s.shape().setSeed(n) }

// modelRecord is the run_start's model{}.
func (s *Scratch) modelRecord() any { return s.shape().record() }

// validateModel checks the model's configuration.
func (s *Scratch) validateModel() error { return s.shape().validate() }

// vocab is the model's vocabulary.
func (s *Scratch) vocab() int { return s.Architecture().Vocab }

// Context is the model's context: the longest sequence it reads.
func (s *Scratch) Context() int { return s.Architecture().Context }

// initSeed is the seed of the initial weights.
func (s *Scratch) initSeed() int { return s.shape().initial().Seed }

// setVocab sets the model's vocabulary to the tokenizer's.
func (s *Scratch) setVocab(n int) { s.shape().setVocab(n) }

// NewModel allocates the run's model on be, with every weight zero (Init draws them).
func (s *Scratch) NewModel(be *ggml.Backend) (*training.Model, error) { return s.shape().newModel(be) }

// presetName names the preset the model is, or "custom" ("custom <family>" outside llama).
func (s *Scratch) presetName() string {
	if p := s.shape().preset(); p != "" {
		return p
	}
	if f := s.Family(); f != transformer.Arch {
		return "custom " + f
	}
	return "custom"
}

// readCheckpointConfig reads the model configuration of a checkpoint of a family the recipe
// trains into s (Model for llama, GPT2 for gpt2) and returns its metadata.
func (s *Scratch) readCheckpointConfig(path string) (map[string]any, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	arch, _ := f.String("general.architecture")
	read, ok := scratchFamilies[arch]
	if !ok {
		read = scratchFamilies[transformer.Arch] // which refuses the file, naming its architecture
	}
	return read(s, f)
}

// llamaShape is a llama model's configuration.
type llamaShape struct{ c *config.Llama }

func (l llamaShape) architecture() transformer.Architecture {
	return transformer.ArchitectureFromConfig(*l.c)
}
func (l llamaShape) initial() transformer.Init {
	return transformer.Init{Scale: l.c.InitScale, Seed: l.c.Seed}
}
func (l llamaShape) record() any     { return *l.c }
func (l llamaShape) validate() error { return transformer.Validate(*l.c) }
func (l llamaShape) setVocab(n int)  { l.c.Vocab = n }
func (l llamaShape) setSeed(n int)   { l.c.Seed = n }
func (l llamaShape) preset() string {
	return presetOf(*l.c, config.LlamaPresetNames(), config.LlamaPreset)
}
func (l llamaShape) newModel(be *ggml.Backend) (*training.Model, error) {
	return training.New(*l.c, be)
}

// gpt2Shape is a GPT-2 model's configuration.
type gpt2Shape struct{ c *config.Gpt2 }

// gpt2Record is a gpt2 run's model{} in run_start: the Gpt2 config's keys and "arch": "gpt2"
// (a run_start whose model{} has no "arch" is a llama run's).
type gpt2Record struct {
	Arch string `json:"arch"`
	config.Gpt2
}

func (g gpt2Shape) architecture() transformer.Architecture {
	return transformer.ArchitectureFromGPT2(*g.c)
}
func (g gpt2Shape) initial() transformer.Init {
	return transformer.Init{Scale: g.c.InitScale, Seed: g.c.Seed}
}
func (g gpt2Shape) record() any     { return gpt2Record{Arch: transformer.GPT2Arch, Gpt2: *g.c} }
func (g gpt2Shape) validate() error { return transformer.ValidateGPT2(*g.c) }
func (g gpt2Shape) setVocab(n int)  { g.c.Vocab = n }
func (g gpt2Shape) setSeed(n int)   { g.c.Seed = n }
func (g gpt2Shape) preset() string {
	return presetOf(*g.c, config.Gpt2PresetNames(), config.Gpt2Preset)
}
func (g gpt2Shape) newModel(be *ggml.Backend) (*training.Model, error) {
	return training.NewGPT2(*g.c, be)
}

// presetOf names the preset among names that c is, "" for none.
func presetOf[C comparable](c C, names []string, preset func(string) (C, error)) string {
	for _, n := range names {
		if p, err := preset(n); err == nil && p == c {
			return n
		}
	}
	return ""
}
