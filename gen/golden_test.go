package gen

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/genutil"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden with what the generator emits now")

// TestGolden runs every testdata/golden/*.txtar: the files under spec/ form a spec package;
// the other files are what EmitBindings must produce from it, byte for byte, or, for a file
// named "error", the error Load must return. A case named dynamic_* binds a library the
// bindings dlopen.
func TestGolden(t *testing.T) {
	golden(t, "testdata/golden/*.txtar", func(root, pkg, name string) (map[string][]byte, error) {
		m, err := Load(root, pkg)
		if err != nil {
			return nil, err
		}
		target := Target{ImportPath: "example.com/golden/" + name, PkgName: "golden", Source: "spec", Link: GGML.GoPackage}
		if strings.HasPrefix(name, "dynamic_") {
			target.Link, target.Dynamic = "", &Dynamic{Sonames: []string{"libexample.so.1", "libexample.so"}, What: "the example library"}
		}
		files, err := EmitBindings(m, target)
		require.NoError(t, err)
		return files, nil
	})
}

// golden runs every txtar matching glob through generate: the files under spec/ form a spec
// package, the others are the expected output (or, in a file named "error", the expected error).
func golden(t *testing.T, glob string, generate func(root, pkg, name string) (map[string][]byte, error)) {
	cases, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			work := filepath.Join("testdata", "work-"+name)
			require.NoError(t, os.RemoveAll(work))
			require.NoError(t, os.MkdirAll(work, 0o755))
			t.Cleanup(func() { os.RemoveAll(work) })
			for _, f := range ar.Files {
				if rest, ok := strings.CutPrefix(f.Name, "spec/"); ok {
					require.NoError(t, os.WriteFile(filepath.Join(work, rest), f.Data, 0o644))
				}
			}
			got, err := generate(root, "./gen/"+filepath.ToSlash(work), name)
			if err != nil {
				msg := strings.ReplaceAll(err.Error(), "gen/"+filepath.ToSlash(work)+"/", "spec/")
				got = map[string][]byte{"error": []byte(msg + "\n")}
			}
			compareGolden(t, path, ar, func(name string) bool { return strings.HasPrefix(name, "spec/") }, got)
		})
	}
}

// compareGolden checks got against the archive's expected files (the files that are not inputs), or
// with -update rewrites the archive with got.
func compareGolden(t *testing.T, path string, ar *txtar.Archive, isInput func(name string) bool, got map[string][]byte) {
	t.Helper()
	if *update {
		var files []txtar.File
		for _, f := range ar.Files {
			if isInput(f.Name) {
				files = append(files, f)
			}
		}
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, txtar.File{Name: n, Data: got[n]})
		}
		ar.Files = files
		require.NoError(t, os.WriteFile(path, txtar.Format(ar), 0o644))
		return
	}
	want := map[string][]byte{}
	for _, f := range ar.Files {
		if !isInput(f.Name) {
			want[f.Name] = f.Data
		}
	}
	for n, w := range want {
		g, ok := got[n]
		if !ok {
			t.Errorf("%s: the generator produced no %s (run go test ./gen -update to accept)", path, n)
			continue
		}
		if string(g) != string(w) {
			t.Errorf("%s: %s differs: %s (run go test ./gen -update to accept)", path, n, genutil.FirstDifference(g, w))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: the generator produced %s, which the golden file lacks (run go test ./gen -update)", path, n)
		}
	}
}
