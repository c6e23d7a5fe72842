package gen

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/toyml/toy/internal/filegraph"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/toyml/toy/"

// genLayers is each package under gen/ (by directory) with the gen packages its non-test files
// may import: the shared layer imports none, each generator the shared layer (the kernel tables
// also the configs, for the Sampling and DFlash option groups), and gen itself, which
// cmd/kernelgen calls, all of them.
var genLayers = map[string][]string{
	"genutil":          nil,
	"internal/gentest": {"genutil"},
	"bindings":         {"genutil"},
	"configs":          {"genutil"},
	"kerneltables":     {"genutil", "configs"},
	".":                {"genutil", "bindings", "configs", "kerneltables"},
}

// TestGenLayering: the imports among the gen packages run one way (genLayers), every package
// under gen/ has its place there, and no gen package imports any other package of the module:
// the generator runs before the code it generates for builds (generated/) and the runtime
// over it (engines/, ggml/, kernelrt/, cuda/, ...), so it cannot link them. Test files may
// import what they check against (the runtime's chat templates).
func TestGenLayering(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]int{}
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		pkg := strings.TrimSuffix("gen/"+dir, "/.")
		allowed, placed := genLayers[dir]
		if !placed {
			bad = append(bad, path+": package "+pkg+" has no place in genLayers")
			return nil
		}
		seen[dir]++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(p, module)
			if !ours {
				continue
			}
			dep, inGen := strings.CutPrefix(rest, "gen/")
			switch {
			case !inGen:
				bad = append(bad, path+" imports "+p+", which is not part of the generator")
			case !slices.Contains(allowed, dep):
				bad = append(bad, path+" imports "+p+" ("+pkg+" may import "+strings.Join(allowed, ", ")+")")
			}
		}
		return nil
	})
	require.NoError(t, err)
	for dir := range genLayers {
		assert.Positive(t, seen[dir], "gen package %s has Go files", dir)
	}
	sort.Strings(bad)
	assert.Empty(t, bad, "the gen packages import one way, and nothing of the runtime")
}

// TestGenFilesReadTopDown: inside each gen package no two non-test files need each other
// (directly or through others), so its files read in an order where each needs only the ones
// read before it (as engines/layering_test.go holds the engine packages to).
func TestGenFilesReadTopDown(t *testing.T) {
	all, err := filegraph.Load(module + "gen/...")
	require.NoError(t, err)
	require.Len(t, all, len(genLayers))
	for pkg, deps := range all {
		for _, tangle := range deps.Tangles() {
			t.Errorf("%s: %s", pkg, tangle)
		}
	}
}
