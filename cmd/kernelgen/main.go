// Command kernelgen generates toy's cgo bindings from the typed specs under specs/, with the
// engine configs and options of specs/engines and the kernel tables of kernels/ (its library is
// gen/: gen.Generate runs gen/bindings, gen/configs and gen/kerneltables).
//
// Usage (run by `go generate ./...` from the module root):
//
//	kernelgen [-root DIR] [-prove=true] [-check]
//
// It loads each spec package with go/packages, validates it (an unknown type, directive or key
// is an error naming file:line), proves every prototype, enum value and struct layout against
// the headers of the ggml module the build links (compiling a C file with -Werror), and writes
// generated/ — only the files whose bytes change. With -check it writes nothing and fails if
// generated/ differs from what it would write. What it could not bind is printed and listed in
// generated/*/UNBOUND.md. The spec language is described in docs/SPECS.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/toyml/toy/gen"
	"github.com/toyml/toy/gen/genutil"
)

func main() {
	root := flag.String("root", ".", "module root: specs/ is read from here and generated/ written here")
	prove := flag.Bool("prove", true, "prove the bindings against the linked ggml headers (needs a C compiler: $CC or cc)")
	check := flag.Bool("check", false, "write nothing; fail if generated/ is not what this run would write")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: kernelgen [-root DIR] [-prove=false] [-check]\n\nGenerates generated/ from specs/; see docs/SPECS.md.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*root, *prove, *check); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(root string, prove, check bool) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	out, err := gen.Generate(gen.Options{Root: abs, Prove: prove, CC: os.Getenv("CC")})
	if err != nil {
		return err
	}
	for _, s := range out.Summary {
		fmt.Fprintln(os.Stderr, "kernelgen:", s)
	}
	for _, u := range out.Unbound {
		fmt.Fprintf(os.Stderr, "kernelgen: not bound: %s (%s): %s\n", u.Name, u.Pos, u.Reason)
	}
	if check {
		var stale []string
		for dir, files := range out.Dirs {
			if d := genutil.Diff(filepath.Join(abs, dir), files); d != "" {
				stale = append(stale, d)
			}
		}
		if len(stale) > 0 {
			sort.Strings(stale)
			return fmt.Errorf("kernelgen: generated/ is stale; run go generate ./...\n%s", stale)
		}
		return nil
	}
	changed, err := out.Write(abs)
	sort.Strings(changed)
	for _, c := range changed {
		fmt.Fprintln(os.Stderr, "kernelgen: wrote", c)
	}
	return err
}
