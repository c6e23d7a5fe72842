package bindings

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/internal/gentest"
)

// TestLlamaCppProofCatchesMismatches does for the llama.h bindings what
// TestProofCatchesMismatches does for ggml's, for what only they use: structs returned by value,
// opaque pointer fields with a kernelgen:ctype, a pointer result, and headers that include
// another library's (Deps).
func TestLlamaCppProofCatchesMismatches(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	incs, err := includeDirs(root, llamaCpp)
	require.NoError(t, err)
	require.Len(t, incs, 2, "llama.h's directory and ggml's")
	fresh := specLoader(t, root, "./specs/llamacpp")
	require.NoError(t, proveWith(fresh(), llamaCpp, incs, cc), "the real spec must prove")
	require.Error(t, proveWith(fresh(), llamaCpp, incs[:1], cc), "llama.h needs ggml's headers")

	fieldOf := func(m *model, st, name string) *field {
		for _, s := range m.Structs {
			for _, f := range s.Fields {
				if s.CName == st && f.CName == name {
					return f
				}
			}
		}
		t.Fatalf("no %s.%s in the spec", st, name)
		return nil
	}
	fn := func(m *model, name string) *function {
		for _, f := range m.Funcs {
			if f.CName == name {
				return f
			}
		}
		t.Fatalf("no %s in the spec", name)
		return nil
	}
	requireEachRefused(t, fresh, llamaCpp, incs, cc, "specs/llamacpp/", map[string]func(m *model) string{
		"opaque field's C type": func(m *model) string {
			fieldOf(m, "struct llama_model_params", "progress_callback").ProofCType = "void *"
			return "progress_callback"
		},
		"opaque field without its C type": func(m *model) string {
			fieldOf(m, "struct llama_context_params", "abort_callback").ProofCType = ""
			return "abort_callback"
		},
		"field order": func(m *model) string {
			for _, s := range m.Structs {
				if s.CName == "struct llama_context_params" {
					s.Fields[0], s.Fields[1] = s.Fields[1], s.Fields[0]
					return "n_ctx"
				}
			}
			return ""
		},
		"returned struct": func(m *model) string {
			f := fn(m, "llama_model_default_params")
			f.Result = fn(m, "llama_context_default_params").Result
			return "llama_model_default_params"
		},
		"pointer result": func(m *model) string {
			fn(m, "llama_get_logits_ith").Result = &specType{Kind: kindNumPtr, Elem: &specType{Kind: kindNumber, Num: "float64"}}
			return "llama_get_logits_ith"
		},
	})
}
