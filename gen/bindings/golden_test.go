package bindings

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/internal/gentest"
)

// TestGolden runs every testdata/golden/*.txtar: the files under spec/ form a spec package;
// the other files are what Emit must produce from it, byte for byte, or, for a file
// named "error", the error Load must return. A case named dynamic_* binds a library the
// bindings dlopen.
func TestGolden(t *testing.T) {
	gentest.SpecGolden(t, "testdata/golden/*.txtar", func(root, pkg, name string) (map[string][]byte, error) {
		m, err := Load(root, pkg)
		if err != nil {
			return nil, err
		}
		target := Target{ImportPath: "example.com/golden/" + name, PkgName: "golden", Source: "spec", Link: GGML.GoPackage}
		if strings.HasPrefix(name, "dynamic_") {
			target.Link, target.Dynamic = "", &Dynamic{Sonames: []string{"libexample.so.1", "libexample.so"}, What: "the example library"}
		}
		files, err := Emit(m, target)
		require.NoError(t, err)
		return files, nil
	})
}
