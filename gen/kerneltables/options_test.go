package kerneltables

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	// Tests only: the generator itself imports no runtime package.
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/gen/configs"
	"github.com/toyml/toy/gen/internal/gentest"
)

var (
	optionsOnce sync.Once
	optionsCfg  []*configs.Config
	optionsErr  error
)

// optionSpecs are the configs of the repository's specs/engines, whose Sampling and DFlash
// option groups the kernel tables' golden cases take their defaults and bounds from.
func optionSpecs(t testing.TB) []*configs.Config {
	optionsOnce.Do(func() {
		optionsCfg, optionsErr = configs.Load(gentest.RepoRoot(t), configs.All[0].Spec)
	})
	require.NoError(t, optionsErr)
	require.NotNil(t, configs.OptionGroup(optionsCfg, "Sampling"), "specs/engines declares the Sampling options")
	require.NotNil(t, configs.OptionGroup(optionsCfg, "DFlash"), "specs/engines declares the DFlash options")
	return optionsCfg
}

// TestChatTemplatesAreTheRuntimes: the names a kernel table's chat_template may take are those
// engines/sample resolves, and the ones its error lists.
func TestChatTemplatesAreTheRuntimes(t *testing.T) {
	for _, n := range chatTemplates {
		_, err := sample.TemplateByName(n)
		assert.NoError(t, err, n)
	}
	_, err := sample.TemplateByName("no-such-template")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(known: chatml, smollm2, qwen2.5, gemma)")
	assert.Equal(t, []string{"chatml", "smollm2", "qwen2.5", "gemma"}, chatTemplates[:len(chatTemplates)-1])
}

// TestLoadNeedsTheSamplingSpec: without the Sampling and DFlash options the kernel
// tables are not generated (their presets and pairings would have no defaults).
func TestLoadNeedsTheSamplingSpec(t *testing.T) {
	_, err := load(t.TempDir(), "kernels", nil)
	assert.ErrorContains(t, err, "need the Sampling and DFlash options")
}
