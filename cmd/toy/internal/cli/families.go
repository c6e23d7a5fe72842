package cli

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
)

// DefaultPreset is the model shape toy train uses unless -preset names another; it is the one
// recipes.DefaultScratch trains. DefaultGPT2Preset is -arch gpt2's, defaultViTPreset -arch vit's.
const (
	DefaultPreset     = "demo"
	DefaultGPT2Preset = "gpt2-demo"
	defaultViTPreset  = "vit-mnist"
)

// PresetFamily is the family of a preset name, "" for none.
func PresetFamily(preset string) string {
	for _, f := range TrainFamilies {
		if slices.Contains(f.Presets(), preset) {
			return f.Name
		}
	}
	return ""
}

// TrainedFamily is a model family toy train makes: its checkpoints' general.architecture, its
// spec's presets, the one -arch alone trains, and the definition of its spec's model flags on
// fs, whose returned function applies them over the -preset chosen to s (nil: the family has a
// command of its own).
type TrainedFamily struct {
	Name          string
	Presets       func() []string
	DefaultPreset string
	ModelFlags    func(fs *flag.FlagSet, s *recipes.Scratch, chosen string, preset *string) func() error
}

// TrainFamilies are the families toy train makes.
var TrainFamilies = []TrainedFamily{
	{transformer.Arch, config.LlamaPresetNames, DefaultPreset,
		func(fs *flag.FlagSet, s *recipes.Scratch, chosen string, preset *string) func() error {
			return modelFlags(fs, chosen, s.Model, config.LlamaPreset, config.NewLlamaFlags, preset,
				func(c config.Llama) { s.Model = c })
		}},
	{transformer.GPT2Arch, config.Gpt2PresetNames, DefaultGPT2Preset,
		func(fs *flag.FlagSet, s *recipes.Scratch, chosen string, preset *string) func() error {
			fallback, _ := config.Gpt2Preset(DefaultGPT2Preset)
			return modelFlags(fs, chosen, fallback, config.Gpt2Preset, config.NewGpt2Flags, preset,
				func(c config.Gpt2) { s.GPT2 = &c })
		}},
	{Name: transformer.ViTArch, Presets: config.VitPresetNames, DefaultPreset: defaultViTPreset},
}

// FamilyNamed is the family toy train makes of that name, nil for none.
func FamilyNamed(name string) *TrainedFamily {
	for i := range TrainFamilies {
		if TrainFamilies[i].Name == name {
			return &TrainFamilies[i]
		}
	}
	return nil
}

// FamilyNames lists the families toy train makes, for usage errors: "llama, gpt2 or vit".
func FamilyNames() string {
	var names []string
	for _, f := range TrainFamilies {
		names = append(names, f.Name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ModelFlags defines a family's model flags on fs, their defaults the preset chosen (or
// fallback, when chosen is not one of the family's), and returns the function that applies
// them over the -preset given and stores the result with set.
func modelFlags[C any, F interface{ Apply(*C) error }](fs *flag.FlagSet, chosen string, fallback C,
	presetOf func(string) (C, error), newFlags func(*flag.FlagSet, C) F, preset *string, set func(C)) func() error {
	defaults, err := presetOf(chosen)
	if err != nil {
		defaults = fallback
	}
	flags := newFlags(fs, defaults)
	return func() error {
		c, err := presetOf(*preset)
		if err != nil {
			return AsUsage(err)
		}
		if err := flags.Apply(&c); err != nil {
			return AsUsage(fmt.Errorf("model: %w", err))
		}
		set(c)
		return nil
	}
}
