package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// addSources adds to files (a binding's output) its C sources, each under its own name behind a
// generated-file header, and the header of the proven declarations they read (b.DeclHeader, from
// the model of b.Declares, which must be generated before b).
func addSources(root string, b Binding, models map[string]*Model, files map[string][]byte) error {
	dir := filepath.Join(root, filepath.FromSlash(b.Sources))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("kernelgen: %s's sources: %w", b.Spec, err)
	}
	var names []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		switch {
		case e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".c" && ext != ".h"):
			return fmt.Errorf("kernelgen: %s/%s: a source directory holds only .c and .h files", b.Sources, e.Name())
		case e.Name() == b.DeclHeader:
			return fmt.Errorf("kernelgen: %s/%s: that name is the generated declarations' header", b.Sources, e.Name())
		case files[e.Name()] != nil:
			return fmt.Errorf("kernelgen: %s/%s: the bindings already write a file of that name", b.Sources, e.Name())
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		text, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("kernelgen: %w", err)
		}
		files[n] = append([]byte("// "+Header(b.Sources+"/"+n)+"\n\n"), text...)
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
		Header(strings.TrimPrefix(b.Declares, "./")), strings.TrimPrefix(b.Declares, "./"), b.Sources, guard, guard)
	h.WriteString(Preamble(&Model{Handles: m.Handles, Structs: m.Structs, Enums: m.Enums}))
	fmt.Fprintf(&h, "#endif\n")
	files[b.DeclHeader] = []byte(h.String())
	return nil
}
