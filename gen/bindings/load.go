package bindings

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"github.com/toyml/toy/gen/genutil"
)

// primitivesPkg is the import path of the spec language's primitive types (Const, Ptr, Int, ...).
const primitivesPkg = "github.com/toyml/toy/specs/spec"

// load reads the spec package matched by pattern (relative to dir, the module root) and returns
// its validated model. Every problem is reported with its file:line, all at once.
func load(dir, pattern string) (*model, error) {
	spec, err := genutil.LoadSpec(dir, pattern)
	if err != nil {
		return nil, err
	}
	l := &loader{SpecPackage: spec, m: &model{SpecPkg: spec.Pkg.PkgPath},
		handles: map[string]*handle{}, structs: map[string]*cStruct{}, enums: map[string]*enum{}}
	l.load()
	if err := l.Err(); err != nil {
		return nil, err
	}
	return l.m, nil
}

// loader reads a spec package into its model, recording every problem in the package.
type loader struct {
	*genutil.SpecPackage
	m       *model
	handles map[string]*handle
	structs map[string]*cStruct
	enums   map[string]*enum
}

// keyValues splits "key=value" arguments, rejecting keys not in allowed.
func (l *loader) keyValues(d genutil.Directive, args []string, allowed ...string) map[string]string {
	kv := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || v == "" {
			l.Errorf(d.Pos, "kernelgen:%s: argument %q is not key=value", d.Name, a)
			continue
		}
		known := false
		for _, al := range allowed {
			known = known || al == k
		}
		if !known {
			l.Errorf(d.Pos, "kernelgen:%s: unknown key %q (known: %s)", d.Name, k, strings.Join(allowed, ", "))
			continue
		}
		kv[k] = v
	}
	return kv
}

type pendingFields struct {
	fields *[]*field // nil for a kernelgen:fields type, whose handle is looked up later
	st     *ast.StructType
	owner  string
	pos    token.Pos
}

type pendingIface struct {
	spec             *ast.TypeSpec
	iface            *ast.InterfaceType
	prefix, goprefix string
	data             bool // kernelgen:data: the methods are exported objects, not functions
}

func (l *loader) load() {
	var fields []pendingFields
	var ifaces []pendingIface
	var consts []*ast.GenDecl
	for _, f := range l.Files() {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				l.Errorf(d.Pos(), "specs declare no functions; put %s in an interface", d.Name.Name)
			case *ast.GenDecl:
				switch d.Tok {
				case token.IMPORT:
				case token.VAR:
					l.Errorf(d.Pos(), "specs declare no variables")
				case token.CONST:
					consts = append(consts, d)
				case token.TYPE:
					for _, s := range d.Specs {
						ts := s.(*ast.TypeSpec)
						dg := ts.Doc
						if dg == nil && len(d.Specs) == 1 {
							dg = d.Doc
						}
						pf, pi := l.typeDecl(ts, dg)
						if pf != nil {
							fields = append(fields, *pf)
						}
						if pi != nil {
							ifaces = append(ifaces, *pi)
						}
					}
				}
			}
		}
	}
	for _, pf := range fields {
		l.fields(pf)
	}
	for _, d := range consts {
		l.constDecl(d)
	}
	for _, e := range l.m.Enums {
		if len(e.Values) == 0 {
			l.ErrorAt(e.Pos, "enum %s declares no constants", e.GoName)
		}
	}
	goNames := map[string]token.Position{}
	for _, h := range l.m.Handles {
		goNames[h.GoName] = h.Pos
	}
	for _, pi := range ifaces {
		l.iface(pi, goNames)
	}
	l.checkStructResults()
	for _, e := range l.m.Enums {
		if e.NameFunc == "" {
			continue
		}
		f := l.findFunc(e.NameFunc)
		if f == nil || len(f.Params) != 1 || f.Params[0].Type.Enum != e || f.Result == nil || f.Result.Kind != kindString {
			l.ErrorAt(e.Pos, "enum %s: name=%s must be a bound function of (%s) string", e.GoName, e.NameFunc, e.GoName)
		}
	}
}

func (l *loader) findFunc(goName string) *function {
	for _, f := range l.m.Funcs {
		if f.GoName == goName {
			return f
		}
	}
	return nil
}

