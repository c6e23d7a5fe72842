package sample

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/kernelrt"
)

// TestKernelTablePresetsAreValid: every sampling preset and chat template the CPU kernel table
// this build compiled (kernelrt.BuildTarget: cpu's, or a portable build's) declares is one the
// sampler takes. The generator checks the presets against the Sampling spec's bounds only (it
// imports no runtime package); Validate's rules go further (top-p above 0, finite numbers).
func TestKernelTablePresetsAreValid(t *testing.T) {
	tab := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, tab, "this build compiled no cpu kernel table")
	require.NotEmpty(t, tab.Models)
	presets := 0
	for _, m := range tab.Models {
		for _, pr := range m.Presets {
			s := config.DefaultSampling() // the keys a preset leaves out keep the defaults
			pr.Sampling.Apply(&s)
			p := Params(s)
			assert.NoError(t, p.Validate(), "model %s, preset %s", m.Name, pr.Name)
			presets++
		}
		if b := m.Behaviour; b != nil && b.ChatTemplate != "" {
			_, err := TemplateByName(b.ChatTemplate)
			assert.NoError(t, err, "model %s", m.Name)
		}
	}
	assert.Greater(t, presets, 5, "the table declares presets")
}
