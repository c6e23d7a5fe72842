package bindings

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/tools/go/packages"
)

// library describes the linked C library the proof checks against.
type library struct {
	// GoPackage is the import path of the cgo package that compiles the library; empty for a
	// library found through HeaderDirs.
	GoPackage string
	// RootDir is the header directory of a library in toy's own tree, relative to the module
	// root (toy's CPU operations).
	RootDir string
	// HeaderDirs are searched, in order, for a library with no Go package (environment
	// variables are expanded; an unset one drops its entry).
	HeaderDirs []string
	// IncludeRel is the header directory relative to that package's directory.
	IncludeRel string
	// Headers are included, in order, by the proof.
	Headers []string
	// Deps are the libraries whose headers these include (llama.h includes ggml.h): their
	// include directories are added to the proof's.
	Deps []library
	// Optional, on a dependency, lets the proof run without its headers: the dependent
	// library's StandIns take their place.
	Optional bool
	// StandIns are headers the library's own include, written by the proof last on its include
	// path (name → text), so that where only the library's header is installed the proof
	// still compiles: minimal declarations of ours of what the library's header uses of them
	// (nccl.h's cudaStream_t from cuda_runtime.h). Installed headers take precedence.
	StandIns map[string]string
}

// ggml is the ggml that toy links: the cgo package inside the ollama module.
var ggml = library{
	GoPackage:  "github.com/ollama/ollama/ml/backend/ggml/ggml/src",
	IncludeRel: "../include",
	Headers:    []string{"ggml.h", "ggml-alloc.h", "ggml-backend.h", "ggml-cpu.h", "ggml-opt.h", "gguf.h", "../src/ggml-quants.h"},
}

// findHeaders locates lib's header directory through go/packages, from the module at dir, so the
// proof always reads the headers of the exact module version the build links.
func findHeaders(dir string, lib library) (string, error) {
	var inc, where string
	switch {
	case lib.RootDir != "":
		inc, where = filepath.Join(dir, filepath.FromSlash(lib.RootDir)), lib.RootDir
	case lib.GoPackage == "":
		return findHeaderDir(lib)
	default:
		pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles, Dir: dir}, lib.GoPackage)
		if err != nil {
			return "", fmt.Errorf("kernelgen: finding %s: %w", lib.GoPackage, err)
		}
		if len(pkgs) != 1 || len(pkgs[0].Errors) > 0 || len(pkgs[0].GoFiles) == 0 {
			return "", fmt.Errorf("kernelgen: cannot locate the Go package %s from %s (is it in go.mod?)", lib.GoPackage, dir)
		}
		inc, where = filepath.Join(filepath.Dir(pkgs[0].GoFiles[0]), lib.IncludeRel), lib.GoPackage
	}
	for _, h := range lib.Headers {
		if _, err := os.Stat(filepath.Join(inc, h)); err != nil {
			return "", fmt.Errorf("kernelgen: header %s not found in %s: %w", h, where, err)
		}
	}
	return inc, nil
}

// errNoHeaders is what findHeaders returns when a library's headers are not installed here.
var errNoHeaders = errors.New("headers not installed")

