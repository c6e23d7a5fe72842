package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toyml/toy/internal/filegraph"
	"github.com/toyml/toy/internal/importgraph"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// internalPrefix is the import path of toy's command packages (cmd/toy/internal/...).
const internalPrefix = "github.com/toyml/toy/cmd/toy/internal/"

// below are the packages of cmd/toy/internal under the rooms, with those each may import:
// cli, what every command shares, and clitest, the kit of the commands' tests. Every other
// package there is a room, holding commands.
var below = map[string][]string{"cli": nil, "clitest": {"cli"}}

// internalImports lists the cmd/toy/internal packages each Go file in dir imports (every
// file, tests included, whatever its build constraints), by file name.
func internalImports(t *testing.T, dir string) map[string][]string {
	files, err := importgraph.Walk(dir, importgraph.Options{Tests: true})
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	out := map[string][]string{}
	for _, f := range files {
		out[f.Path] = nil
		for _, p := range f.Imports {
			if rest, ok := strings.CutPrefix(p, internalPrefix); ok {
				out[f.Path] = append(out[f.Path], strings.Split(rest, "/")[0])
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

// TestRoomFilesReadTopDown: inside each package under cmd/toy/internal (every room, cli and
// clitest), no two non-test files need each other (directly or through others), so a newcomer
// can read a room's files in an order where each needs only the ones read before it: the
// dispatch on top, what its commands share (common.go) at the bottom.
func TestRoomFilesReadTopDown(t *testing.T) {
	entries, err := os.ReadDir("internal")
	require.NoError(t, err)
	all, err := filegraph.Load(internalPrefix + "...")
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			assert.Contains(t, all, internalPrefix+e.Name(), "the load found every package under internal")
		}
	}
	for pkg, deps := range all {
		for _, tangle := range deps.Tangles() {
			t.Errorf("%s: %s", pkg, tangle)
		}
	}
}
