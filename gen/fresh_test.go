package gen

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/genutil"
)

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}

func needCC(t *testing.T) string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(strings.Fields(cc)[0]); err != nil {
		t.Skipf("no C compiler (%s) for the ABI proof", cc)
	}
	return cc
}

// TestFresh regenerates everything, proof included, in memory and compares it with the tree:
// generated/ can never drift from specs/.
func TestFresh(t *testing.T) {
	cc := needCC(t)
	root := repoRoot(t)
	out, err := Generate(Options{Root: root, Prove: true, CC: cc})
	require.NoError(t, err)
	for dir, files := range out.Dirs {
		assert.Empty(t, genutil.Diff(filepath.Join(root, dir), files), "run go generate ./...")
	}
}

// TestProofCatchesMismatches changes one assumption of the real model at a time and checks that
// the proof refuses it, naming the spec position.
func TestProofCatchesMismatches(t *testing.T) {
	cc := needCC(t)
	root := repoRoot(t)
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
	cc := needCC(t)
	root := repoRoot(t)
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
	files, err := EmitBindings(m, Bindings[0].Target)
	require.NoError(t, err)
	assert.Contains(t, string(files["UNBOUND.md"]), "ggml_not_in_this_version")
	assert.NotContains(t, string(files["bindings.go"]), "ggml_not_in_this_version")
}

// TestNoHandWrittenFFI walks the module: every Go file that imports "C" must carry the
// generated-code marker, so all FFI comes from specs.
func TestNoHandWrittenFFI(t *testing.T) {
	root := repoRoot(t)
	var bad []string
	cgoFiles := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if importsC(string(src)) {
			cgoFiles++
			if !genutil.IsGeneratedSource(src) {
				rel, _ := filepath.Rel(root, path)
				bad = append(bad, rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, bad, "these files import \"C\" but were not generated")
	assert.Positive(t, cgoFiles, "the walk found the generated bindings")
}

func importsC(src string) bool {
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == `import "C"` || line == `"C"` {
			return true
		}
	}
	return false
}

// TestNoLongLines walks generated/: no line of a generated Go file may exceed maxLine
// characters, so long literals and parameter lists must be laid out one element per line.
func TestNoLongLines(t *testing.T) {
	const maxLine = 200
	root := repoRoot(t)
	files := 0
	err := filepath.WalkDir(filepath.Join(root, "generated"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if n := utf8.RuneCountInString(line); n > maxLine {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: %d characters (at most %d): %.80s…", rel, i+1, n, maxLine, line)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, files)
}
