package toy

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The documents TestDocReferences reads: what a newcomer reads to find their way round the tree.
var referenceDocs = []string{"README.md", "docs/*.md", "kernels/README.md", "engines/README.md"}

// notInTree lists, per document, the paths (or path patterns) and names it may give that are not
// in the tree: another project's files, a folder beside the checkout, a package the text only
// proposes, the form a file would take (no target has a model overlay yet), and, in the journal
// and a transcript of a run of the time, the names of the day (the journal's header says where
// they went since).
var notInTree = map[string][]string{
	"docs/GGML.md":                {"internal/systemggml"},
	"docs/INFERENCE.md":           {"docs/api/openai-compatibility.mdx"},
	"docs/ORACLE.md":              {"../shared/testdata/vocab"},
	"docs/TRAINING.md":            {"engines/llama"},
	"docs/PERFORMANCE-HISTORY.md": {"engines/llama", "engines/llama/*", "engines/llama.*", "kernels/cpu/c/mul_mat_short.c", "ggml.MulMatShort"},
	"kernels/README.md":           {"../cpu/c", "kernels/*/models/*/MODEL.toml"},
}

// Folders the build and the commands write, never committed: paths under them are not checked.
var outputDirs = []string{"bin", "runs", "deps"}

// TestDocReferences holds README.md, docs/*.md, kernels/README.md, engines/README.md and the
// packages' doc comments to the tree (the checker is doccheck_test.go's):
//   - every repository path they name (in backticks, links or plain text: a file, a folder, a
//     pattern such as kernels/cpu/c/*.c, a document's #section) exists, and so does every
//     section cited by name (docs/X.md, "Section"; "Section" below);
//   - every Go file named by its base name alone exists (a package doc's, in its package);
//   - every identifier named pkg.Name, pkg.Type.Member or dir/pkg.Name, pkg a package of this
//     module, is declared there (test files and every build tag's included), and every
//     Type.Member of a type of this module names a method or field of it;
//   - every test a list gives under its package (`engines/data: TestA`, `TestB`) is in it.
//
// A path or name that moved or was removed fails it, naming the document and line.
func TestDocReferences(t *testing.T) {
	var docs []string
	for _, pattern := range referenceDocs {
		matches, err := filepath.Glob(pattern)
		require.NoError(t, err)
		require.NotEmpty(t, matches, pattern)
		docs = append(docs, matches...)
	}
	tree := newRepoTree(t, ".")
	var stale []string
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		stale = append(stale, tree.staleReferences(doc, string(text))...)
	}
	for _, doc := range tree.packageDocs {
		stale = append(stale, tree.staleReferences(doc.file, doc.text)...)
	}
	require.Empty(t, stale, "stale references in the docs (a moved file: name its new place; a removed name: its successor):\n%s", strings.Join(stale, "\n"))
	for doc, paths := range notInTree {
		for _, p := range paths {
			if strings.HasPrefix(p, "../") || !strings.Contains(p, "/") {
				continue
			}
			require.False(t, tree.pathExists(p), "%s: %s is in the tree now: drop it from notInTree", doc, p)
		}
	}
}

