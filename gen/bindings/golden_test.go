package bindings

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/internal/gentest"
)

// TestGolden runs every testdata/golden/*.txtar: the files under spec/ form a spec package;
// the other files are what emit must produce from it, byte for byte, or, for a file
// named "error", the error load must return. A case named dynamic_* binds a library the
// bindings dlopen.
func TestGolden(t *testing.T) {
	gentest.SpecGolden(t, "testdata/golden/*.txtar", func(root, pkg, name string) (map[string][]byte, error) {
		m, err := load(root, pkg)
		if err != nil {
			return nil, err
		}
		dest := target{ImportPath: "example.com/golden/" + name, PkgName: "golden", Source: "spec", Link: ggml.GoPackage}
		if strings.HasPrefix(name, "dynamic_") {
			dest.Link, dest.Dynamic = "", &dynamic{Sonames: []string{"libexample.so.1", "libexample.so"}, What: "the example library"}
		}
		files, err := emit(m, dest)
		require.NoError(t, err)
		return files, nil
	})
}
