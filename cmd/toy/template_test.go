package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
)

// TestTemplateFlag: every command's -template help lists engines/sample's built-in templates
// (TemplateNames), and a name that is none of them is refused, listing them, before the command
// opens the model (here a file that does not exist).
func TestTemplateFlag(t *testing.T) {
	names := strings.Join(sample.TemplateNames(), ", ")
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	for _, cmd := range [][]string{{"generate", "-chat"}, {"chat"}, {"serve"}, {"finetune", "-data", missing}} {
		_, help, code := runToy(append(cmd, "-h")...)
		require.Equal(t, 0, code, help)
		assert.Contains(t, help, "own: "+names+" (default:", cmd[0])
		_, errOut, code := runToy(append(cmd, "-m", missing, "-template", "vicuna")...)
		assert.Equal(t, 1, code, "%s: %s", cmd[0], errOut)
		assert.Contains(t, errOut, `-template: sample: unknown chat template "vicuna" (known: `+names+")", cmd[0])
		assert.NotContains(t, errOut, "missing.gguf", cmd[0])
	}
}
