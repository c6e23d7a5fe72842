package genutil

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strings"
)

// checkDocs parses src, a rendered Go file named file, and checks that the doc comment of every
// exported declaration starts with its name, as Go's convention wants: top-level functions,
// methods of exported types, types, and constants and variables (a member of a parenthesised
// group may go undocumented, the group's type documents it, but a doc it has must start with
// its name). Struct fields are not checked. specPos gives, by Go name, the spec position the
// declaration came from; an error names it where known, and the output file:line otherwise.
func checkDocs(file string, src []byte, specPos map[string]token.Position) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("kernelgen: %s does not parse: %w", file, err)
	}
	var errs []error
	check := func(name string, doc *ast.CommentGroup, pos token.Pos, required bool) {
		if !ast.IsExported(name) {
			return
		}
		text := ""
		if doc != nil {
			text = doc.Text()
		}
		if text == "" && !required {
			return
		}
		if startsWithName(text, name) {
			return
		}
		where := fset.Position(pos).String()
		if p, ok := specPos[name]; ok && p.IsValid() {
			where = fmt.Sprintf("%s:%d (emitted at %s)", p.Filename, p.Line, where)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		if first == "" {
			errs = append(errs, fmt.Errorf("%s: %s has no doc comment", where, name))
			return
		}
		errs = append(errs, fmt.Errorf("%s: the doc comment of %s must start with its name, not %q", where, name, first))
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil && !exportedReceiver(d.Recv) {
				continue
			}
			check(d.Name.Name, d.Doc, d.Name.Pos(), true)
		case *ast.GenDecl:
			grouped := d.Lparen.IsValid()
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc := s.Doc
					if doc == nil && !grouped {
						doc = d.Doc
					}
					check(s.Name.Name, doc, s.Name.Pos(), true)
				case *ast.ValueSpec:
					doc := s.Doc
					if doc == nil && !grouped {
						doc = d.Doc
					}
					for _, n := range s.Names {
						if ast.IsExported(n.Name) {
							// A spec declaring several names documents them with its first.
							check(n.Name, doc, n.Pos(), !grouped)
							break
						}
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return ast.IsExported(x.Name)
		default:
			return false
		}
	}
}

// CheckFileDocs runs checkDocs over every Go file of files (by name), as each generator does
// before it returns what it rendered.
func CheckFileDocs(files map[string][]byte, specPos map[string]token.Position) error {
	names := make([]string, 0, len(files))
	for n := range files {
		if strings.HasSuffix(n, ".go") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := checkDocs(n, files[n], specPos); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kernelgen: doc comments that do not start with their name:\n%w", errors.Join(errs...))
	}
	return nil
}
