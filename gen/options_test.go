package gen

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	// Tests only: the generator itself imports no runtime package.
	"github.com/toyml/toy/engines/sample"
)

var (
	samplingOnce sync.Once
	samplingCfg  *Config
	samplingErr  error
)

// samplingSpec is the Sampling options group of the repository's specs/engines, which the
// kernel tables' golden cases take their sampling defaults and bounds from.
func samplingSpec(t *testing.T) *Config {
	samplingOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			samplingErr = err
			return
		}
		cs, err := LoadConfigs(root, Configs[0].Spec)
		samplingCfg, samplingErr = SamplingSpec(cs), err
	})
	require.NoError(t, samplingErr)
	require.NotNil(t, samplingCfg, "specs/engines declares the Sampling options")
	return samplingCfg
}

// TestChatTemplatesAreTheRuntimes: the names a kernel table's chat_template may take are those
// engines/sample resolves, and the ones its error lists.
func TestChatTemplatesAreTheRuntimes(t *testing.T) {
	for _, n := range ChatTemplates {
		_, err := sample.TemplateByName(n)
		assert.NoError(t, err, n)
	}
	_, err := sample.TemplateByName("no-such-template")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(known: chatml, smollm2, qwen2.5, gemma)")
	assert.Equal(t, []string{"chatml", "smollm2", "qwen2.5", "gemma"}, ChatTemplates[:len(ChatTemplates)-1])
}

// TestLoadKernelsNeedsTheSamplingSpec: without the Sampling options the kernel tables are not
// generated (their presets would have no defaults).
func TestLoadKernelsNeedsTheSamplingSpec(t *testing.T) {
	_, err := LoadKernels(t.TempDir(), "kernels", nil)
	assert.ErrorContains(t, err, "Sampling options spec")
}
