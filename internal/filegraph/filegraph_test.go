package filegraph

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCycles holds Cycles to a graph whose cycles are known: a ring of three files, a pair, and
// files that only depend on them.
func TestCycles(t *testing.T) {
	deps := Deps{
		"a.go": {"b.go": true}, "b.go": {"c.go": true}, "c.go": {"a.go": true, "d.go": true},
		"d.go": {}, "e.go": {"a.go": true, "f.go": true}, "f.go": {"e.go": true}, "g.go": {"f.go": true},
	}
	assert.Equal(t, [][]string{{"a.go", "b.go", "c.go"}, {"e.go", "f.go"}}, deps.Cycles())
	assert.Equal(t, []string{
		"a.go, b.go, c.go need each other (a.go -> b.go; b.go -> c.go; c.go -> a.go)",
		"e.go, f.go need each other (e.go -> f.go; f.go -> e.go)",
	}, deps.Tangles())
	delete(deps["c.go"], "a.go")
	delete(deps["f.go"], "e.go")
	assert.Empty(t, deps.Cycles())
	assert.Empty(t, deps.Tangles())
}

// TestLoad writes a module of one package whose files name each other's type, method and field
// (base.go below both, a.go and b.go tangled through a method and a field) and checks the
// dependencies go/types finds and the tangle they make; its test file counts for nothing.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/m\n\ngo 1.22\n",
		"p/base.go":   "package p\n\ntype Base struct{ N int }\n",
		"p/a.go":      "package p\n\ntype A struct{ Base }\n\nfunc (a A) Get() int { return B{}.M }\n",
		"p/b.go":      "package p\n\ntype B struct{ M int }\n\nfunc use() int { return A{}.Get() + Base{}.N }\n",
		"p/p_test.go": "package p\n\nvar _ = use\n",
	}
	for name, src := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	t.Chdir(dir)
	all, err := Load("example.com/m/p")
	require.NoError(t, err)
	assert.Equal(t, map[string]Deps{"example.com/m/p": {
		"base.go": {},
		"a.go":    {"base.go": true, "b.go": true},
		"b.go":    {"a.go": true, "base.go": true},
	}}, all)
	assert.Equal(t, []string{"a.go, b.go need each other (a.go -> b.go; b.go -> a.go)"}, all["example.com/m/p"].Tangles())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "p/bad.go"), []byte("package p\n\nvar x = undefined\n"), 0o644))
	_, err = Load("example.com/m/p")
	require.ErrorContains(t, err, "example.com/m/p")
}
