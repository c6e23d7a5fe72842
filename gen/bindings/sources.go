package bindings

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/toyml/toy/gen/genutil"
)

// binding is one spec package and where its bindings go.
type binding struct {
	Spec   string // pattern relative to the root, e.g. "./specs/ggml"
	OutDir string // relative to the root
	Target target
	Lib    library
	// Sources, when set, is a directory of toy's own C sources (relative to the root) that the
	// bindings' package compiles where they are: each .c file gets a generated stub in OutDir
	// that includes it (addSources), and the bindings add OutDir to the include path so that
	// the sources find DeclHeader.
	Sources string
	// Declares is the binding (by Spec) whose proven types — handles, enums and structs, no
	// functions — the sources read from a generated header, DeclHeader, so that they build
	// with no header path (ggml's struct ggml_tensor for toy's CPU operations).
	Declares, DeclHeader string
}

// addSources adds to files (a binding's output) one stub per C source of b.Sources and of its
// model directories (b.Sources/<model>/, whose stubs are named <model>.<file>), which compiles
// that source where it lives (an #include of its path relative to OutDir), and the
// header of the proven declarations the sources read (b.DeclHeader, from the model of
// b.Declares, which must be generated before b). The sources and their headers are stored once,
// under kernels/; each stub records the digest of the whole source directory, so that a change
// to any source or header changes every stub: go generate's check sees it, and Go's build cache
// (which hashes the package's own files, not what they include from elsewhere) rebuilds.
func addSources(root string, b binding, models map[string]*model, files map[string][]byte) error {
	dir := filepath.Join(root, filepath.FromSlash(b.Sources))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("kernelgen: %s's sources: %w", b.Spec, err)
	}
	var names []string // slash-separated, relative to b.Sources
	digest := sha256.New()
	for _, e := range entries { // ReadDir sorts by name, so the digest is deterministic
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				return fmt.Errorf("kernelgen: %s's sources: %w", b.Spec, err)
			}
			for _, s := range sub {
				if s.IsDir() {
					return fmt.Errorf("kernelgen: %s/%s/%s: a model's source directory holds only .c and .h files", b.Sources, e.Name(), s.Name())
				}
				if err := addSource(dir, e.Name()+"/"+s.Name(), b, files, digest, &names); err != nil {
					return err
				}
			}
			continue
		}
		if err := addSource(dir, e.Name(), b, files, digest, &names); err != nil {
			return err
		}
	}
	rel, err := filepath.Rel(filepath.FromSlash(b.OutDir), filepath.FromSlash(b.Sources))
	if err != nil {
		return fmt.Errorf("kernelgen: %s's sources: %w", b.Spec, err)
	}
	sum := hex.EncodeToString(digest.Sum(nil))
	for _, n := range names {
		files[strings.ReplaceAll(n, "/", ".")] = []byte(fmt.Sprintf("// %s\n\n// Compiles %s/%s where it lives. The digest of %s's sources (.c and .h):\n// sources-sha256=%s\n\n#include \"%s\"\n",
			genutil.Header(b.Sources+"/"+n), b.Sources, n, b.Sources, sum, filepath.ToSlash(filepath.Join(rel, n))))
	}
	if b.DeclHeader == "" {
		return nil
	}
	m := models[b.Declares]
	if m == nil {
		return fmt.Errorf("kernelgen: %s declares the types of %s, which is not generated before it", b.Spec, b.Declares)
	}
	guard := "KG_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(b.DeclHeader))
	var h strings.Builder
	fmt.Fprintf(&h, "// %s\n\n// The handles, enums and structs of %s, as proven against its headers:\n// what %s's sources read of them, with no header path.\n\n#ifndef %s\n#define %s\n\n",
		genutil.Header(strings.TrimPrefix(b.Declares, "./")), strings.TrimPrefix(b.Declares, "./"), b.Sources, guard, guard)
	h.WriteString(preamble(&model{Handles: m.Handles, Structs: m.Structs, Enums: m.Enums}))
	fmt.Fprintf(&h, "#endif\n")
	files[b.DeclHeader] = []byte(h.String())
	return nil
}

// addSource reads the source name (relative to dir, b.Sources on disk) into digest, and adds a .c
// file to names.
func addSource(dir, name string, b binding, files map[string][]byte, digest io.Writer, names *[]string) error {
	base, ext := path.Base(name), path.Ext(name)
	switch {
	case strings.HasPrefix(base, ".") || (ext != ".c" && ext != ".h"):
		return fmt.Errorf("kernelgen: %s/%s: a source directory holds only .c and .h files (and model directories of them)", b.Sources, name)
	case name == b.DeclHeader:
		return fmt.Errorf("kernelgen: %s/%s: that name is the generated declarations' header", b.Sources, name)
	case ext == ".c" && files[strings.ReplaceAll(name, "/", ".")] != nil:
		return fmt.Errorf("kernelgen: %s/%s: the bindings already write a file of that name", b.Sources, name)
	}
	text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return fmt.Errorf("kernelgen: %w", err)
	}
	fmt.Fprintf(digest, "%s %d\n", name, len(text))
	digest.Write(text)
	if ext == ".c" {
		*names = append(*names, name)
	}
	return nil
}
