// Package engines holds toy's model engines and training kit in its subpackages; this file
// only checks their layering.
package engines

import (
	"slices"
	"strings"
	"testing"

	"github.com/toyml/toy/internal/filegraph"
	"github.com/toyml/toy/internal/importgraph"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawBindings are the generated binding packages only the Go layers over them (ggml/, cuda/,
// mpi/, internal/oracle) may import.
var rawBindings = []string{"github.com/toyml/toy/generated/ggmlc", "github.com/toyml/toy/generated/cudadrv",
	"github.com/toyml/toy/generated/llamacpp", "github.com/toyml/toy/generated/mpi", "github.com/toyml/toy/generated/nccl"}

// TestEnginesUseTheGgmlLayer: no file of engines/ or cmd/ (tests included) imports the raw
// bindings; they go through ggml/ (and cuda/, mpi/), whose checks turn ggml's aborts into errors.
func TestEnginesUseTheGgmlLayer(t *testing.T) {
	var bad []string
	files := 0
	for _, root := range []string{".", "../cmd"} {
		walked, err := importgraph.Walk(root, importgraph.Options{Subdirs: true, Tests: true})
		require.NoError(t, err)
		files += len(walked)
		for _, f := range walked {
			for _, p := range f.Imports {
				if slices.Contains(rawBindings, p) {
					bad = append(bad, f.Path+" imports "+p)
				}
			}
		}
	}
	assert.Greater(t, files, 50, "the walk found the engines' sources")
	assert.Empty(t, bad, "use the ggml layer (ggml/) instead")
}

// dataFlow is each engine package of the transformer's data flow with the engine packages
// (of this list) its non-test files may import: each stage builds on the ones before it.
var dataFlow = map[string][]string{
	"transformer": nil,
	"decoding":    {"transformer"},
	"training":    {"transformer", "decoding"},
	"speculative": {"transformer", "decoding", "training"},
}

// TestEnginesFollowTheDataFlow: transformer ← decoding ← training ← speculative; no package
// imports one after it (Go refuses cycles, this keeps the order a newcomer reads them in).
func TestEnginesFollowTheDataFlow(t *testing.T) {
	for pkg, allowed := range dataFlow {
		files, err := importgraph.Walk(pkg, importgraph.Options{})
		require.NoError(t, err)
		require.NotEmpty(t, files, pkg)
		for _, f := range files {
			for _, p := range f.Imports {
				dep, ok := strings.CutPrefix(p, "github.com/toyml/toy/engines/")
				if _, stage := dataFlow[dep]; ok && stage {
					assert.Contains(t, allowed, dep, "%s imports %s, a later stage of the data flow", f.Path, p)
				}
			}
		}
	}
}

// layersBelow are the directories (outside engines/) whose non-test files import nothing of the
// packages listed beside them: the generator's command no runtime package (it runs before the
// code it generates for builds; gen/layering_test.go holds the gen packages themselves to
// importing nothing of the module but gen); cuda/ and the packages it shares with the engines (kernelrt/,
// internal/sampleparams) nothing under engines/.
var layersBelow = []struct {
	dir    string
	banned []string
}{
	{"../cmd/kernelgen", []string{"github.com/toyml/toy/engines", "github.com/toyml/toy/generated", "github.com/toyml/toy/cuda", "github.com/toyml/toy/ggml", "github.com/toyml/toy/internal"}},
	// The device layer and what it shares with the engines sit below them.
	{"../cuda", []string{"github.com/toyml/toy/engines"}},
	{"../kernelrt", []string{"github.com/toyml/toy/engines", "github.com/toyml/toy/cuda", "github.com/toyml/toy/ggml"}},
	{"../internal/sampleparams", []string{"github.com/toyml/toy/engines", "github.com/toyml/toy/cuda", "github.com/toyml/toy/ggml"}},
}

// TestLayersBelowTheEngines: what lies below engines/ does not import it (test files may).
func TestLayersBelowTheEngines(t *testing.T) {
	for _, l := range layersBelow {
		files, err := importgraph.Walk(l.dir, importgraph.Options{Subdirs: true, SkipTestdata: true})
		require.NoError(t, err)
		var bad []string
		for _, f := range files {
			for _, p := range f.Imports {
				for _, b := range l.banned {
					if p == b || strings.HasPrefix(p, b+"/") {
						bad = append(bad, f.Path+" imports "+p)
					}
				}
			}
		}
		assert.Positive(t, len(files), "%s has Go files", l.dir)
		assert.Empty(t, bad, "%s sits below what it imports", l.dir)
	}
}

// readTopDown are the engine packages besides those of the data flow whose files
// TestEngineFilesReadTopDown holds.
var readTopDown = []string{"sample", "tokenizer", "recipes", "serve"}

// readTopDownBelow are the packages below the engines (import paths) whose files
// TestEngineFilesReadTopDown holds too: ggml, the layer every engine builds on.
var readTopDownBelow = []string{"github.com/toyml/toy/ggml"}

// TestEngineFilesReadTopDown: inside each package of the data flow, of readTopDown and of
// readTopDownBelow, no two non-test files need each other (directly or through others), so a
// newcomer can read a package's files in an order where each needs only the ones read before it.
func TestEngineFilesReadTopDown(t *testing.T) {
	var paths []string
	for pkg := range dataFlow {
		paths = append(paths, "github.com/toyml/toy/engines/"+pkg)
	}
	for _, pkg := range readTopDown {
		paths = append(paths, "github.com/toyml/toy/engines/"+pkg)
	}
	paths = append(paths, readTopDownBelow...)
	all, err := filegraph.Load(paths...)
	require.NoError(t, err)
	require.Len(t, all, len(paths))
	for pkg, deps := range all {
		require.Greater(t, len(deps), 3, pkg)
		for _, tangle := range deps.Tangles() {
			t.Errorf("%s: %s", pkg, tangle)
		}
	}
}
