package main

import (
	"go/parser"
	"go/token"
	"os"
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

// internalPrefix is the import path of toy's command packages (cmd/toy/internal/...).
const internalPrefix = "github.com/toyml/toy/cmd/toy/internal/"

// below are the packages of cmd/toy/internal under the rooms, with those each may import:
// cli, what every command shares, and clitest, the kit of the commands' tests. Every other
// package there is a room, holding commands.
var below = map[string][]string{"cli": nil, "clitest": {"cli"}}

// internalImports lists the cmd/toy/internal packages each Go file in dir imports (every
// file, whatever its build constraints), by file name.
func internalImports(t *testing.T, dir string) map[string][]string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		out[path] = nil
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, internalPrefix); ok {
				out[path] = append(out[path], strings.Split(rest, "/")[0])
			}
		}
	}
	return out
}

// TestRoomsLayering: cmd/toy is split into rooms by stage (infer, serve, bench, train, export,
// tools), each a package under cmd/toy/internal. A room imports cli and, in its tests,
// clitest, but never another room (a piece two rooms need moves down into cli); cli imports
// none of them, clitest only cli; main.go, the command table, imports every room.
func TestRoomsLayering(t *testing.T) {
	entries, err := os.ReadDir("internal")
	require.NoError(t, err)
	var rooms []string
	for _, e := range entries {
		if _, ok := below[e.Name()]; e.IsDir() && !ok {
			rooms = append(rooms, e.Name())
		}
	}
	assert.Subset(t, rooms, []string{"bench", "export", "infer", "serve", "tools", "train"}, "the walk found the rooms")

	var bad []string
	for _, room := range rooms {
		for path, imported := range internalImports(t, filepath.Join("internal", room)) {
			for _, p := range imported {
				if p != "cli" && !(p == "clitest" && strings.HasSuffix(path, "_test.go")) {
					bad = append(bad, path+" imports "+p)
				}
			}
		}
	}
	for pkg, allowed := range below {
		for path, imported := range internalImports(t, filepath.Join("internal", pkg)) {
			for _, p := range imported {
				if !slices.Contains(allowed, p) {
					bad = append(bad, path+" imports "+p)
				}
			}
		}
	}
	assert.Empty(t, bad, "a room imports cli (and its tests clitest), never another room; cli imports no room, clitest only cli")

	mainImports := internalImports(t, ".")["main.go"]
	for _, room := range rooms {
		assert.Contains(t, mainImports, room, "main.go's table names every room's commands")
	}
}

// fileDependencies maps each non-test file of the packages (import paths, patterns allowed) to
// the set of its package's other non-test files that declare something it names: a type,
// function, variable or constant, and also a method or a field, which go/types resolves. (A
// copy of engines' helper: test helpers can't be imported across packages.)
func fileDependencies(t *testing.T, paths ...string) map[string]map[string]map[string]bool {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, paths...)
	require.NoError(t, err)
	all := map[string]map[string]map[string]bool{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
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
		all[p.PkgPath] = deps
	}
	return all
}

// fileCycles returns the package's groups of files that need each other (the strongly
// connected components of the file graph with more than one file), each sorted, in order.
// (A copy of engines' helper.)
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
	names := make([]string, 0, len(deps))
	for name := range deps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, seen := index[name]; !seen {
			visit(name)
		}
	}
	sort.Slice(cycles, func(i, j int) bool { return cycles[i][0] < cycles[j][0] })
	return cycles
}

// TestRoomFilesReadTopDown: inside each package under cmd/toy/internal (every room, cli and
// clitest), no two non-test files need each other (directly or through others), so a newcomer
// can read a room's files in an order where each needs only the ones read before it: the
// dispatch on top, what its commands share (common.go) at the bottom.
func TestRoomFilesReadTopDown(t *testing.T) {
	entries, err := os.ReadDir("internal")
	require.NoError(t, err)
	all := fileDependencies(t, internalPrefix+"...")
	for _, e := range entries {
		if e.IsDir() {
			assert.Contains(t, all, internalPrefix+e.Name(), "the load found every package under internal")
		}
	}
	for pkg, deps := range all {
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
			t.Errorf("%s: %s need each other (%s)", pkg, strings.Join(group, ", "), strings.Join(edges, "; "))
		}
	}
}

// TestFileCycles holds the copy of fileCycles to a graph whose cycles are known: a ring of
// three files, a pair, and files that only depend on them.
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
