package importgraph

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The files of testdata/tree, as written there: cuda.go (built with -tags cuda only) imports
// the forbidden package, top_test.go a package only the tests need, low/ is a subfolder,
// low/testdata a test input that imports the forbidden package too, .hidden a hidden folder.
var (
	hiddenGo = File{Path: "testdata/tree/.hidden/hidden.go", Dir: ".hidden", Imports: []string{"example.com/m/high"}}
	cudaGo   = File{Path: "testdata/tree/cuda.go", Dir: ".", Imports: []string{"example.com/m/forbidden"}}
	lowGo    = File{Path: "testdata/tree/low/low.go", Dir: "low", Imports: []string{"strings"}}
	inputGo  = File{Path: "testdata/tree/low/testdata/input.go", Dir: "low/testdata", Imports: []string{"example.com/m/forbidden"}}
	topGo    = File{Path: "testdata/tree/top.go", Dir: ".", Imports: []string{"fmt", "example.com/m/low"}}
	topTest  = File{Path: "testdata/tree/top_test.go", Dir: ".", Test: true, Imports: []string{"example.com/m/high"}}
)

// TestWalk holds each filter of Options to the files of the test tree it must keep, and the
// build-tagged cuda.go to being read under every one of them.
func TestWalk(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want []File
	}{
		{"root folder, no tests", Options{}, []File{cudaGo, topGo}},
		{"root folder with tests", Options{Tests: true}, []File{cudaGo, topGo, topTest}},
		{"every folder", Options{Subdirs: true}, []File{hiddenGo, cudaGo, lowGo, inputGo, topGo}},
		{"no testdata", Options{Subdirs: true, SkipTestdata: true}, []File{hiddenGo, cudaGo, lowGo, topGo}},
		{"no hidden folder", Options{Subdirs: true, SkipHidden: true, Tests: true}, []File{cudaGo, lowGo, inputGo, topGo, topTest}},
		{"packages only", Options{Subdirs: true, SkipTestdata: true, SkipHidden: true}, []File{cudaGo, lowGo, topGo}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Walk("testdata/tree", c.opts)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// TestWalkReportsPlantedImports states two layering rules over the test tree as a layering
// test would, and checks the walk catches the files that break them: the forbidden import in
// the build-tagged file (and in the test input, unless testdata is skipped), the test-only
// import when test files count and not when they do not.
func TestWalkReportsPlantedImports(t *testing.T) {
	importers := func(opts Options, pkg string) []string {
		files, err := Walk("testdata/tree", opts)
		require.NoError(t, err)
		var bad []string
		for _, f := range files {
			if slices.Contains(f.Imports, pkg) {
				bad = append(bad, f.Path)
			}
		}
		return bad
	}
	const forbidden, high = "example.com/m/forbidden", "example.com/m/high"
	packages := Options{Subdirs: true, SkipTestdata: true, SkipHidden: true}
	assert.Equal(t, []string{"testdata/tree/cuda.go"}, importers(packages, forbidden))
	assert.Equal(t, []string{"testdata/tree/cuda.go", "testdata/tree/low/testdata/input.go"},
		importers(Options{Subdirs: true, SkipHidden: true}, forbidden))
	assert.Empty(t, importers(packages, high))
	packages.Tests = true
	assert.Equal(t, []string{"testdata/tree/top_test.go"}, importers(packages, high))
}

// TestWalkErrors: a root that is not there and a file that does not parse are errors that name
// them, not an empty walk.
func TestWalkErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Walk(filepath.Join(dir, "absent"), Options{})
	require.ErrorContains(t, err, filepath.Join(dir, "absent"))

	bad := filepath.Join(dir, "bad.go")
	require.NoError(t, os.WriteFile(bad, []byte("package p\n\nimport fmt\n"), 0o644))
	_, err = Walk(dir, Options{})
	require.ErrorContains(t, err, bad)
}
