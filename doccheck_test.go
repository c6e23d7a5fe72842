package toy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// This file is the checker behind TestDocReferences: repoTree knows the tree (its folders, file
// names, packages and what they declare, parsed on demand), and docScan reads one document
// against it.

// repoTree answers the checker's questions about the tree at root.
type repoTree struct {
	root      string
	topDirs   []string            // the root's folders
	baseNames map[string]bool     // base names of every file in the tree
	pkgDirs   map[string][]string // package name -> folders holding a package of that name
	decls     map[string]map[string]bool
	// packageDocs are the packages' doc comments (the comment above a package clause).
	packageDocs []packageDoc
	// typeDirs: type name -> the package folders declaring it (built on first use).
	typeDirs map[string][]string
}

type packageDoc struct{ file, text string }

// Folders left out of the tree's walk: what the build, the commands and the tests' data keep.
func skippedDir(name string) bool {
	return strings.HasPrefix(name, ".") && name != ".ci" || name == "testdata" || slices.Contains(outputDirs, name)
}

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
			if p != root && skippedDir(name) {
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

func (r *repoTree) pathExists(p string) bool {
	if strings.ContainsAny(p, "*?[") {
		matches, _ := filepath.Glob(filepath.Join(r.root, p))
		return len(matches) > 0
	}
	_, err := os.Stat(filepath.Join(r.root, p))
	return err == nil
}

func (r *repoTree) isDir(p string) bool {
	st, err := os.Stat(filepath.Join(r.root, p))
	return err == nil && st.IsDir()
}

func (r *repoTree) declsOf(dir string) map[string]bool {
	d, ok := r.decls[dir]
	if !ok {
		d = parseDecls(filepath.Join(r.root, dir))
		r.decls[dir] = d
	}
	return d
}

// typesNamed lists the package folders that declare a type of this name.
func (r *repoTree) typesNamed(name string) []string {
	if r.typeDirs == nil {
		r.typeDirs = map[string][]string{}
		for _, dirs := range r.pkgDirs {
			for _, dir := range dirs {
				for decl := range r.declsOf(dir) {
					if typ, ok := strings.CutSuffix(decl, ".type"); ok && !strings.Contains(typ, ".") {
						r.typeDirs[typ] = append(r.typeDirs[typ], dir)
					}
				}
			}
		}
	}
	return r.typeDirs[name]
}

// declared reports whether the Go package in dir declares name: a top-level identifier, a method
// of one of its types by its name alone (the docs write ggml.MulMatPacked for Context's), or
// Type.Member (a method, a struct field or an interface method, also through an embedded type
// of the same package; one embedded from another package is taken on trust).
func (r *repoTree) declared(dir, name string) bool {
	d := r.declsOf(dir)
	if d[name] || d["method."+name] {
		return true
	}
	typ, member, ok := strings.Cut(name, ".")
	if !ok || !d[typ] {
		return false
	}
	for decl := range d {
		if embedded, ok := strings.CutPrefix(decl, typ+".embeds."); ok {
			if embedded == "" || r.declared(dir, embedded+"."+member) {
				return true
			}
		}
	}
	return false
}

// parseDecls lists what the .go files of dir (test files and every build tag's included) declare
// at the top level, with T.type for each type T, T.Member for its methods and fields,
// method.Name for every method, T.embeds.E for an embedded type E of the package and T.embeds.
// for one of another package.
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
					decls[typeName(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
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

// addMembers adds a struct's fields or an interface's methods, and what they embed.
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
			if e := typeName(f.Type); strings.Contains(e, ".") {
				decls[typ+".embeds."] = true
			} else {
				decls[typ+".embeds."+e] = true
			}
		}
	}
}

