package configs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/gen/internal/gentest"
)

// TestGoldenConfig runs every testdata/golden-config/*.txtar: the files under spec/ form an
// engine spec package; the other files are what emit must produce from it, byte for byte, or,
// for a file named "error", the error Load must return.
func TestGoldenConfig(t *testing.T) {
	gentest.SpecGolden(t, "testdata/golden-config/*.txtar", func(root, pkg, name string) (map[string][]byte, error) {
		cs, err := Load(root, pkg)
		if err != nil {
			return nil, err
		}
		files, err := emit(cs, target{ImportPath: "example.com/golden/" + name, PkgName: "golden", Source: "spec"})
		require.NoError(t, err)
		return files, nil
	})
}
