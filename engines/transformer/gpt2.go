package transformer

import (
	"fmt"

	"github.com/toyml/toy/generated/config"
)

// GPT2Arch is the GGUF general.architecture of GPT-2 checkpoints.
const GPT2Arch = "gpt2"

// ValidateGPT2 checks a GPT-2 configuration against its spec's bounds.
func ValidateGPT2(c config.Gpt2) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("gpt2 config: %w", err)
	}
	return nil
}

// ArchitectureFromGPT2 is the architecture of a GPT-2 model of configuration c (toy train's
// flags, presets and run bundles): the gpt2 family's description (Family) of c's shape, one
// key/value head per query head, as DetectArchitecture reads it back from the checkpoint.
func ArchitectureFromGPT2(c config.Gpt2) Architecture { return ArchitectureOf(GPT2Arch, c.Shape()) }

// GPT2Config is the configuration toy train names a GPT-2 model of architecture a by, with its
// initialisation: the inverse of ArchitectureFromGPT2.
func GPT2Config(a *Architecture, init Init) config.Gpt2 { return ShapeOf(a, init).Gpt2() }
