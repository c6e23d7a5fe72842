package bindings

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/gen/internal/gentest"
)

// TestProofCatchesMismatches changes one assumption of the real model at a time and checks that
// the proof refuses it, naming the spec position.
func TestProofCatchesMismatches(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	inc, err := FindHeaders(root, GGML)
	require.NoError(t, err)
	load := func() *Model {
		m, err := Load(root, "./specs/ggml")
		require.NoError(t, err)
		return m
	}
	require.NoError(t, Prove(load(), GGML, inc, cc), "the real spec must prove")

	for name, mutate := range map[string]func(m *Model) string{
		"enum value": func(m *Model) string {
			v := m.Enums[0].Values[1]
			v.Value += 100
			return v.CName
		},
		"const-ness": func(m *Model) string {
			for _, f := range m.Funcs {
				if f.CName == "ggml_nbytes" {
					f.Params[0].Type = &Type{Kind: KindHandle, Handle: f.Params[0].Type.Handle}
					return "ggml_nbytes"
				}
			}
			t.Fatal("no ggml_nbytes in the spec")
			return ""
		},
		"parameter type": func(m *Model) string {
			for _, f := range m.Funcs {
				if f.CName == "ggml_scale" {
					f.Params[2].Type = &Type{Kind: KindNumber, Num: "float64"}
					return "ggml_scale"
				}
			}
			t.Fatal("no ggml_scale in the spec")
			return ""
		},
		"field order": func(m *Model) string {
			for _, h := range m.Handles {
				if len(h.Fields) > 2 {
					h.Fields[1], h.Fields[2] = h.Fields[2], h.Fields[1]
					return h.Fields[1].CName
				}
			}
			t.Fatal("no handle with fields")
			return ""
		},
		"missing function": func(m *Model) string {
			m.Funcs[0].CName = "ggml_no_such_function"
			return "ggml_no_such_function"
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := load()
			what := mutate(m)
			err := Prove(m, GGML, inc, cc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), what)
			assert.Contains(t, err.Error(), "specs/ggml/", "the error names the spec file")
		})
	}
}

// TestOptionalUnbound checks that an optional function the headers lack is reported, not bound.
func TestOptionalUnbound(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	inc, err := FindHeaders(root, GGML)
	require.NoError(t, err)
	m, err := Load(root, "./specs/ggml")
	require.NoError(t, err)
	n := len(m.Funcs)
	m.Funcs[0].CName, m.Funcs[0].Optional = "ggml_not_in_this_version", true
	require.NoError(t, Prove(m, GGML, inc, cc))
	assert.Len(t, m.Funcs, n-1)
	require.Len(t, m.Unbound, 1)
	assert.Equal(t, "ggml_not_in_this_version", m.Unbound[0].Name)
	files, err := Emit(m, All[0].Target)
	require.NoError(t, err)
	assert.Contains(t, string(files["UNBOUND.md"]), "ggml_not_in_this_version")
	assert.NotContains(t, string(files["bindings.go"]), "ggml_not_in_this_version")
}