// typeName is the name of a receiver's or embedded field's type: T, *T, T[P], pkg.T.
func typeName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return typeName(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	// A path-like token: segments of names, wildcards and <placeholders>, not part of a longer
	// path (no '/', word character or '.' just before it), optionally with a #section.
	pathToken = regexp.MustCompile(`(^|[^A-Za-z0-9_./$@~-])((?:\.\./)*[A-Za-z0-9_.<>*-]+(?:/[A-Za-z0-9_.<>*-]*)+(?:#[A-Za-z0-9_-]+)?)`)
	// A link's target: [text](target).
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A file named by its base name: `name.go`, `NAME.md` in backticks (m[1]), or name.go in the
	// text (m[2]; taken in a package's doc only: the Markdown docs name Go's own sources, sort.go,
	// as prompts).
	baseNameToken = regexp.MustCompile("`([A-Za-z0-9][A-Za-z0-9_-]*\\.(?:go|md))`|(?:^|[^A-Za-z0-9_./`-])([a-z0-9][a-z0-9_]*\\.go)\\b")
	// pkg.Name, pkg.Type.Member: a package name, then exported or Type-qualified names.
	packageIdent = regexp.MustCompile(`(^|[^A-Za-z0-9_./-])([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)`)
	// Type.Member, for a type of this module: in backticks in Markdown, bare in a package's doc.
	typeMemberTicked = regexp.MustCompile("`([A-Z][A-Za-z0-9_]*)\\.([A-Za-z_][A-Za-z0-9_]*)")
	typeMemberBare   = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Z][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	// Type.ext that is a file's name (HARDWARE.toml, CUDA.md), not a member.
	fileExtensions = []string{"md", "toml", "go", "h", "c", "cu", "json", "jsonl", "gguf", "py", "sh", "txt", "png"}
	// A test in a package's list: `dir: TestX` (m[1], m[2]), or `TestY` after it (m[2]).
	testList = regexp.MustCompile("`(?:([a-z][a-z0-9_/]*): )?((?:Test|Fuzz|Benchmark|Example)[A-Za-z0-9_]*)`")
	// A section cited by name in another document: docs/X.md, "Section" (or X.md's "Section").
	citedSection = regexp.MustCompile(`((?:[a-z]+/)*[A-Z][A-Z-]*\.md)(?:'s)?,?\s+"([^"]{2,120})"`)
	// A section of the same document: "Section" below (or above).
	nearSection = regexp.MustCompile(`"([^"]{2,120})",? (?:below|above)\b`)

	heading     = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	boldLabel   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	placeholder = regexp.MustCompile(`<[^<>/]*>`)
)

// staleReferences returns "doc:line: reference (why)" for each reference in text that the tree
// does not hold. doc is the document's path from the root: relative paths resolve from its folder.
func (r *repoTree) staleReferences(doc, text string) []string {
	s := &docScan{tree: r, doc: doc, dir: path.Dir(doc), text: text, isGo: strings.HasSuffix(doc, ".go")}
	if !s.isGo {
		s.sections()
	}
	for i, line := range strings.Split(text, "\n") {
		s.paths(i+1, line)
		s.baseNames(i+1, line)
		s.testLists(i+1, line)
		s.typeMembers(i+1, line)
		s.packageIdents(i+1, line)
	}
	return s.stale
}

// docScan is one document read against the tree.
type docScan struct {
	tree     *repoTree
	doc, dir string // the document and its folder
	text     string
	isGo     bool // a package's doc comment, not Markdown
	stale    []string
}

func (s *docScan) report(line int, ref, why string) {
	s.stale = append(s.stale, fmt.Sprintf("%s:%d: %s (%s)", s.doc, line, ref, why))
}

// exempt: the document may name ref though the tree lacks it (notInTree).
func (s *docScan) exempt(ref string) bool {
	return slices.ContainsFunc(notInTree[s.doc], func(pattern string) bool {
		ok, _ := path.Match(pattern, ref)
		return ok
	})
}

// paths checks the line's link targets and path-like tokens.
func (s *docScan) paths(n int, line string) {
	seen := map[string]bool{}
	check := func(ref string, fromLink bool) {
		if seen[ref] {
			return
		}
		seen[ref] = true
		if why := s.checkPath(ref, fromLink); why != "" {
			s.report(n, ref, why)
		}
	}
	for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
		if !strings.Contains(m[1], "://") && !strings.HasPrefix(m[1], "mailto:") {
			check(m[1], true)
		}
	}
	for _, m := range pathToken.FindAllStringSubmatch(line, -1) {
		if ref := strings.TrimRight(m[2], ".-"); s.looksLocal(ref) {
			check(ref, false)
		}
	}
}

