package kerneltables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/internal/gentest"
	"golang.org/x/tools/txtar"
)

// TestGoldenKernels runs every testdata/golden-kernels/*.txtar: the files under kernels/ form a
// kernels/ tree, and those under generated/kernels/ the PTX scripts/build-ptx.sh wrote beside
// the tables; the others are what emit must produce from them, byte for byte (all but
// kernels.go, whose shared types the freshness test covers), or, in a file named "error", the
// error load must return.
func TestGoldenKernels(t *testing.T) {
	cases, err := filepath.Glob("testdata/golden-kernels/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			work := t.TempDir()
			for _, f := range ar.Files {
				if isKernelsInput(f.Name) {
					p := filepath.Join(work, filepath.FromSlash(f.Name))
					require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
					require.NoError(t, os.WriteFile(p, f.Data, 0o644))
				}
			}
			got := map[string][]byte{}
			ts, err := load(work, "kernels", optionSpecs(t))
			if err == nil {
				got, err = emit(ts, tablePackage{ImportPath: "example.com/golden/" + name, PkgName: "golden", Source: "kernels"})
				delete(got, "kernels.go")
			}
			if err != nil {
				got = map[string][]byte{"error": []byte(err.Error() + "\n")}
			}
			gentest.CompareGolden(t, path, ar, isKernelsInput, got)
		})
	}
}

// isKernelsInput says whether a golden file is an input of the kernel tables' generator.
func isKernelsInput(name string) bool {
	return strings.HasPrefix(name, "kernels/") || strings.HasPrefix(name, tables.OutDir+"/")
}
