package gen

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
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
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, module+"gen/...")
	require.NoError(t, err)
	require.Len(t, pkgs, len(genLayers))
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		deps := fileDependencies(p)
		for _, group := range fileCycles(deps) {
			var edges []string
			for _, from := range group {
				for _, to := range group {
					if deps[from][to] {
						edges = append(edges, from+" -> "+to)
					}
				}
			}
			sort.Strings(edges)
			t.Errorf("%s: %s need each other (%s)", p.PkgPath, strings.Join(group, ", "), strings.Join(edges, "; "))
		}
	}
}

// fileDependencies maps each file of p (by base name) to the files of p that declare a name it
// uses.
func fileDependencies(p *packages.Package) map[string]map[string]bool {
	deps := map[string]map[string]bool{}
	for _, f := range p.Syntax {
		deps[filepath.Base(p.Fset.Position(f.Pos()).Filename)] = map[string]bool{}
	}
	for id, obj := range p.TypesInfo.Uses {
		if obj.Pkg() != p.Types {
			continue
		}
		from := filepath.Base(p.Fset.Position(id.Pos()).Filename)
		to := filepath.Base(p.Fset.Position(obj.Pos()).Filename)
		if _, ok := deps[to]; ok && to != from {
			deps[from][to] = true
		}
	}
	return deps
}

// fileCycles returns the groups of files that need each other (the strongly connected
// components of the file graph with more than one file), each sorted, in order.
func fileCycles(deps map[string]map[string]bool) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var cycles [][]string
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for w := range deps[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var group []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				group = append(group, w)
				if w == v {
					break
				}
			}
			if len(group) > 1 {
				sort.Strings(group)
				cycles = append(cycles, group)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(deps)) {
		if _, seen := index[name]; !seen {
			visit(name)
		}
	}
	sort.Slice(cycles, func(i, j int) bool { return cycles[i][0] < cycles[j][0] })
	return cycles
}

// TestFileCycles holds fileCycles to a graph whose cycles are known: a ring of three files, a
// pair, and files that only depend on them.
func TestFileCycles(t *testing.T) {
	deps := map[string]map[string]bool{
		"a.go": {"b.go": true}, "b.go": {"c.go": true}, "c.go": {"a.go": true, "d.go": true},
		"d.go": {}, "e.go": {"a.go": true, "f.go": true}, "f.go": {"e.go": true}, "g.go": {"f.go": true},
	}
	assert.Equal(t, [][]string{{"a.go", "b.go", "c.go"}, {"e.go", "f.go"}}, fileCycles(deps))
	delete(deps["c.go"], "a.go")
	delete(deps["f.go"], "e.go")
	assert.Empty(t, fileCycles(deps))
}