// looksLocal: a token is taken for a path of this repository when its first segment is a
// folder at the root or beside the document, or it climbs out of the document's folder.
func (s *docScan) looksLocal(ref string) bool {
	if strings.HasPrefix(ref, "../") {
		return true
	}
	first, _, _ := strings.Cut(ref, "/")
	switch {
	case first == "." || slices.Contains(outputDirs, first):
		return false
	case slices.Contains(s.tree.topDirs, first):
		return true
	}
	return s.dir != "." && s.tree.isDir(path.Join(s.dir, first))
}

// checkPath checks one path reference (with an optional #section) and says what is wrong, or "".
func (s *docScan) checkPath(ref string, fromLink bool) string {
	p, anchor, _ := strings.Cut(ref, "#")
	// dir/pkg.Name: a package's identifier.
	if dot := strings.LastIndex(p, "."); dot > strings.LastIndex(p, "/") && dot+1 < len(p) && unicode.IsUpper(rune(p[dot+1])) {
		if dir, name := p[:dot], p[dot+1:]; s.tree.isDir(dir) {
			if s.tree.declared(dir, name) {
				return ""
			}
			return "not declared in " + dir
		}
	}
	p = strings.ReplaceAll(placeholder.ReplaceAllString(p, "*"), "**", "*")
	var candidates []string
	switch {
	case p == "":
		candidates = []string{s.doc}
	case fromLink || strings.HasPrefix(p, "../"):
		candidates = []string{path.Join(s.dir, p), path.Clean(p)}
	default:
		candidates = []string{path.Clean(p), path.Join(s.dir, p)}
	}
	if slices.ContainsFunc(append(candidates, ref), s.exempt) {
		return ""
	}
	i := slices.IndexFunc(candidates, func(c string) bool { return !strings.HasPrefix(c, "../") && s.tree.pathExists(c) })
	if i < 0 {
		return "not in the tree"
	}
	found := candidates[i]
	if anchor == "" || !strings.HasSuffix(found, ".md") {
		return ""
	}
	text, err := s.read(found)
	if err != nil {
		return err.Error()
	}
	if slices.Contains(headingAnchors(text), anchor) {
		return ""
	}
	return "no heading #" + anchor + " in " + found
}

// read returns a document's text: this one's, or another's from the tree.
func (s *docScan) read(file string) (string, error) {
	if file == s.doc {
		return s.text, nil
	}
	b, err := os.ReadFile(filepath.Join(s.tree.root, file))
	return string(b), err
}

// baseNames checks the Go and Markdown files the line names by their base names.
func (s *docScan) baseNames(n int, line string) {
	for _, m := range baseNameToken.FindAllStringSubmatch(line, -1) {
		switch name := m[1] + m[2]; {
		case s.exempt(name):
		case m[1] != "":
			if !s.tree.baseNames[name] {
				s.report(n, name, "no file of that name in the tree")
			}
		case s.isGo:
			// A package's doc names its own files (or, for a test kit, its parent's).
			if !s.tree.pathExists(path.Join(s.dir, name)) && !s.tree.pathExists(path.Join(path.Dir(s.dir), name)) {
				s.report(n, name, "not in "+s.dir)
			}
		}
	}
}

// testLists checks docs/RELIABILITY.md's form: `dir: TestA`, `TestB`; `other/dir: TestC` (a
// list runs up to a ';' or the table cell's end).
func (s *docScan) testLists(n int, line string) {
	for _, part := range strings.FieldsFunc(line, func(c rune) bool { return c == ';' || c == '|' }) {
		dir := ""
		for _, m := range testList.FindAllStringSubmatch(part, -1) {
			if m[1] != "" {
				dir = m[1]
				if !s.tree.isDir(dir) {
					s.report(n, dir, "not in the tree")
					dir = ""
				}
			}
			if dir != "" && !s.tree.declared(dir, m[2]) {
				s.report(n, dir+": "+m[2], "no such test in "+dir)
			}
		}
	}
}

