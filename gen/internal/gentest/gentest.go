// Package gentest is what the tests of kernelgen's generator packages share: the module root, a
// C compiler for the ABI proofs, golden files (txtar archives of inputs and the output the
// generator must produce from them, which -update rewrites), and IsGeneratedSource, the marker
// test of a generated Go file.
package gentest

import (
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/toyml/toy/gen/genutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the generator emits now")

// RepoRoot is the module root: the nearest directory above the test's that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// NeedCC is the C compiler the ABI proof uses ($CC, else cc); the test is skipped without one.
func NeedCC(t *testing.T) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(strings.Fields(cc)[0]); err != nil {
		t.Skipf("no C compiler (%s) for the ABI proof", cc)
	}
	return cc
}

// SpecGolden runs every txtar matching glob through generate: the files under spec/ form a spec
// package, which generate gets as a pattern relative to root (the module root); the others
// are the expected output (or, in a file named "error", the expected error, with the spec
// package's directory written spec/).
func SpecGolden(t *testing.T, glob string, generate func(root, pkg, name string) (map[string][]byte, error)) {
	t.Helper()
	cases, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	root := RepoRoot(t)
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			work, err := filepath.Abs(filepath.Join("testdata", "work-"+name))
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(work))
			require.NoError(t, os.MkdirAll(work, 0o755))
			t.Cleanup(func() { os.RemoveAll(work) })
			for _, f := range ar.Files {
				if rest, ok := strings.CutPrefix(f.Name, "spec/"); ok {
					require.NoError(t, os.WriteFile(filepath.Join(work, rest), f.Data, 0o644))
				}
			}
			rel, err := filepath.Rel(root, work)
			require.NoError(t, err)
			rel = filepath.ToSlash(rel)
			got, err := generate(root, "./"+rel, name)
			if err != nil {
				msg := strings.ReplaceAll(err.Error(), rel+"/", "spec/")
				got = map[string][]byte{"error": []byte(msg + "\n")}
			}
			CompareGolden(t, path, ar, func(name string) bool { return strings.HasPrefix(name, "spec/") }, got)
		})
	}
}

// CompareGolden checks got against the archive's expected files (the files that are not
// inputs), or with -update rewrites the archive with got.
func CompareGolden(t *testing.T, path string, ar *txtar.Archive, isInput func(name string) bool, got map[string][]byte) {
	t.Helper()
	if *update {
		var files []txtar.File
		for _, f := range ar.Files {
			if isInput(f.Name) {
				files = append(files, f)
			}
		}
		for _, n := range slices.Sorted(maps.Keys(got)) {
			files = append(files, txtar.File{Name: n, Data: got[n]})
		}
		ar.Files = files
		require.NoError(t, os.WriteFile(path, txtar.Format(ar), 0o644))
		return
	}
	pkg := packageDir(t)
	want := map[string][]byte{}
	for _, f := range ar.Files {
		if !isInput(f.Name) {
			want[f.Name] = f.Data
		}
	}
	for n, w := range want {
		g, ok := got[n]
		if !ok {
			t.Errorf("%s: the generator produced no %s (run go test %s -update to accept)", path, n, pkg)
			continue
		}
		if string(g) != string(w) {
			t.Errorf("%s: %s differs: %s (run go test %s -update to accept)", path, n, genutil.FirstDifference(g, w), pkg)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: the generator produced %s, which the golden file lacks (run go test %s -update)", path, n, pkg)
		}
	}
}

// packageDir is the test's package directory as go test takes it: ./gen/configs.
func packageDir(t testing.TB) string {
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	rel, err := filepath.Rel(RepoRoot(t), dir)
	require.NoError(t, err)
	return "./" + filepath.ToSlash(rel)
}

// IsGeneratedSource reports whether Go source carries Go's standard generated-code marker
// before its package clause.
func IsGeneratedSource(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}
