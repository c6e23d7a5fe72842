package bindings

import (
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmitChecksDocs checks that emitting refuses a model whose doc comment does not start with
// its Go name, naming the spec position: the check runs on every rendered file.
func TestEmitChecksDocs(t *testing.T) {
	m := &model{Funcs: []*function{{
		GoName: "BackendFree", CName: "ggml_backend_free", Doc: "Free frees b.",
		Pos: token.Position{Filename: "specs/ggml/backend.go", Line: 42},
	}}}
	_, err := emit(m, target{ImportPath: "example.com/x", PkgName: "x", Source: "spec", Link: ggml.GoPackage})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "specs/ggml/backend.go:42")
	assert.Contains(t, err.Error(), "BackendFree")
}