func findHeaderDir(lib library) (string, error) {
	var tried []string
	for _, d := range lib.HeaderDirs {
		if v, ok := strings.CutPrefix(d, "$"); ok {
			name, _, _ := strings.Cut(v, "/")
			if os.Getenv(name) == "" {
				continue
			}
		}
		d = os.ExpandEnv(d)
		tried = append(tried, d)
		ok := true
		for _, h := range lib.Headers {
			if _, err := os.Stat(filepath.Join(d, h)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("kernelgen: %s not found in %s: %w", strings.Join(lib.Headers, ", "), strings.Join(tried, ", "), errNoHeaders)
}

// includeDirs is lib's header directory followed by those of its Deps, found from the module
// at dir.
func includeDirs(dir string, lib library) ([]string, error) {
	inc, err := findHeaders(dir, lib)
	if err != nil {
		return nil, err
	}
	dirs := []string{inc}
	for _, d := range lib.Deps {
		more, err := includeDirs(dir, d)
		if errors.Is(err, errNoHeaders) && d.Optional {
			continue // StandIns stand for its headers
		}
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, more...)
	}
	return dirs, nil
}

// proveWith checks m against the real headers in dirs, the include directories of lib (first)
// and of its Deps: every function must be declared there (optional ones that are not are moved
// to m.Unbound), and a C file that includes the headers, re-declares every prototype and asserts
// every enum value and struct layout must compile with -Werror. cc is the C compiler command.
func proveWith(m *model, lib library, dirs []string, cc string) error {
	includeDir := dirs[0]
	var text strings.Builder
	for _, h := range lib.Headers {
		b, err := os.ReadFile(filepath.Join(includeDir, h))
		if err != nil {
			return fmt.Errorf("kernelgen: %w", err)
		}
		text.Write(b)
	}
	headers := text.String()
	var kept []*function
	for _, f := range m.Funcs {
		// Required functions are checked by the compile (proofSource takes their addresses);
		// an optional one is bound only if the header text declares it.
		if !f.Optional || regexp.MustCompile(`\b`+regexp.QuoteMeta(f.CName)+`\s*\(`).MatchString(headers) {
			kept = append(kept, f)
			continue
		}
		m.Unbound = append(m.Unbound, Unbound{Name: f.CName, Pos: fmt.Sprintf("%s:%d", f.Pos.Filename, f.Pos.Line),
			Reason: "optional, and the linked headers do not declare it"})
	}
	m.Funcs = kept

	src := proofSource(m, lib)
	tmp, err := os.MkdirTemp("", "kernelgen-proof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "proof.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return err
	}
	args := append(strings.Fields(cc), "-std=c11", "-fsyntax-only", "-Wall", "-Werror")
	for _, d := range dirs {
		args = append(args, "-I", d)
	}
	if len(lib.StandIns) > 0 {
		standIns := filepath.Join(tmp, "standins")
		if err := os.Mkdir(standIns, 0o755); err != nil {
			return err
		}
		for name, text := range lib.StandIns {
			if err := os.WriteFile(filepath.Join(standIns, name), []byte(text), 0o644); err != nil {
				return err
			}
		}
		args = append(args, "-idirafter", standIns)
	}
	args = append(args, file)
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kernelgen: the bindings disagree with the headers in %s (%s: %v):\n%s", includeDir, cc, err, proofErrors(out.String(), src))
	}
	return nil
}

// proofErrors keeps the compiler's error lines, which name the spec position (through #line
// directives and the assertion texts).
func proofErrors(out, src string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "error") {
			keep = append(keep, "\t"+strings.TrimSpace(line))
		}
	}
	if len(keep) == 0 {
		return out
	}
	return strings.Join(keep, "\n")
}

