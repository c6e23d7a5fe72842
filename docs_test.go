package toy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

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
// packages' doc comments to the tree: every repository path they name (in backticks, links or
// plain text: a file, a folder, a pattern such as kernels/cpu/c/*.c, or a document's #section)
// exists, as does every section cited by name (docs/X.md, "Section"; "Section" below); every Go file named by its base name alone exists (somewhere; a package doc's, in its
// package); every Go identifier they name as pkg.Name, pkg.Type.Member or dir/pkg.Name (pkg a
// package of this module) is declared there (in any file, test files and every build tag's
// included); every Type.Member of a type this module declares names a method or field of it;
// and every test a list gives under its package (`engines/data: TestA`, `TestB`) is in that
// package. A path or name that moved or was removed fails it, naming the document and line.
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

// repoTree answers the checker's questions about the tree at root, parsing packages on demand.
type repoTree struct {
	root      string
	topDirs   []string            // the root's folders
	baseNames map[string]bool     // base names of every file in the tree
	pkgDirs   map[string][]string // package name -> folders holding a package of that name
	decls     map[string]map[string]bool
	// packageDocs are the packages' doc comments (the comment above a package clause).
	packageDocs []packageDoc
	// typeDirs: exported type name -> the package folders declaring it (built on first use).
	typeDirs map[string][]string
}

type packageDoc struct{ file, text string }

func newRepoTree(t *testing.T, root string) *repoTree {
	r := &repoTree{root: root, baseNames: map[string]bool{}, pkgDirs: map[string][]string{}, decls: map[string]map[string]bool{}}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".git" && e.Name() != "deps" {
			r.topDirs = append(r.topDirs, e.Name())
		}
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "deps" || name == "testdata" || name == "bin" || name == "runs") {
				return filepath.SkipDir
			}
			return nil
		}
		r.baseNames[name] = true
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(p))
			f, err := parser.ParseFile(fset, p, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			pkg := f.Name.Name
			if f.Doc != nil && !strings.HasPrefix(dir, "generated") {
				r.packageDocs = append(r.packageDocs, packageDoc{filepath.ToSlash(p), f.Doc.Text()})
			}
			if !slices.Contains(r.pkgDirs[pkg], dir) {
				r.pkgDirs[pkg] = append(r.pkgDirs[pkg], dir)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return r
}

// typesNamed lists the package folders that declare a type of this name.
func (r *repoTree) typesNamed(name string) []string {
	if r.typeDirs == nil {
		r.typeDirs = map[string][]string{}
		for _, dirs := range r.pkgDirs {
			for _, dir := range dirs {
				for decl := range r.declsOf(dir) {
					if !strings.Contains(decl, ".") && r.decls[dir][decl+".type"] {
						r.typeDirs[decl] = append(r.typeDirs[decl], dir)
					}
				}
			}
		}
	}
	return r.typeDirs[name]
}

func (r *repoTree) declsOf(dir string) map[string]bool {
	d, ok := r.decls[dir]
	if !ok {
		d = parseDecls(filepath.Join(r.root, dir))
		r.decls[dir] = d
	}
	return d
}

func (r *repoTree) pathExists(p string) bool {
	if strings.ContainsAny(p, "*?[") {
		matches, _ := filepath.Glob(filepath.Join(r.root, p))
		return len(matches) > 0
	}
	_, err := os.Stat(filepath.Join(r.root, p))
	return err == nil
}

// declared reports whether the Go package in dir declares name: a top-level identifier, a method
// of one of its types by its name alone (the docs write ggml.MulMatPacked for Context's), or
// Type.Member (a method, a struct field or an interface method, also through an embedded type
// of the same package).
func (r *repoTree) declared(dir, name string) bool {
	d := r.declsOf(dir)
	if d[name] || d["method."+name] {
		return true
	}
	typ, member, ok := strings.Cut(name, ".")
	if !ok || !d[typ] {
		return false
	}
	for embed := range d {
		if e, ok := strings.CutPrefix(embed, typ+".embeds."); ok {
			if e == "" || r.declared(dir, e+"."+member) { // "" is an embedded type of another package
				return true
			}
		}
	}
	return false
}

// parseDecls lists what the .go files of dir declare at the top level, with Type.Member for
// types' methods and fields, method.Name for every method and Type.embeds.E for embedded types.
func parseDecls(dir string) map[string]bool {
	decls := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					decls[decl.Name.Name] = true
				} else {
					decls[receiverName(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
					decls["method."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							decls[n.Name] = true
						}
					case *ast.TypeSpec:
						decls[spec.Name.Name] = true
						decls[spec.Name.Name+".type"] = true
						addMembers(decls, spec.Name.Name, spec.Type)
					}
				}
			}
		}
	}
	return decls
}