// typeMembers checks Type.Member where Type is a type this module declares.
func (s *docScan) typeMembers(n int, line string) {
	members := typeMemberTicked
	if s.isGo {
		members = typeMemberBare
	}
	for _, m := range members.FindAllStringSubmatch(line, -1) {
		typ, member := m[1], m[2]
		if slices.Contains(fileExtensions, member) || s.exempt(typ+"."+member) {
			continue
		}
		dirs := s.tree.typesNamed(typ)
		if len(dirs) > 0 && !slices.ContainsFunc(dirs, func(d string) bool { return s.tree.declared(d, typ+"."+member) }) {
			s.report(n, typ+"."+member, "no "+member+" on "+typ+" in "+strings.Join(dirs, ", "))
		}
	}
}

// packageIdents checks pkg.Name and pkg.Type.Member where pkg names a package of this module.
func (s *docScan) packageIdents(n int, line string) {
	for _, m := range packageIdent.FindAllStringSubmatch(line, -1) {
		pkg, name := m[2], m[3]
		dirs := s.tree.pkgDirs[pkg]
		if len(dirs) == 0 || s.exempt(pkg+"."+name) {
			continue
		}
		if !slices.ContainsFunc(dirs, func(d string) bool { return s.tree.declared(d, name) }) {
			s.report(n, pkg+"."+name, "not declared in package "+pkg+" ("+strings.Join(dirs, ", ")+")")
		}
	}
}

// sections checks the sections the document cites by name (docs/X.md, "Section"; "Section"
// below): each must be a heading or a bold paragraph label of the document cited, or the start
// of one, with "…" standing for words left out.
func (s *docScan) sections() {
	labelsOf := map[string][]string{}
	check := func(at int, file, name string) {
		labels, ok := labelsOf[file]
		if !ok {
			text, err := s.read(file)
			if err != nil {
				return // the path check reports it
			}
			labels = sectionLabels(text)
			labelsOf[file] = labels
		}
		name = collapse(name)
		if !slices.ContainsFunc(labels, func(l string) bool { return labelMatches(l, name) }) {
			s.stale = append(s.stale, fmt.Sprintf("%s:%d: %q (no such section in %s)", s.doc, strings.Count(s.text[:at], "\n")+1, name, file))
		}
	}
	for _, m := range citedSection.FindAllStringSubmatchIndex(s.text, -1) {
		cited := s.text[m[2]:m[3]]
		candidates := []string{path.Join(s.dir, cited), cited, path.Join("docs", cited)}
		if i := slices.IndexFunc(candidates, s.tree.pathExists); i >= 0 {
			check(m[0], candidates[i], s.text[m[4]:m[5]])
		}
	}
	for _, m := range nearSection.FindAllStringSubmatchIndex(s.text, -1) {
		check(m[0], s.doc, s.text[m[2]:m[3]])
	}
}

// collapse drops backticks and collapses white space, as a section's name is compared.
func collapse(name string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(name, "`", "")), " ")
}

// headings lists a Markdown text's headings, outside code fences.
func headings(text string) []string {
	var hs []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		} else if m := heading.FindStringSubmatch(line); m != nil && !fenced {
			hs = append(hs, m[1])
		}
	}
	return hs
}

// sectionLabels lists a Markdown text's headings and bold labels, collapsed.
func sectionLabels(text string) []string {
	labels := headings(text)
	for _, m := range boldLabel.FindAllStringSubmatch(text, -1) {
		labels = append(labels, m[1])
	}
	for i := range labels {
		labels[i] = collapse(labels[i])
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
		p = strings.TrimSpace(p)
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// headingAnchors lists the anchors GitHub gives a Markdown text's headings (lower case,
// punctuation dropped, spaces as hyphens, a repeat suffixed -1, -2, ...) and its HTML anchors
// (<a id="x">).
func headingAnchors(text string) []string {
	var anchors []string
	for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
		anchors = append(anchors, m[1])
	}
	count := map[string]int{}
	for _, h := range headings(text) {
		var b strings.Builder
		for _, c := range strings.ToLower(headingLink.ReplaceAllString(h, "$1")) {
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
	return anchors
}
