package gen

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/genutil"
	"github.com/toyml/toy/gen/internal/gentest"
)

// TestFresh regenerates everything, proof included, in memory and compares it with the tree:
// generated/ can never drift from specs/.
func TestFresh(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	out, err := Generate(Options{Root: root, Prove: true, CC: cc})
	require.NoError(t, err)
	for dir, files := range out.Dirs {
		assert.Empty(t, genutil.Diff(filepath.Join(root, dir), files), "run go generate ./...")
	}
}

// TestNoHandWrittenFFI walks the module: every Go file that imports "C" must carry the
// generated-code marker, so all FFI comes from specs.
func TestNoHandWrittenFFI(t *testing.T) {
	root := gentest.RepoRoot(t)
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
			if !gentest.IsGeneratedSource(src) {
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
	root := gentest.RepoRoot(t)
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