func (l *loader) typeDecl(ts *ast.TypeSpec, dg *ast.CommentGroup) (*pendingFields, *pendingIface) {
	name := ts.Name.Name
	ds := genutil.Directives(dg)
	if len(ds) != 1 {
		l.Errorf(ts.Pos(), "type %s needs exactly one kernelgen directive (handle, fields, struct, enum, functions or data), has %d", name, len(ds))
		return nil, nil
	}
	d := ds[0]
	pos := l.Position(ts.Pos())
	if genutil.Doc(dg) == "" {
		l.Errorf(ts.Pos(), "type %s has no doc comment (it becomes the Go documentation)", name)
	}
	switch d.Name {
	case "handle":
		h := &handle{GoName: name, Doc: genutil.GoDoc(name, name, genutil.Doc(dg)), Pos: pos}
		spec := strings.Join(d.Args, " ")
		if td, st, ok := strings.Cut(spec, "="); ok {
			h.Typedef, h.Struct = strings.TrimSpace(td), strings.TrimSpace(st)
			if !isCIdent(h.Typedef) {
				l.Errorf(d.Pos, "kernelgen:handle: %q is not a C typedef name", h.Typedef)
			}
		} else {
			h.Struct = spec
		}
		if !isStructTag(h.Struct) {
			l.Errorf(d.Pos, "kernelgen:handle wants `struct NAME` or `TYPEDEF = struct NAME`, got %q", spec)
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok || len(st.Fields.List) > 0 {
			l.Errorf(ts.Pos(), "handle %s must be declared as struct{} (declare its C layout in a kernelgen:fields type)", name)
			return nil, nil
		}
		l.handles[name] = h
		l.m.Handles = append(l.m.Handles, h)
	case "fields":
		st, ok := ts.Type.(*ast.StructType)
		if !ok || len(st.Fields.List) == 0 || len(d.Args) != 1 {
			l.Errorf(ts.Pos(), "kernelgen:fields HANDLE belongs on a struct type with fields")
			return nil, nil
		}
		return &pendingFields{owner: d.Args[0], st: st, pos: d.Pos}, nil
	case "struct":
		s := &cStruct{GoName: name, Doc: genutil.GoDoc(name, name, genutil.Doc(dg)), CName: strings.Join(d.Args, " "), Pos: pos}
		if !isStructTag(s.CName) && !isCIdent(s.CName) {
			l.Errorf(d.Pos, "kernelgen:struct wants `struct NAME`, or the typedef name of an anonymous struct, got %q", s.CName)
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok || len(st.Fields.List) == 0 {
			l.Errorf(ts.Pos(), "struct %s must be a struct type with fields", name)
			return nil, nil
		}
		l.structs[name] = s
		l.m.Structs = append(l.m.Structs, s)
		return &pendingFields{fields: &s.Fields, st: st, owner: name}, nil
	case "enum":
		e := &enum{GoName: name, Doc: genutil.GoDoc(name, name, genutil.Doc(dg)), Pos: pos}
		var rest []string
		for _, a := range d.Args {
			if strings.Contains(a, "=") {
				rest = append(rest, a)
			} else {
				e.CType = strings.TrimSpace(e.CType + " " + a)
			}
		}
		kv := l.keyValues(d, rest, "prefix", "name")
		e.Prefix, e.NameFunc = kv["prefix"], kv["name"]
		if e.CType != "int" && !strings.HasPrefix(e.CType, "enum ") && !isCIdent(e.CType) {
			l.Errorf(d.Pos, "kernelgen:enum wants `enum NAME`, the typedef name of an anonymous enum, or `int`, got %q", e.CType)
		}
		if e.Prefix == "" {
			l.Errorf(d.Pos, "kernelgen:enum needs prefix=")
		}
		obj := l.Pkg.TypesInfo.Defs[ts.Name]
		basic, ok := obj.Type().Underlying().(*types.Basic)
		if !ok || basic.Info()&types.IsInteger == 0 {
			l.Errorf(ts.Pos(), "enum %s must have an integer underlying type", name)
		} else {
			e.GoBase = basic.Name()
		}
		l.enums[name] = e
		l.m.Enums = append(l.m.Enums, e)
	case "functions", "data":
		it, ok := ts.Type.(*ast.InterfaceType)
		if !ok {
			l.Errorf(ts.Pos(), "kernelgen:%s belongs on an interface type", d.Name)
			return nil, nil
		}
		kv := l.keyValues(d, d.Args, "prefix", "goprefix")
		return nil, &pendingIface{spec: ts, iface: it, prefix: kv["prefix"], goprefix: kv["goprefix"], data: d.Name == "data"}
	default:
		l.Errorf(d.Pos, "unknown directive kernelgen:%s on type %s", d.Name, name)
	}
	return nil, nil
}

func isStructTag(s string) bool {
	name, ok := strings.CutPrefix(s, "struct ")
	return ok && isCIdent(name)
}

func isCIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (l *loader) fields(pf pendingFields) {
	if pf.fields == nil {
		h := l.handles[pf.owner]
		if h == nil {
			l.Errorf(pf.pos, "kernelgen:fields %s: no such handle", pf.owner)
			return
		}
		if len(h.Fields) > 0 {
			l.Errorf(pf.pos, "kernelgen:fields %s: the handle's fields are already declared", pf.owner)
			return
		}
		pf.fields = &h.Fields
	}
	for _, f := range pf.st.Fields.List {
		ds := genutil.Directives(f.Doc, f.Comment)
		cname, ctype := "", ""
		for _, d := range ds {
			switch {
			case d.Name == "c" && len(d.Args) == 1 && isCIdent(d.Args[0]):
				cname = d.Args[0]
			case d.Name == "ctype" && len(d.Args) > 0:
				ctype = strings.Join(d.Args, " ")
			default:
				l.Errorf(d.Pos, "fields take only kernelgen:c NAME and kernelgen:ctype C-TYPE")
			}
		}
		if len(f.Names) == 0 {
			l.Errorf(f.Pos(), "%s: embedded fields are not allowed", pf.owner)
			continue
		}
		typ := l.resolve(l.Pkg.TypesInfo.TypeOf(f.Type), f.Type.Pos(), "field")
		if ctype != "" && (typ.Kind != kindPtr || typ.Const) {
			l.Errorf(f.Pos(), "%s: kernelgen:ctype belongs on a Ptr field (an opaque pointer whose C type the proof checks)", pf.owner)
		}
		for _, n := range f.Names {
			fl := &field{GoName: n.Name, CName: cname, Doc: genutil.GoDoc(n.Name, n.Name, genutil.Doc(f.Doc)), Type: typ, ProofCType: ctype, Pos: l.Position(n.Pos())}
			if fl.CName == "" {
				if n.Name == "_" {
					l.Errorf(n.Pos(), "%s: a blank field needs kernelgen:c NAME", pf.owner)
				}
				fl.CName = snake(n.Name)
			}
			*pf.fields = append(*pf.fields, fl)
		}
	}
}

func (l *loader) constDecl(d *ast.GenDecl) {
	for _, s := range d.Specs {
		vs := s.(*ast.ValueSpec)
		ds := genutil.Directives(vs.Doc, vs.Comment)
		for _, n := range vs.Names {
			obj := l.Pkg.TypesInfo.Defs[n].(*types.Const)
			named, ok := obj.Type().(*types.Named)
			var e *enum
			if ok {
				e = l.enums[named.Obj().Name()]
			}
			if e == nil || named.Obj().Pkg() != l.Pkg.Types {
				l.Errorf(n.Pos(), "constant %s must have a declared enum type", n.Name)
				continue
			}
			v, exact := constant.Int64Val(obj.Val())
			if !exact {
				l.Errorf(n.Pos(), "constant %s does not fit in int64", n.Name)
				continue
			}
			ev := &enumValue{GoName: n.Name, Doc: genutil.GoDoc(n.Name, n.Name, genutil.Doc(vs.Doc)), Value: v, Pos: l.Position(n.Pos())}
			for _, d := range ds {
				if d.Name != "c" || len(d.Args) != 1 || !isCIdent(d.Args[0]) {
					l.Errorf(d.Pos, "constants take only kernelgen:c NAME")
					continue
				}
				ev.CName = d.Args[0]
			}
			if ev.CName == "" {
				cn, ok := enumConstCName(n.Name, e.GoName, e.Prefix)
				if !ok {
					l.Errorf(n.Pos(), "constant %s must start with its type's name %s, or carry kernelgen:c NAME", n.Name, e.GoName)
					continue
				}
				ev.CName = cn
			}
			e.Values = append(e.Values, ev)
		}
	}
}

func (l *loader) iface(pi pendingIface, goNames map[string]token.Position) {
	for _, m := range pi.iface.Methods.List {
		if len(m.Names) != 1 {
			l.Errorf(m.Pos(), "interface %s: embedded interfaces are not allowed", pi.spec.Name.Name)
			continue
		}
		if pi.data {
			l.data(pi, m, goNames)
			continue
		}
		name := m.Names[0].Name
		fn := &function{GoName: pi.goprefix + name, CName: pi.prefix + snake(name), Doc: genutil.GoDoc(pi.goprefix+name, name, genutil.Doc(m.Doc)), Pos: l.Position(m.Pos())}
		if fn.Doc == "" {
			l.Errorf(m.Pos(), "method %s has no doc comment (it becomes the Go documentation)", name)
		}
		ctypes := map[string]string{}
		for _, d := range genutil.Directives(m.Doc, m.Comment) {
			switch {
			case d.Name == "c" && len(d.Args) == 1 && isCIdent(d.Args[0]):
				fn.CName = d.Args[0]
			case d.Name == "optional" && len(d.Args) == 0:
				fn.Optional = true
			case d.Name == "address" && len(d.Args) == 0:
				fn.Address = true
			case d.Name == "ctype" && len(d.Args) >= 2:
				ctypes[d.Args[0]] = strings.Join(d.Args[1:], " ")
			default:
				l.Errorf(d.Pos, "unknown directive %q on method %s (known: kernelgen:c NAME, kernelgen:optional, kernelgen:address, kernelgen:ctype PARAM C-TYPE)", d, name)
			}
		}
		if !l.claimGoName(goNames, fn.GoName, m.Pos()) {
			continue
		}
		if fn.Address {
			if prev, dup := goNames[fn.GoName+"Address"]; dup {
				l.Errorf(m.Pos(), "Go name %sAddress (kernelgen:address) is already used at %s:%d", fn.GoName, prev.Filename, prev.Line)
			}
			goNames[fn.GoName+"Address"] = fn.Pos
		}
		sig := l.Pkg.TypesInfo.TypeOf(m.Type).(*types.Signature)
		if sig.Variadic() {
			l.Errorf(m.Pos(), "method %s: variadic functions cannot be bound", name)
			continue
		}
		for i := 0; i < sig.Params().Len(); i++ {
			p := sig.Params().At(i)
			pname := p.Name()
			if pname == "" || pname == "_" {
				pname = fmt.Sprintf("p%d", i)
			}
			if cKeywords[pname] {
				l.Errorf(m.Pos(), "method %s: parameter name %s is a C keyword", name, pname)
			}
			fp := &param{Name: pname, Type: l.resolve(p.Type(), m.Pos(), "param"), ProofCType: ctypes[pname]}
			if fp.ProofCType != "" {
				if fp.Type.Kind != kindPtr || fp.Type.Const {
					l.Errorf(m.Pos(), "method %s: kernelgen:ctype %s belongs on a Ptr parameter (an opaque pointer whose C type the proof checks)", name, pname)
				}
				delete(ctypes, pname)
			}
			fn.Params = append(fn.Params, fp)
		}
		for pname := range ctypes {
			l.Errorf(m.Pos(), "method %s: kernelgen:ctype names %s, which is not a parameter", name, pname)
		}
		switch sig.Results().Len() {
		case 0:
		case 1:
			fn.Result = l.resolve(sig.Results().At(0).Type(), m.Pos(), "result")
		default:
			l.Errorf(m.Pos(), "method %s: at most one result", name)
		}
		l.m.Funcs = append(l.m.Funcs, fn)
	}
}

// claimGoName records that the method at pos declares the Go name goName, or reports there
// that an earlier declaration of the package has it already and returns false.
func (l *loader) claimGoName(goNames map[string]token.Position, goName string, pos token.Pos) bool {
	if prev, dup := goNames[goName]; dup {
		l.Errorf(pos, "Go name %s is already used at %s:%d (set goprefix= on the interface)", goName, prev.Filename, prev.Line)
		return false
	}
	goNames[goName] = l.Position(pos)
	return true
}

// data records one method of a kernelgen:data interface: an exported object whose address is a
// handle. The method takes nothing and returns the handle; its C name is prefix+snake_case(name)
// unless kernelgen:c says otherwise, and kernelgen:macro NAME names the header's spelling of the
// handle, which the proof checks against the object's address. kernelgen:macro NAME value=N
// declares instead a constant address the header #defines (MPI_IN_PLACE): the method returns
// Ptr, and there is no object.
func (l *loader) data(pi pendingIface, m *ast.Field, goNames map[string]token.Position) {
	name := m.Names[0].Name
	d := &data{GoName: pi.goprefix + name, CName: pi.prefix + snake(name), Doc: genutil.GoDoc(pi.goprefix+name, name, genutil.Doc(m.Doc)), Pos: l.Position(m.Pos())}
	if d.Doc == "" {
		l.Errorf(m.Pos(), "method %s has no doc comment (it becomes the Go documentation)", name)
	}
	for _, dr := range genutil.Directives(m.Doc, m.Comment) {
		switch {
		case dr.Name == "c" && len(dr.Args) == 1 && isCIdent(dr.Args[0]):
			d.CName = dr.Args[0]
		case dr.Name == "macro" && len(dr.Args) >= 1 && len(dr.Args) <= 2 && isCIdent(dr.Args[0]):
			d.Macro = dr.Args[0]
			if len(dr.Args) == 2 {
				d.Constant = true
				if v, ok := l.keyValues(dr, dr.Args[1:], "value")["value"]; ok {
					n, err := strconv.ParseUint(v, 0, 64)
					if err != nil {
						l.Errorf(dr.Pos, "kernelgen:macro %s: value=%s is not an address (an unsigned integer)", d.Macro, v)
					}
					d.Address = n
				}
			}
		default:
			l.Errorf(dr.Pos, "unknown directive %q on data %s (known: kernelgen:c NAME, kernelgen:macro NAME [value=N])", dr, name)
		}
	}
	if !l.claimGoName(goNames, d.GoName, m.Pos()) {
		return
	}
	sig := l.Pkg.TypesInfo.TypeOf(m.Type).(*types.Signature)
	var result *specType
	if sig.Results().Len() == 1 {
		result = l.resolve(sig.Results().At(0).Type(), m.Pos(), "result")
	}
	if d.Constant {
		if sig.Params().Len() != 0 || result == nil || result.Kind != kindPtr || result.Const {
			l.Errorf(m.Pos(), "data %s is a constant address (kernelgen:macro %s value=%d): it must take nothing and return Ptr", name, d.Macro, d.Address)
		} else {
			l.m.Data = append(l.m.Data, d)
		}
		return
	}
	if sig.Params().Len() != 0 || result == nil || result.Kind != kindHandle || result.Const {
		l.Errorf(m.Pos(), "data %s must take nothing and return a handle (the object's address)", name)
		return
	}
	d.Handle = result.Handle
	l.m.Data = append(l.m.Data, d)
}

// resolve maps a Go type of the spec onto a specType; where is "param", "result" or "field".
// It never returns nil: on error it records the problem and returns a placeholder.
func (l *loader) resolve(t types.Type, pos token.Pos, where string) *specType {
	typ, msg := l.resolveType(t, where)
	if msg != "" {
		l.Errorf(pos, "%s type %s: %s", where, types.TypeString(t, l.qualifier), msg)
		return &specType{Kind: kindBool}
	}
	return typ
}

func (l *loader) qualifier(p *types.Package) string {
	if p == l.Pkg.Types || p.Path() == primitivesPkg {
		return ""
	}
	return p.Name()
}

func (l *loader) resolveType(t types.Type, where string) (*specType, string) {
	const outside = "is outside the mapping table (docs/SPECS.md)"
	switch t := t.(type) {
	case *types.Basic:
		switch t.Kind() {
		case types.Bool:
			return &specType{Kind: kindBool}, ""
		case types.String:
			return &specType{Kind: kindString}, ""
		}
		if _, ok := numberCTypes[t.Name()]; ok {
			return &specType{Kind: kindNumber, Num: t.Name()}, ""
		}
		return nil, outside
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && obj.Pkg().Path() == primitivesPkg {
			switch obj.Name() {
			case "Const":
				inner, msg := l.resolveType(t.TypeArgs().At(0), where)
				if msg != "" {
					return nil, msg
				}
				switch inner.Kind {
				case kindHandle, kindPtr, kindNumSlice:
					inner.Const = true
					return inner, ""
				case kindOut: // Const[*S]: C reads a struct it does not change
					if inner.Elem.Kind == kindStruct {
						inner.Const = true
						return inner, ""
					}
				}
				return nil, "Const takes a handle, Ptr, a number slice or a pointer to a struct"
			case "Ptr":
				return &specType{Kind: kindPtr}, ""
			case "Int":
				return &specType{Kind: kindInt}, ""
			case "Size":
				return &specType{Kind: kindSize}, ""
			case "ULLong":
				return &specType{Kind: kindULLong}, ""
			case "Char":
				if where != "element" {
					return nil, "Char is allowed only as the element of an array field or a slice parameter"
				}
				return &specType{Kind: kindChar}, ""
			}
			return nil, outside
		}
		if obj.Pkg() != l.Pkg.Types {
			return nil, outside
		}
		if h := l.handles[obj.Name()]; h != nil {
			return &specType{Kind: kindHandle, Handle: h}, ""
		}
		if e := l.enums[obj.Name()]; e != nil {
			return &specType{Kind: kindEnum, Enum: e}, ""
		}
		if s := l.structs[obj.Name()]; s != nil {
			if where != "param" && where != "result" && where != "out" {
				return nil, "structs are passed and returned by value only (no nesting)"
			}
			return &specType{Kind: kindStruct, Struct: s}, ""
		}
		return nil, "is not a declared handle, enum or struct"
	case *types.Pointer:
		if n, ok := t.Elem().(*types.Named); ok && where == "field" {
			if h := l.handles[n.Obj().Name()]; h != nil && n.Obj().Pkg() == l.Pkg.Types {
				return &specType{Kind: kindHandlePtr, Handle: h}, ""
			}
		}
		if where == "param" {
			elem, msg := l.resolveType(t.Elem(), "out")
			if msg != "" {
				return nil, msg
			}
			switch elem.Kind {
			case kindHandle, kindEnum, kindInt, kindSize, kindULLong, kindNumber:
				if elem.Const {
					return nil, "an out-parameter cannot point to a const handle"
				}
				return &specType{Kind: kindOut, Elem: elem}, ""
			case kindString, kindStruct:
				return &specType{Kind: kindOut, Elem: elem}, ""
			}
			return nil, "out-parameters (*T) point to a handle, an enum, Int, Size, ULLong, a number, string or a struct"
		}
		if where == "result" {
			elem, msg := l.resolveType(t.Elem(), "element")
			if msg != "" || elem.Kind != kindNumber {
				return nil, "a pointer result (*T) points to a number type (int8..uint64, float32, float64)"
			}
			return &specType{Kind: kindNumPtr, Elem: elem}, ""
		}
		return nil, "pointers are allowed only to handles in struct fields, and as out-parameters"
	case *types.Slice:
		if where == "field" || where == "result" {
			return nil, "slices are allowed only as parameters"
		}
		elem, msg := l.resolveType(t.Elem(), "element")
		if msg != "" {
			return nil, msg
		}
		switch elem.Kind {
		case kindString:
			return &specType{Kind: kindStringSlice}, ""
		case kindHandle:
			if elem.Const {
				return nil, "slices of const handles are not supported"
			}
			return &specType{Kind: kindHandleSlice, Handle: elem.Handle}, ""
		case kindNumber, kindChar:
			return &specType{Kind: kindNumSlice, Elem: elem}, ""
		case kindPtr:
			if elem.Const {
				return nil, "slices of Const[Ptr] are not supported"
			}
			return &specType{Kind: kindPtrSlice}, ""
		}
		return nil, "slices hold strings, handles, Ptr, Char or fixed-size numbers (int8..uint64, float32, float64)"
	case *types.Array:
		if where != "field" {
			return nil, "arrays are allowed only in struct fields"
		}
		elem, msg := l.resolveType(t.Elem(), "element")
		if msg != "" {
			return nil, msg
		}
		switch elem.Kind {
		case kindHandle, kindNumber, kindInt, kindSize, kindChar, kindEnum, kindBool:
		default:
			return nil, "array elements must be handles, numbers, bools or Char"
		}
		return &specType{Kind: kindArray, Elem: elem, Len: int(t.Len())}, ""
	}
	return nil, outside
}

var cKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`auto bool break case char const continue default do double else enum extern float
		for goto if inline int long register restrict return short signed sizeof static struct switch typedef union
		unsigned void volatile while _Bool _Complex _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local`) {
		cKeywords[k] = true
	}
}

// checkStructResults rejects a returned struct with a field that has no scalar C→Go
// conversion (pointers to handles, arrays of Char).
func (l *loader) checkStructResults() {
	for _, s := range l.m.Structs {
		if !returned(l.m, s) {
			continue
		}
		for _, f := range s.Fields {
			t := f.Type
			if t.Kind == kindArray {
				t = t.Elem
			}
			switch t.Kind {
			case kindHandle, kindEnum, kindBool, kindInt, kindSize, kindNumber, kindULLong, kindPtr:
			default:
				l.ErrorAt(f.Pos, "struct %s is returned by value, so field %s must be a handle, enum, bool, number or Ptr, or an array of them", s.GoName, f.GoName)
			}
		}
	}
}