// proofSource is the C file the proof compiles.
func proofSource(m *model, lib library) string {
	var b strings.Builder
	b.WriteString("// kernelgen ABI proof: the real headers, then every assumption the bindings make.\n")
	for _, h := range lib.Headers {
		fmt.Fprintf(&b, "#include \"%s\"\n", h)
	}
	b.WriteString("#include <stddef.h>\n\n")
	for _, h := range m.Handles {
		if h.Typedef != "" {
			fmt.Fprintf(&b, "typedef %s * %s; // %s:%d\n", h.Struct, h.Typedef, h.Pos.Filename, h.Pos.Line)
		}
	}
	for _, e := range m.Enums {
		if e.CType != "int" {
			fmt.Fprintf(&b, "_Static_assert(sizeof(%s) == %d, \"%s:%d: %s is not %d bytes\");\n",
				e.CType, goBaseSize(e.GoBase), e.Pos.Filename, e.Pos.Line, e.CType, goBaseSize(e.GoBase))
		}
		for _, v := range e.Values {
			fmt.Fprintf(&b, "_Static_assert(%s == %d, \"%s:%d: %s is not %d\");\n", v.CName, v.Value, v.Pos.Filename, v.Pos.Line, v.CName, v.Value)
		}
	}
	for _, s := range structDefs(m) {
		twin := "struct kernelgen_twin_" + strings.TrimPrefix(s.tag, "struct ")
		fmt.Fprintf(&b, "\n%s {\n", twin)
		for _, f := range s.fields {
			decl := f.Type.CType(f.CName)
			if f.ProofCType != "" {
				decl = join(f.ProofCType, f.CName)
			}
			fmt.Fprintf(&b, "\t%s;\n", decl)
		}
		b.WriteString("};\n")
		fmt.Fprintf(&b, "_Static_assert(sizeof(%s) == sizeof(%s), \"%s:%d: %s has another size\");\n", s.tag, twin, s.pos.Filename, s.pos.Line, s.tag)
		for _, f := range s.fields {
			at := fmt.Sprintf("%s:%d", f.Pos.Filename, f.Pos.Line)
			fmt.Fprintf(&b, "_Static_assert(offsetof(%s, %s) == offsetof(%s, %s), \"%s: %s.%s is at another offset\");\n", s.tag, f.CName, twin, f.CName, at, s.tag, f.CName)
			fmt.Fprintf(&b, "_Static_assert(__builtin_types_compatible_p(__typeof__(((%s *)0)->%s), __typeof__(((%s *)0)->%s)), \"%s: %s.%s has another type\");\n",
				s.tag, f.CName, twin, f.CName, at, s.tag, f.CName)
		}
	}
	// Taking each function's address before the re-declarations fails on a function the headers
	// do not declare (an undeclared identifier), also when a header #defines NAME to NAME_v2.
	b.WriteString("\nvoid *kernelgen_declared[] = {\n")
	for _, f := range m.Funcs {
		fmt.Fprintf(&b, "#line %d \"%s\"\n\t(void *)&%s,\n", f.Pos.Line, f.Pos.Filename, f.CName)
	}
	b.WriteString("};\n\n")
	// #line makes the compiler report a mismatched prototype at its spec position.
	for _, f := range m.Funcs {
		fmt.Fprintf(&b, "#line %d \"%s\"\n%s;\n", f.Pos.Line, f.Pos.Filename, proofPrototype(f))
	}
	// An exported object must be declared; its header spelling must have the handle's type and be
	// its address; a constant address's spelling must be a void * of that value. Compilers fold
	// the comparison of two addresses only when they are equal, so __builtin_constant_p turns
	// "not constant" into a failed assertion with its message.
	if objs := objects(m); len(objs) > 0 {
		b.WriteString("\nvoid *kernelgen_data[] = {\n")
		for _, d := range objs {
			fmt.Fprintf(&b, "#line %d \"%s\"\n\t(void *)&%s,\n", d.Pos.Line, d.Pos.Filename, d.CName)
		}
		b.WriteString("};\n")
	}
	for _, d := range m.Data {
		if d.Macro == "" {
			continue
		}
		at := fmt.Sprintf("%s:%d", d.Pos.Filename, d.Pos.Line)
		ctype, same, what := "void *", fmt.Sprintf("%s == (void *)%#x", d.Macro, d.Address), fmt.Sprintf("%#x", d.Address)
		if !d.Constant {
			ctype, same, what = d.Handle.CPtr(), fmt.Sprintf("(void *)%s == (void *)&%s", d.Macro, d.CName), "the address of "+d.CName
		}
		fmt.Fprintf(&b, "#line %d \"%s\"\n_Static_assert(__builtin_types_compatible_p(__typeof__(%s), %s), \"%s: %s is not a %s\");\n",
			d.Pos.Line, d.Pos.Filename, d.Macro, ctype, at, d.Macro, ctype)
		fmt.Fprintf(&b, "#line %d \"%s\"\n_Static_assert(__builtin_constant_p(%s) && %s, \"%s: %s is not %s\");\n",
			d.Pos.Line, d.Pos.Filename, same, same, at, d.Macro, what)
	}
	return b.String()
}

func goBaseSize(base string) int {
	switch base {
	case "int8", "uint8":
		return 1
	case "int16", "uint16":
		return 2
	case "int32", "uint32":
		return 4
	}
	return 8
}