// TestDocReferencesCatchStale plants stale references and expects each to be reported.
func TestDocReferencesCatchStale(t *testing.T) {
	tree := newRepoTree(t, ".")
	good := "See `engines/serve/drafter.go`, docs/TRAINING.md, [specs](docs/SPECS.md), `ggml.Context.MulMat`,\n" +
		"`engines/sample.NewJinjaTemplate`, `layering_test.go` and kernels/cpu/c/*.c.\n" +
		"[runs](#runs) `engines/decoding.Decoder` `ForwardPass.AttendBlocks` `Target.Module`\n" +
		"(docs/PERFORMANCE.md, \"Loading k-quant files\"; \"Runs\" below; \"The rule …\" below)\n" +
		"## Runs\n**The rule of three.** Text.\n"
	require.Empty(t, tree.staleReferences("README.md", good))
	for _, planted := range []string{
		"`engines/serve/speculate2.go`",    // a file that is not there
		"see cmd/toy/run.go for the flags", // a bare path
		"[the loop](engines/recipes/loop.go)",
		"docs/TRAINING.md#no-such-section",
		"[above](#no-such-heading)",
		"`ggml.NoSuchFunction`",
		"`ggml.Context.NoSuchMethod`",
		"`engines/decoding.NoSuchThing`",
		"`gen/emit.go`",
		"`nosuchfile_test.go`",
		"kernels/nosuchtarget/*.toml",
		"`ForwardPass.NoSuchHook`",
		"| refused | `engines/data: TestImageNotRegular`, `TestNoSuchImageTest`; `cmd/toy: TestCountFlags` |",
		"| refused | `engines/data: TestImageNotRegular`; `cmd/toy: TestImageClaimsHugeSize` |",
		`(docs/PERFORMANCE.md, "No such section")`,
		`as "Nowhere here" below says`,
	} {
		got := tree.staleReferences("README.md", "# Title\n\n"+planted+"\n")
		require.Len(t, got, 1, "planted %s: got %v", planted, got)
	}
	// In a package's doc a Go file may be named bare.
	require.Len(t, tree.staleReferences("engines/serve/doc.go", "The loop is in loop2.go.\n"), 1)
	require.Len(t, tree.staleReferences("engines/serve/doc.go", "Server.Drain2 drains it.\n"), 1)
	require.Empty(t, tree.staleReferences("engines/serve/doc.go", "The slots are in slot.go.\n"))
	require.Len(t, tree.staleReferences("engines/serve/doc.go", "The loss is in headloss.go.\n"), 1) // engines/training's
	// A path another project's (preceded by a path of its own) is not toy's.
	require.Empty(t, tree.staleReferences("README.md", "ollama's `ml/backend/ggml/ggml/src/ggml.c`\n"))
}

// TestReadmeLayout holds README.md's layout table and engines/README.md's package table to the
// folders: every folder at the root (the git-ignored ones aside) has a row, or its folders do;
// every package under internal/ has a row; every package of engines/ and room of
// cmd/toy/internal/ is named in its row; and every engines/ package has a row in
// engines/README.md's table.
func TestReadmeLayout(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	rows := tableRows(t, string(readme), "## Layout")
	firstCells := map[string]bool{}
	for _, row := range rows {
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			firstCells[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	rowOf := func(first string) string {
		for _, row := range rows {
			if strings.Contains(row[0], "`"+first+"`") {
				return strings.Join(row, "|")
			}
		}
		t.Fatalf("README.md's layout table has no row for %s", first)
		return ""
	}
	named := func(row, name string) bool { return strings.Contains(row, "`"+name+"`") }

	var missing []string
	for _, dir := range subdirs(t, ".") {
		if strings.HasPrefix(dir, ".") && dir != ".ci" || slices.Contains(outputDirs, dir) {
			continue
		}
		if dir == ".ci" {
			dir = ".ci/run"
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(firstCells)), func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }) {
			missing = append(missing, dir+" (a row of its own, or rows of its folders)")
		}
	}
	for _, dir := range subdirs(t, "internal") {
		if !firstCells["internal/"+dir] {
			missing = append(missing, "internal/"+dir+" (a row of its own)")
		}
	}
	enginesRow := rowOf("engines/")
	for _, dir := range subdirs(t, "engines") {
		if !named(enginesRow, dir) {
			missing = append(missing, "engines/"+dir+" (in the engines/ row)")
		}
	}
	cmdRow := rowOf("cmd/toy")
	for _, dir := range subdirs(t, "cmd/toy/internal") {
		if !named(cmdRow, dir) {
			missing = append(missing, "cmd/toy/internal/"+dir+" (in the cmd/toy row)")
		}
	}
	require.Empty(t, missing, "README.md's layout table does not name these folders")

	engines, err := os.ReadFile("engines/README.md")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, row := range tableRows(t, string(engines), "# engines/") {
		listed[strings.Trim(row[0], "` ")] = true
	}
	for _, dir := range subdirs(t, "engines") {
		require.True(t, listed[dir], "engines/README.md's table has no row for engines/%s", dir)
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tableRows returns the cells of the rows of the first Markdown table after the heading, less
// its header and rule.
func tableRows(t *testing.T, text, heading string) [][]string {
	_, after, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		after, ok = strings.CutPrefix(text, heading+"\n")
	}
	require.True(t, ok, "no heading %q", heading)
	var rows [][]string
	for _, line := range strings.Split(after, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		rows = append(rows, cells)
	}
	require.Greater(t, len(rows), 2, "no table after %q", heading)
	return rows[2:]
}

// subdirs lists the folders in dir that hold anything but test data (the folders of the tree,
// a package's testdata left out).
func subdirs(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" && e.Name() != ".git" {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}
