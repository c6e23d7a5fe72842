package gen

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/toyml/toy/internal/filegraph"
	"github.com/toyml/toy/internal/importgraph"

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
	files, err := importgraph.Walk(".", importgraph.Options{Subdirs: true, SkipTestdata: true, SkipHidden: true})
	require.NoError(t, err)
	seen := map[string]int{}
	var bad []string
	for _, f := range files {
		pkg := strings.TrimSuffix("gen/"+f.Dir, "/.")
		allowed, placed := genLayers[f.Dir]
		if !placed {
			bad = append(bad, f.Path+": package "+pkg+" has no place in genLayers")
			continue
		}
		seen[f.Dir]++
		for _, p := range f.Imports {
			rest, ours := strings.CutPrefix(p, module)
			if !ours {
				continue
			}
			dep, inGen := strings.CutPrefix(rest, "gen/")
			switch {
			case !inGen:
				bad = append(bad, f.Path+" imports "+p+", which is not part of the generator")
			case !slices.Contains(allowed, dep):
				bad = append(bad, f.Path+" imports "+p+" ("+pkg+" may import "+strings.Join(allowed, ", ")+")")
			}
		}
	}
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