func addMembers(decls map[string]bool, typ string, expr ast.Expr) {
	var fields *ast.FieldList
	switch expr := expr.(type) {
	case *ast.StructType:
		fields = expr.Fields
	case *ast.InterfaceType:
		fields = expr.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			decls[typ+"."+n.Name] = true
		}
		if len(f.Names) == 0 {
			switch e := receiverName(f.Type); {
			case strings.Contains(e, "."):
				decls[typ+".embeds."] = true
			default:
				decls[typ+".embeds."+e] = true
			}
		}
	}
}

// receiverName is the type name of a receiver or embedded field: T, *T, T[P], pkg.T.
func receiverName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.SelectorExpr:
		return receiverName(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	// A path-like token: segments of names, wildcards and <placeholders>, not part of a longer
	// path (no '/', word character or '.' just before it), optionally with a #section.
	pathToken = regexp.MustCompile(`(^|[^A-Za-z0-9_./$@~-])((?:\.\./)*[A-Za-z0-9_.<>*-]+(?:/[A-Za-z0-9_.<>*-]*)+(?:#[A-Za-z0-9_-]+)?)`)
	// A file named by its base name: `name.go`, `NAME.md` in backticks (somewhere in the tree), or
	// name.go in the text of a package's doc (the package's own; the Markdown docs name Go's own
	// sources, sort.go, as prompts).
	baseNameToken = regexp.MustCompile("`([A-Za-z0-9][A-Za-z0-9_-]*\\.(?:go|md))`|(?:^|[^A-Za-z0-9_./`-])([a-z0-9][a-z0-9_]*\\.go)\\b")
	// pkg.Name, pkg.Type.Member: a package name, then exported or Type-qualified names.
	identToken = regexp.MustCompile(`(^|[^A-Za-z0-9_./-])([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)`)
	// Type.Member, for a type of this module: in backticks in Markdown, bare in a package's doc.
	typeMemberTicked = regexp.MustCompile("`([A-Z][A-Za-z0-9_]*)\\.([A-Za-z_][A-Za-z0-9_]*)")
	typeMemberBare   = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Z][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	fileExtensions   = map[string]bool{"md": true, "toml": true, "go": true, "h": true, "c": true, "cu": true, "json": true, "gguf": true, "py": true, "sh": true, "txt": true, "jsonl": true, "png": true}
	// A test named in a package's list: `dir: TestX` (m[1], m[2]), or `TestY` after it (m[2]).
	testList = regexp.MustCompile("`(?:([a-z][a-z0-9_/]*): )?((?:Test|Fuzz|Benchmark|Example)[A-Za-z0-9_]*)`")
	// A link's target: [text](target).
	linkTarget  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading     = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	placeholder = regexp.MustCompile(`<[^<>/]*>`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// staleReferences returns "doc:line: reference (why)" for each reference in text that the tree
// does not hold. doc is the document's path from the root: relative paths resolve from its folder.
func (r *repoTree) staleReferences(doc, text string) []string {
	docDir := path.Dir(doc)
	var stale []string
	report := func(line int, ref, why string) {
		stale = append(stale, fmt.Sprintf("%s:%d: %s (%s)", doc, line, ref, why))
	}
	exempt := func(p string) bool {
		for _, e := range notInTree[doc] {
			if ok, _ := path.Match(e, p); ok {
				return true
			}
		}
		return false
	}
	if strings.HasSuffix(doc, ".md") {
		stale = append(stale, r.staleSections(doc, text)...)
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		seen := map[string]bool{}
		check := func(ref string, fromLink bool) {
			if seen[ref] {
				return
			}
			seen[ref] = true
			if why := r.checkPath(doc, docDir, ref, fromLink, exempt, text); why != "" {
				report(n, ref, why)
			}
		}
		for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			seen[target] = false
			check(target, true)
		}
		for _, m := range pathToken.FindAllStringSubmatch(line, -1) {
			ref := strings.TrimRight(m[2], ".-")
			if seen[ref] || !r.looksLocal(docDir, ref) {
				continue
			}
			check(ref, false)
		}
		for _, m := range baseNameToken.FindAllStringSubmatch(line, -1) {
			name := m[1] + m[2]
			if m[2] != "" {
				// A package's doc names its own files (or, for a test kit, its parent's).
				if !strings.HasSuffix(doc, ".go") {
					continue
				}
				if !r.pathExists(path.Join(docDir, name)) && !r.pathExists(path.Join(path.Dir(docDir), name)) && !exempt(name) {
					report(n, name, "not in "+docDir)
				}
				continue
			}
			if !r.baseNames[name] && !exempt(name) {
				report(n, name, "no file of that name in the tree")
			}
		}
		// docs/RELIABILITY.md's form: `dir: TestA`, `TestB`; `other/dir: TestC` (up to a ';' or
		// the table cell's end).
		for _, part := range strings.FieldsFunc(line, func(c rune) bool { return c == ';' || c == '|' }) {
			dir := ""
			for _, m := range testList.FindAllStringSubmatch(part, -1) {
				if m[1] != "" {
					dir = m[1]
					if st, err := os.Stat(filepath.Join(r.root, dir)); err != nil || !st.IsDir() {
						report(n, dir, "not in the tree")
						dir = ""
					}
				}
				if dir != "" && !r.declared(dir, m[2]) {
					report(n, dir+": "+m[2], "no such test in "+dir)
				}
			}
		}
		members := typeMemberTicked
		if strings.HasSuffix(doc, ".go") {
			members = typeMemberBare
		}
		for _, m := range members.FindAllStringSubmatch(line, -1) {
			typ, member := m[1], m[2]
			if fileExtensions[member] || exempt(typ+"."+member) {
				continue
			}
			dirs := r.typesNamed(typ)
			if len(dirs) > 0 && !slices.ContainsFunc(dirs, func(d string) bool { return r.declared(d, typ+"."+member) }) {
				report(n, typ+"."+member, "no "+member+" on "+typ+" in "+strings.Join(dirs, ", "))
			}
		}
		for _, m := range identToken.FindAllStringSubmatch(line, -1) {
			pkg, name := m[2], m[3]
			dirs := r.pkgDirs[pkg]
			if len(dirs) == 0 || strings.HasSuffix(name, ".go") {
				continue
			}
			if !exempt(pkg+"."+name) && !slices.ContainsFunc(dirs, func(d string) bool { return r.declared(d, name) }) {
				report(n, pkg+"."+name, "not declared in package "+pkg+" ("+strings.Join(dirs, ", ")+")")
			}
		}
	}
	return stale
}

// looksLocal: a token is taken for a path of this repository when its first segment is a
// folder at the root or beside the document, or it climbs out of the document's folder.
func (r *repoTree) looksLocal(docDir, ref string) bool {
	if strings.HasPrefix(ref, "../") {
		return true
	}
	first, _, _ := strings.Cut(ref, "/")
	if first == "." || slices.Contains(outputDirs, first) {
		return false
	}
	if slices.Contains(r.topDirs, first) {
		return true
	}
	if docDir != "." {
		if st, err := os.Stat(filepath.Join(r.root, docDir, first)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// checkPath checks one path reference (with an optional #section) and says what is wrong, or "".
func (r *repoTree) checkPath(doc, docDir, ref string, fromLink bool, exempt func(string) bool, docText string) string {
	p, anchor, _ := strings.Cut(ref, "#")
	// dir/pkg.Name: a package's identifier.
	if dot := strings.LastIndex(p, "."); dot > strings.LastIndex(p, "/") && dot+1 < len(p) && unicode.IsUpper(rune(p[dot+1])) {
		dir, name := p[:dot], p[dot+1:]
		if st, err := os.Stat(filepath.Join(r.root, dir)); err == nil && st.IsDir() {
			if r.declared(dir, name) {
				return ""
			}
			return "not declared in " + dir
		}
	}
	p = placeholder.ReplaceAllString(p, "*")
	p = strings.ReplaceAll(p, "**", "*")
	var candidates []string
	switch {
	case p == "":
		candidates = []string{doc}
	case fromLink || strings.HasPrefix(p, "../"):
		candidates = []string{path.Join(docDir, p), path.Clean(p)}
	default:
		candidates = []string{path.Clean(p), path.Join(docDir, p)}
	}
	for _, c := range append(candidates, ref) {
		if exempt(c) {
			return ""
		}
	}
	var found string
	for _, c := range candidates {
		if !strings.HasPrefix(c, "../") && r.pathExists(c) {
			found = c
			break
		}
	}
	if found == "" {
		return "not in the tree"
	}
	if anchor == "" || !strings.HasSuffix(found, ".md") {
		return ""
	}
	text := docText
	if found != doc {
		b, err := os.ReadFile(filepath.Join(r.root, found))
		if err != nil {
			return err.Error()
		}
		text = string(b)
	}
	if slices.Contains(headingAnchors(text), anchor) {
		return ""
	}
	return "no heading #" + anchor + " in " + found
}

var (
	// A section cited by name in another document: docs/X.md, "Section" (or X.md's "Section").
	citedSection = regexp.MustCompile(`((?:[a-z]+/)*[A-Z][A-Z-]*\.md)(?:'s)?,?\s+"([^"]{2,120})"`)
	// A section of the same document: "Section" below (or above).
	nearSection = regexp.MustCompile(`"([^"]{2,120})",? (?:below|above)\b`)
	boldLabel   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// staleSections reports the sections doc cites by name (docs/X.md, "Section"; "Section" below)
// that are no heading or bold paragraph label of the document cited. The name may be the start
// of the heading's, and "…" stands for words left out.
func (r *repoTree) staleSections(doc, text string) []string {
	var stale []string
	check := func(at int, file, fileText, name string) {
		name = strings.Join(strings.Fields(strings.ReplaceAll(name, "`", "")), " ")
		if !slices.ContainsFunc(sectionLabels(fileText), func(l string) bool { return labelMatches(l, name) }) {
			line := strings.Count(text[:at], "\n") + 1
			stale = append(stale, fmt.Sprintf("%s:%d: %q (no such section in %s)", doc, line, name, file))
		}
	}
	for _, m := range citedSection.FindAllStringSubmatchIndex(text, -1) {
		cited := text[m[2]:m[3]]
		file := ""
		for _, c := range []string{path.Join(path.Dir(doc), cited), cited, path.Join("docs", cited)} {
			if r.pathExists(c) {
				file = c
				break
			}
		}
		if file == "" {
			continue // the path check reports it
		}
		b, err := os.ReadFile(filepath.Join(r.root, file))
		if err != nil {
			continue
		}
		check(m[0], file, string(b), text[m[4]:m[5]])
	}
	for _, m := range nearSection.FindAllStringSubmatchIndex(text, -1) {
		check(m[0], doc, text, text[m[2]:m[3]])
	}
	return stale
}

// sectionLabels lists a Markdown text's headings (outside code fences) and bold labels, without
// backticks and with white space collapsed.
func sectionLabels(text string) []string {
	var labels []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		} else if m := heading.FindStringSubmatch(line); m != nil && !fenced {
			labels = append(labels, m[1])
		}
	}
	for _, m := range boldLabel.FindAllStringSubmatch(text, -1) {
		labels = append(labels, m[1])
	}
	for i := range labels {
		labels[i] = strings.Join(strings.Fields(strings.ReplaceAll(labels[i], "`", "")), " ")
	}
	return labels
}

// labelMatches: name is label, or its start, with "…" standing for words left out.
func labelMatches(label, name string) bool {
	parts := strings.Split(name, "…")
	rest, ok := strings.CutPrefix(label, strings.TrimSpace(parts[0]))
	if !ok {
		return false
	}
	for _, p := range parts[1:] {
		i := strings.Index(rest, strings.TrimSpace(p))
		if i < 0 {
			return false
		}
		rest = rest[i+len(strings.TrimSpace(p)):]
	}
	return true
}

// headingAnchors lists the anchors GitHub gives a Markdown text's headings (outside code fences):
// lower case, punctuation dropped, spaces as hyphens, a repeat suffixed -1, -2, ...; and those
// of its HTML anchors (<a id="x">).
func headingAnchors(text string) []string {
	var anchors []string
	for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
		anchors = append(anchors, m[1])
	}
	count := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var b strings.Builder
		for _, c := range strings.ToLower(headingLink.ReplaceAllString(m[1], "$1")) {
			switch {
			case unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '-':
				b.WriteRune(c)
			case c == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if k := count[a]; k > 0 {
			anchors = append(anchors, fmt.Sprintf("%s-%d", a, k))
		} else {
			anchors = append(anchors, a)
		}
		count[a]++
	}
	sort.Strings(anchors)
	return anchors
}

// TestReadmeLayout holds README.md's layout table and engines/README.md's package table to the
// folders: every folder at the root (but the git-ignored ones; or the folders in it), every
// package under internal/,
// engines/ and cmd/toy/internal/ is named in README's table (engines' and cmd/toy's rooms by
// their names in their rows), and every engines package in engines/README.md's.
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
