// Package filegraph is the check behind the layering tests (engines/, gen/, cmd/toy/) that a Go
// package's files read top-down: no non-test file needs a file that, directly or through
// others, needs it back, so a newcomer can read them in an order where each needs only the
// ones before it.
package filegraph

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Deps maps each non-test file of a package (by base name) to the package's other non-test
// files that declare something it names: a type, function, variable or constant, and also a
// method or a field, which go/types resolves.
type Deps map[string]map[string]bool

// Load type-checks the packages the patterns name (import paths, `...` allowed) and returns
// the Deps of each, by import path; a package that does not load is an error.
func Load(patterns ...string) (map[string]Deps, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	all := map[string]Deps{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		deps := Deps{}
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
	return all, nil
}

// Cycles returns the groups of files that need each other (the strongly connected components
// of the file graph with more than one file), each sorted, in order.
func (d Deps) Cycles() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var cycles [][]string
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for w := range d[v] {
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
	names := make([]string, 0, len(d))
	for name := range d {
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

// Tangles describes each of Cycles' groups with the needs inside it, as a layering test reports
// them: "a.go, b.go need each other (a.go -> b.go; b.go -> a.go)".
func (d Deps) Tangles() []string {
	var out []string
	for _, group := range d.Cycles() {
		var edges []string
		for _, from := range group {
			for _, to := range group {
				if d[from][to] {
					edges = append(edges, from+" -> "+to)
				}
			}
		}
		sort.Strings(edges)
		out = append(out, fmt.Sprintf("%s need each other (%s)", strings.Join(group, ", "), strings.Join(edges, "; ")))
	}
	return out
}
