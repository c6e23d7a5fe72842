package bindings

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/gen/internal/gentest"
)

// specLoader returns a function that loads the spec package pattern (relative to root, the module
// root) into a model of its own on each call, for a test to break one way at a time.
func specLoader(t *testing.T, root, pattern string) func() *model {
	return func() *model {
		t.Helper()
		m, err := load(root, pattern)
		require.NoError(t, err)
		return m
	}
}

// requireEachRefused applies each mutation to a fresh model and proves it against lib's headers
// in dirs: the proof must refuse each, naming what the mutation returns and the spec's
// directory (specDir).
func requireEachRefused(t *testing.T, fresh func() *model, lib library, dirs []string, cc, specDir string, mutations map[string]func(m *model) string) {
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			m := fresh()
			what := mutate(m)
			err := proveWith(m, lib, dirs, cc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), what)
			assert.Contains(t, err.Error(), specDir, "the error names the spec file")
		})
	}
}

// prove is proveWith with one include directory, the headers of lib alone.
func prove(m *model, lib library, includeDir, cc string) error {
	return proveWith(m, lib, []string{includeDir}, cc)
}

// TestProofCatchesMismatches changes one assumption of the real model at a time and checks that
// the proof refuses it, naming the spec position.
func TestProofCatchesMismatches(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	inc, err := findHeaders(root, ggml)
	require.NoError(t, err)
	fresh := specLoader(t, root, "./specs/ggml")
	require.NoError(t, prove(fresh(), ggml, inc, cc), "the real spec must prove")

	requireEachRefused(t, fresh, ggml, []string{inc}, cc, "specs/ggml/", map[string]func(m *model) string{
		"enum value": func(m *model) string {
			v := m.Enums[0].Values[1]
			v.Value += 100
			return v.CName
		},
		"const-ness": func(m *model) string {
			for _, f := range m.Funcs {
				if f.CName == "ggml_nbytes" {
					f.Params[0].Type = &specType{Kind: kindHandle, Handle: f.Params[0].Type.Handle}
					return "ggml_nbytes"
				}
			}
			t.Fatal("no ggml_nbytes in the spec")
			return ""
		},
		"parameter type": func(m *model) string {
			for _, f := range m.Funcs {
				if f.CName == "ggml_scale" {
					f.Params[2].Type = &specType{Kind: kindNumber, Num: "float64"}
					return "ggml_scale"
				}
			}
			t.Fatal("no ggml_scale in the spec")
			return ""
		},
		"field order": func(m *model) string {
			for _, h := range m.Handles {
				if len(h.Fields) > 2 {
					h.Fields[1], h.Fields[2] = h.Fields[2], h.Fields[1]
					return h.Fields[1].CName
				}
			}
			t.Fatal("no handle with fields")
			return ""
		},
		"missing function": func(m *model) string {
			m.Funcs[0].CName = "ggml_no_such_function"
			return "ggml_no_such_function"
		},
	})
}

// TestOptionalUnbound checks that an optional function the headers lack is reported, not bound.
func TestOptionalUnbound(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	inc, err := findHeaders(root, ggml)
	require.NoError(t, err)
	m, err := load(root, "./specs/ggml")
	require.NoError(t, err)
	n := len(m.Funcs)
	m.Funcs[0].CName, m.Funcs[0].Optional = "ggml_not_in_this_version", true
	require.NoError(t, prove(m, ggml, inc, cc))
	assert.Len(t, m.Funcs, n-1)
	require.Len(t, m.Unbound, 1)
	assert.Equal(t, "ggml_not_in_this_version", m.Unbound[0].Name)
	files, err := emit(m, allBindings[0].Target)
	require.NoError(t, err)
	assert.Contains(t, string(files["UNBOUND.md"]), "ggml_not_in_this_version")
	assert.NotContains(t, string(files["bindings.go"]), "ggml_not_in_this_version")
}
