package genutil

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// SpecPackage is a spec package a generator reads (its syntax and types, from go/packages) and
// the problems found in it so far, each at its file:line relative to the module root.
type SpecPackage struct {
	// Root is the module root, which positions are relative to.
	Root string
	// Pkg is the loaded package.
	Pkg  *packages.Package
	errs []posError
}

type posError struct {
	pos token.Position
	msg string
}

// LoadSpec loads the one package matched by pattern (relative to root, the module root). A spec
// that does not compile is an error naming each problem's file:line.
func LoadSpec(root, pattern string) (*SpecPackage, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
			packages.NeedTypes | packages.NeedTypesInfo,
		Dir:   root,
		Tests: false,
	}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		return nil, fmt.Errorf("kernelgen: loading %s: %w", pattern, err)
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("kernelgen: %s matched %d packages, want 1", pattern, len(pkgs))
	}
	pkg := pkgs[0]
	if len(pkg.Errors) > 0 {
		var msgs []string
		for _, e := range pkg.Errors {
			pos := e.Pos
			if rel, err := filepath.Rel(root, pos); err == nil && !strings.HasPrefix(rel, "..") {
				pos = filepath.ToSlash(rel)
			}
			msgs = append(msgs, pos+": "+e.Msg)
		}
		return nil, fmt.Errorf("kernelgen: spec %s does not compile:\n\t%s", pattern, strings.Join(msgs, "\n\t"))
	}
	return &SpecPackage{Root: root, Pkg: pkg}, nil
}

// Errorf records a problem at pos.
func (s *SpecPackage) Errorf(pos token.Pos, format string, args ...any) {
	s.ErrorAt(s.Position(pos), format, args...)
}

// ErrorAt records a problem at p, a position Position gave.
func (s *SpecPackage) ErrorAt(p token.Position, format string, args ...any) {
	s.errs = append(s.errs, posError{p, fmt.Sprintf(format, args...)})
}

// Position is pos with its file relative to the module root.
func (s *SpecPackage) Position(pos token.Pos) token.Position {
	p := s.Pkg.Fset.Position(pos)
	if rel, err := filepath.Rel(s.Root, p.Filename); err == nil {
		p.Filename = filepath.ToSlash(rel)
	}
	return p
}

// Err is every problem recorded, "file:line: message" each, ordered by file and line; nil when
// there is none.
func (s *SpecPackage) Err() error {
	sort.SliceStable(s.errs, func(i, j int) bool {
		a, b := s.errs[i].pos, s.errs[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	var errs []error
	for _, e := range s.errs {
		errs = append(errs, fmt.Errorf("%s:%d: %s", e.pos.Filename, e.pos.Line, e.msg))
	}
	return errors.Join(errs...)
}

// Files are the package's files, ordered by name.
func (s *SpecPackage) Files() []*ast.File {
	files := append([]*ast.File(nil), s.Pkg.Syntax...)
	sort.Slice(files, func(i, j int) bool {
		return s.Pkg.Fset.Position(files[i].Pos()).Filename < s.Pkg.Fset.Position(files[j].Pos()).Filename
	})
	return files
}

// Directive is one //kernelgen:NAME ARGS line of a spec's comments.
type Directive struct {
	Name string
	Args []string
	Pos  token.Pos
}

// String is the directive as written, without its slashes: "kernelgen:NAME ARGS".
func (d Directive) String() string {
	return strings.TrimSpace("kernelgen:" + d.Name + " " + strings.Join(d.Args, " "))
}

// Directives lists the //kernelgen: lines of the comment groups, in order ("//kernelgen:" alone
// is a directive with no name).
func Directives(groups ...*ast.CommentGroup) []Directive {
	var ds []Directive
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			rest, ok := strings.CutPrefix(c.Text, "//kernelgen:")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) == 0 {
				ds = append(ds, Directive{Pos: c.Pos()})
				continue
			}
			ds = append(ds, Directive{Name: f[0], Args: f[1:], Pos: c.Pos()})
		}
	}
	return ds
}

// Doc is the text of a doc comment, trimmed ("" for none).
func Doc(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.TrimSpace(g.Text())
}
