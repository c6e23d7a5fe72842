package bindings

import (
	"fmt"
	"go/token"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"
	"github.com/toyml/toy/gen/genutil"
)

// target says where a model's bindings go.
type target struct {
	// ImportPath and PkgName name the generated package.
	ImportPath, PkgName string
	// Source names the spec for the header line, e.g. "specs/ggml".
	Source string
	// Link is the import path of the cgo package that compiles the C library; the bindings
	// import it for its side effect of linking. Empty for a dynamic library, and for C sources
	// the bindings' package compiles itself (binding.Sources).
	Link string
	// Dynamic, when set, makes the bindings load the library with dlopen at run time (Load)
	// instead of linking it, so a binary builds without the library or its headers.
	Dynamic *dynamic
	// IncludesOwnDir puts the package's directory on its C include path (#cgo CFLAGS:
	// -I${SRCDIR}), for C sources compiled from elsewhere that include headers generated here.
	IncludesOwnDir bool
}

// dynamic describes a C library the bindings dlopen.
type dynamic struct {
	// Sonames are tried in order by the generated Load.
	Sonames []string
	// What names the library in errors, e.g. "the CUDA driver".
	What string
	// Global loads the library with RTLD_GLOBAL, for a library whose own plugins resolve its
	// symbols (Open MPI's components).
	Global bool
}

// emit renders the bindings of m as Go files, by file name.
func emit(m *model, t target) (map[string][]byte, error) {
	for _, fn := range m.Funcs {
		if fn.Address && t.Dynamic != nil {
			return nil, fmt.Errorf("kernelgen: %s:%d: kernelgen:address needs a linked library (%s is loaded with dlopen)", fn.Pos.Filename, fn.Pos.Line, t.Source)
		}
	}
	if t.Dynamic != nil {
		for _, fn := range m.Funcs {
			if reservedInDynamic(fn.GoName) {
				return nil, fmt.Errorf("kernelgen: %s:%d: %s is reserved in bindings of a dlopened library (rename the method)", fn.Pos.Filename, fn.Pos.Line, fn.GoName)
			}
		}
		for _, d := range m.Data {
			if reservedInDynamic(d.GoName) {
				return nil, fmt.Errorf("kernelgen: %s:%d: %s is reserved in bindings of a dlopened library (rename the method)", d.Pos.Filename, d.Pos.Line, d.GoName)
			}
		}
	}
	files := map[string][]byte{}
	b, err := genutil.Render(emitCgo(m, t))
	if err != nil {
		return nil, fmt.Errorf("kernelgen: bindings.go: %w", err)
	}
	files["bindings.go"] = b
	if len(m.Enums) > 0 { // a spec without enums has nothing to guard or check
		if b, err = genutil.Render(emitEnums(m, t)); err != nil {
			return nil, fmt.Errorf("kernelgen: enums.go: %w", err)
		}
		files["enums.go"] = b
	}
	files["UNBOUND.md"] = unboundReport(m, t)
	if err := genutil.CheckFileDocs(files, specPositions(m)); err != nil {
		return nil, err
	}
	return files, nil
}

// reservedInDynamic reports whether name is one of the declarations the bindings of a dlopened
// library emit themselves.
func reservedInDynamic(name string) bool {
	return name == "Load" || name == "Loaded" || name == "Sonames"
}

func newFile(t target) *jen.File {
	f := jen.NewFilePathName(t.ImportPath, t.PkgName)
	f.HeaderComment(genutil.Header(t.Source))
	return f
}

func unboundReport(m *model, t target) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- %s -->\n\n# What kernelgen did not bind from %s\n\n", genutil.Header(t.Source), t.Source)
	if len(m.Unbound) == 0 {
		b.WriteString("Nothing: every declaration in the spec is bound.\n")
		return []byte(b.String())
	}
	b.WriteString("| C name | spec | reason |\n| --- | --- | --- |\n")
	for _, u := range m.Unbound {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", u.Name, u.Pos, u.Reason)
	}
	return []byte(b.String())
}

// preamble is the C text the bindings declare before `import "C"`: their own prototypes, enum
// and struct definitions, so that building them needs no header path.
func preamble(m *model) string {
	var b strings.Builder
	b.WriteString("#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n")
	for _, h := range m.Handles {
		fmt.Fprintf(&b, "%s;\n", h.Struct)
		if h.Typedef != "" {
			fmt.Fprintf(&b, "typedef %s * %s;\n", h.Struct, h.Typedef)
		}
	}
	for _, e := range m.Enums {
		if e.CType == "int" {
			continue
		}
		open, end := definition("enum", e.CType)
		fmt.Fprintf(&b, "\n%s\n", open)
		for _, v := range e.Values {
			fmt.Fprintf(&b, "\t%s = %d,\n", v.CName, v.Value)
		}
		b.WriteString(end + "\n")
	}
	for _, s := range structDefs(m) {
		open, end := definition("struct", s.tag)
		fmt.Fprintf(&b, "\n%s\n", open)
		for _, f := range s.fields {
			fmt.Fprintf(&b, "\t%s;\n", f.Type.CType(f.CName))
		}
		b.WriteString(end + "\n")
	}
	b.WriteString("\n")
	for _, f := range m.Funcs {
		fmt.Fprintf(&b, "%s;\n", layoutProto(f, f.Wide()))
	}
	for _, f := range m.Funcs {
		if f.Address {
			fmt.Fprintf(&b, "static void *%s(void) { return (void *)&%s; }\n", addressCall(f), f.CName)
		}
	}
	if len(m.Data) > 0 {
		// The objects' types stay opaque: only their addresses are used.
		b.WriteString("\n")
	}
	for _, d := range m.Data {
		if d.Constant {
			b.WriteString(constantAccessor(d))
			continue
		}
		fmt.Fprintf(&b, "extern char %s;\n", d.CName)
		fmt.Fprintf(&b, "static %s %s(void) { return (%s)(void *)&%s; }\n", d.Handle.CPtr(), dataCall(d), d.Handle.CPtr(), d.CName)
	}
	return b.String()
}

// constantAccessor is the C function that returns a constant address (kernelgen:macro NAME
// value=N): Go may not make a pointer of an integer, C may.
func constantAccessor(d *data) string {
	return fmt.Sprintf("static void *%s(void) { return (void *)%#x; }\n", dataCall(d), d.Address)
}

// definition opens and closes the C definition of an enum or struct named ctype: a tagged one
// ("enum ggml_type {" … "};"), or, for a bare name, the typedef of an anonymous one
// ("typedef enum {" … "} ncclResult_t;").
func definition(kind, ctype string) (open, end string) {
	if strings.Contains(ctype, " ") {
		return ctype + " {", "};"
	}
	return "typedef " + kind + " {", "} " + ctype + ";"
}

func dataPointer(d *data) string { return "kg_d_" + d.CName }

func dataCall(d *data) string {
	if d.Constant {
		return "kg_const_" + d.Macro
	}
	return "kg_data_" + d.CName
}

// objects are the data symbols that are exported objects (not constant addresses).
func objects(m *model) []*data {
	var ds []*data
	for _, d := range m.Data {
		if !d.Constant {
			ds = append(ds, d)
		}
	}
	return ds
}

// dynamicPreamble is the C text of bindings that dlopen their library: the same types as
// preamble, then per function a pointer (kg_p_NAME) that kg_resolve fills with dlsym and a
// static trampoline (kg_NAME) the Go side calls, and per exported object its address (kg_d_NAME)
// and an accessor (kg_data_NAME) that returns it as the handle. global loads the library
// with RTLD_GLOBAL instead of RTLD_LOCAL.
func dynamicPreamble(m *model, global bool) string {
	full := preamble(&model{Handles: m.Handles, Structs: m.Structs, Enums: m.Enums})
	var b strings.Builder
	b.WriteString("#cgo LDFLAGS: -ldl\n#include <dlfcn.h>\n#include <stdio.h>\n")
	b.WriteString(full)
	for _, f := range m.Funcs {
		ptr := *f
		ptr.CName = "(*" + dynPointer(f) + ")"
		tramp := *f
		tramp.CName = dynCall(f)
		var args []string
		for _, p := range f.Params {
			args = append(args, p.Name)
		}
		ret := "return "
		if f.Result == nil {
			ret = ""
		}
		oneLine := fmt.Sprintf("static %s { %s%s(%s); }", cPrototype(&tramp), ret, dynPointer(f), strings.Join(args, ", "))
		if f.Wide() || len(oneLine) > maxPreambleLine {
			fmt.Fprintf(&b, "static %s;\nstatic %s\n{\n\t%s%s(%s);\n}\n", layoutProto(&ptr, true), layoutProto(&tramp, true), ret, dynPointer(f), strings.Join(args, ", "))
		} else {
			fmt.Fprintf(&b, "static %s;\n%s\n", cPrototype(&ptr), oneLine)
		}
	}
	for _, d := range m.Data {
		if d.Constant {
			b.WriteString(constantAccessor(d))
			continue
		}
		fmt.Fprintf(&b, "static void *%s;\n", dataPointer(d))
		fmt.Fprintf(&b, "static %s %s(void) { return (%s)%s; }\n", d.Handle.CPtr(), dataCall(d), d.Handle.CPtr(), dataPointer(d))
	}
	what := "function pointer"
	if len(objects(m)) > 0 {
		what = "function pointer and object address"
	}
	fmt.Fprintf(&b, "\n// kg_resolve fills every %s from the library handle h; it returns NULL, or the\n// name of the first symbol the library lacks.\nstatic const char *kg_resolve(void *h) {\n", what)
	for _, f := range m.Funcs {
		fmt.Fprintf(&b, "\tif (!(*(void **)(&%s) = dlsym(h, \"%s\"))) return \"%s\";\n", dynPointer(f), f.CName, f.CName)
	}
	for _, d := range objects(m) {
		fmt.Fprintf(&b, "\tif (!(%s = dlsym(h, \"%s\"))) return \"%s\";\n", dataPointer(d), d.CName, d.CName)
	}
	b.WriteString("\treturn NULL;\n}\n")
	scope := "RTLD_LOCAL"
	if global {
		scope = "RTLD_GLOBAL"
	}
	// dlerror's text is per thread, and Go may run the next cgo call on another: kg_dlopen keeps
	// it (Load runs once, so one buffer serves).
	b.WriteString("static char kg_dlopen_error[512];\n")
	fmt.Fprintf(&b, "static void *kg_dlopen(const char *name) {\n\tvoid *h = dlopen(name, RTLD_NOW | %s);\n", scope)
	b.WriteString("\tif (!h) {\n\t\tconst char *e = dlerror();\n\t\tsnprintf(kg_dlopen_error, sizeof kg_dlopen_error, \"%s\", e ? e : \"unknown dlopen error\");\n\t}\n\treturn h;\n}\n")
	b.WriteString("static const char *kg_dlerror(void) { return kg_dlopen_error; }\n")
	return b.String()
}

// maxPreambleLine is the longest one-line trampoline (the generated files' line limit, see
// TestNoLongLines); a longer one is laid out one parameter a line, as a Wide function's is.
const maxPreambleLine = 200

func dynPointer(f *function) string { return "kg_p_" + f.CName }
func dynCall(f *function) string    { return "kg_" + f.CName }

// emitLoad writes Load, Loaded and the guard every bound function calls first.
func emitLoad(f *jen.File, t target) {
	d := t.Dynamic
	var names []jen.Code
	for _, n := range d.Sonames {
		names = append(names, jen.Lit(n))
	}
	f.Comment("Sonames are the library names Load passes to dlopen, in order.")
	f.Var().Id("Sonames").Op("=").Index().String().Values(names...)
	f.Line()
	f.Var().Defs(
		jen.Id("loadOnce").Qual("sync", "Once"),
		jen.Id("loadErr").Error(),
		jen.Id("loaded").Qual("sync/atomic", "Bool"),
	)
	f.Line()
	genutil.DocLines(f, fmt.Sprintf("Load opens %s (the first of Sonames that dlopen finds) and resolves every\n"+
		"bound function. It runs once; later calls return the first call's result.", d.What))
	f.Func().Id("Load").Params().Error().Block(
		jen.Id("loadOnce").Dot("Do").Call(jen.Func().Params().Block(
			jen.Var().Id("tried").Index().String(),
			jen.For(jen.List(jen.Id("_"), jen.Id("name")).Op(":=").Range().Id("Sonames")).Block(
				jen.Id("c").Op(":=").Add(cQual("CString")).Call(jen.Id("name")),
				jen.Id("h").Op(":=").Add(cQual("kg_dlopen")).Call(jen.Id("c")),
				cQual("free").Call(jen.Qual("unsafe", "Pointer").Call(jen.Id("c"))),
				jen.If(jen.Id("h").Op("==").Nil()).Block(
					jen.Id("tried").Op("=").Append(jen.Id("tried"), cQual("GoString").Call(cQual("kg_dlerror").Call())),
					jen.Continue(),
				),
				jen.If(jen.Id("missing").Op(":=").Add(cQual("kg_resolve")).Call(jen.Id("h")), jen.Id("missing").Op("!=").Nil()).Block(
					jen.Id("loadErr").Op("=").Qual("fmt", "Errorf").Call(jen.Lit(t.PkgName+": %s lacks %s: "+d.What+" is too old for toy"),
						jen.Id("name"), cQual("GoString").Call(jen.Id("missing"))),
					jen.Return(),
				),
				jen.Id("loaded").Dot("Store").Call(jen.True()),
				jen.Return(),
			),
			jen.Id("loadErr").Op("=").Qual("fmt", "Errorf").Call(jen.Lit(t.PkgName+": cannot load "+d.What+": %s"),
				jen.Qual("strings", "Join").Call(jen.Id("tried"), jen.Lit("; "))),
		)),
		jen.Return(jen.Id("loadErr")),
	)
	f.Line()
	f.Comment("Loaded reports whether Load has succeeded.")
	f.Func().Id("Loaded").Params().Bool().Block(jen.Return(jen.Id("loaded").Dot("Load").Call()))
	f.Line()
	f.Func().Id("mustBeLoaded").Params().Block(
		jen.If(jen.Op("!").Id("loaded").Dot("Load").Call()).Block(
			jen.Panic(jen.Lit(t.PkgName + ": a function was called before Load succeeded"))))
	f.Line()
}

type structDef struct {
	tag    string
	fields []*field
	pos    token.Position
}

// structDefs lists the C structs whose layout the spec declares: by-value structs and handles
// with fields.
func structDefs(m *model) []structDef {
	var defs []structDef
	for _, h := range m.Handles {
		if len(h.Fields) > 0 {
			defs = append(defs, structDef{h.Struct, h.Fields, h.Pos})
		}
	}
	for _, s := range m.Structs {
		defs = append(defs, structDef{s.CName, s.Fields, s.Pos})
	}
	return defs
}

// cPrototype is the C declaration of f: "struct ggml_tensor * ggml_add(struct ggml_context * ctx, ...)".
func cPrototype(f *function) string { return prototype(f, "", false) }

// wideProto is the length of a C prototype beyond which a function is Wide.
const wideProto = 160

// Wide reports whether f's parameters are laid out one per line wherever the generated code
// lists them (its C prototype, its doc, its Go signature and its call), so no line runs long.
func (f *function) Wide() bool { return len(cPrototype(f)) > wideProto }

// proofPrototype is cPrototype with each parameter's real C type where the spec gives one
// (kernelgen:ctype): the declaration the proof compares with the header's.
func proofPrototype(f *function) string { return prototype(f, "", true) }

// prototype is cPrototype with the parameters one per line after indent when indent is not
// empty (the layout of a Wide function), and with their kernelgen:ctype types when proof is set.
func prototype(f *function, indent string, proof bool) string {
	ret := "void"
	if f.Result != nil {
		ret = f.Result.CType("")
	}
	var ps []string
	for _, p := range f.Params {
		if proof && p.ProofCType != "" {
			ps = append(ps, join(p.ProofCType, p.Name))
			continue
		}
		ps = append(ps, p.Type.CType(p.Name))
	}
	if len(ps) == 0 {
		ps = []string{"void"}
	}
	if indent == "" {
		return join(ret, f.CName) + "(" + strings.Join(ps, ", ") + ")"
	}
	return join(ret, f.CName) + "(\n" + indent + strings.Join(ps, ",\n"+indent) + ")"
}

// layoutProto is f's prototype in the layout f.Wide() asks for; wide is passed separately for
// the renamed copies of dynamicPreamble, which keep their original's layout.
func layoutProto(f *function, wide bool) string {
	if wide {
		return prototype(f, "\t", false)
	}
	return cPrototype(f)
}

// cgo renames C fields that are Go keywords with a leading underscore.
func cgoField(name string) string {
	if token.IsKeyword(name) {
		return "_" + name
	}
	return name
}

func cQual(name string) *jen.Statement { return jen.Qual("C", name) }

// cgoType renders a cgo type name such as "*C.struct_ggml_tensor" or "C.size_t".
func cgoType(name string) *jen.Statement {
	if rest, ok := strings.CutPrefix(name, "*C."); ok {
		return jen.Op("*").Qual("C", rest)
	}
	return jen.Qual("C", strings.TrimPrefix(name, "C."))
}

func goType(t *specType) *jen.Statement {
	switch t.Kind {
	case kindPtr:
		return jen.Qual("unsafe", "Pointer")
	case kindHandlePtr:
		return jen.Op("*").Id(t.Handle.GoName)
	case kindHandleSlice:
		return jen.Index().Id(t.Handle.GoName)
	case kindNumSlice:
		return jen.Index().Add(goType(t.Elem))
	case kindArray:
		if t.Elem.Kind == kindChar {
			return jen.String()
		}
		return jen.Index(jen.Lit(t.Len)).Add(goType(t.Elem))
	case kindStringSlice:
		return jen.Index().String()
	}
	return jen.Id(t.GoString())
}

func emitCgo(m *model, t target) *jen.File {
	f := newFile(t)
	if t.Dynamic != nil {
		f.PackageComment(fmt.Sprintf("Package %s is the cgo binding of %s, generated by cmd/kernelgen from %s.\n"+
			"The library is not linked: Load opens it with dlopen (%s) and resolves every\n"+
			"function, so a binary builds without it and its headers, and a machine without it gets an\n"+
			"error from Load rather than a failure to start. Every other function requires a successful\n"+
			"Load. The prototypes are proven against the real headers wherever they are installed (see\n"+
			"abiproof/). Use the idiomatic layer over it rather than this package.",
			t.PkgName, t.Dynamic.What, t.Source, strings.Join(t.Dynamic.Sonames, ", ")))
		f.CgoPreamble(dynamicPreamble(m, t.Dynamic.Global))
		emitLoad(f, t)
	} else {
		f.PackageComment(fmt.Sprintf("Package %s is the cgo binding of the C library, generated by cmd/kernelgen from %s.\n"+
			"Every prototype, enum value and struct layout below was proven against the real headers\n"+
			"when it was generated. Use the idiomatic layer over it rather than this package.", t.PkgName, t.Source))
		cgo := preamble(m)
		if t.IncludesOwnDir {
			cgo = "#cgo CFLAGS: -I${SRCDIR}\n" + cgo
		}
		f.CgoPreamble(cgo)
		if t.Link != "" {
			f.Anon(t.Link)
		}
	}
	for _, h := range m.Handles {
		emitHandle(f, h)
	}
	for _, s := range m.Structs {
		emitStruct(f, s)
		if returned(m, s) {
			emitStructFromC(f, s)
		}
	}
	for _, fn := range m.Funcs {
		emitFunc(f, fn, t.Dynamic)
		if fn.Address {
			emitAddress(f, fn)
		}
	}
	for _, d := range m.Data {
		emitData(f, d, t.Dynamic)
	}
	return f
}

// addressCall is the C function that returns a kernelgen:address function's address.
func addressCall(f *function) string { return "kg_addr_" + f.CName }

// emitAddress writes the function that returns a C function's address, for a C API that takes
// it as a callback.
func emitAddress(f *jen.File, fn *function) {
	f.Commentf("%sAddress is the address of the C function %s (see %s), for a C API that takes", fn.GoName, fn.CName, fn.GoName)
	f.Comment("it as a callback.")
	f.Func().Id(fn.GoName+"Address").Params().Qual("unsafe", "Pointer").Block(
		jen.Return(cQual(addressCall(fn)).Call()))
	f.Line()
}

// emitData writes the function that returns an exported object's address as its handle.
func emitData(f *jen.File, d *data, dyn *dynamic) {
	genutil.DocLines(f, d.Doc)
	f.Comment("")
	if d.Constant {
		f.Commentf("C: %s, the constant address %#x.", d.Macro, d.Address)
		f.Func().Id(d.GoName).Params().Qual("unsafe", "Pointer").Block(
			jen.Return(cQual(dataCall(d)).Call()))
		f.Line()
		return
	}
	if d.Macro != "" {
		f.Commentf("C: %s, the address of %s.", d.Macro, d.CName)
	} else {
		f.Commentf("C: the address of %s.", d.CName)
	}
	var body []jen.Code
	if dyn != nil {
		body = append(body, jen.Id("mustBeLoaded").Call())
	}
	body = append(body, jen.Return(jen.Id(d.Handle.GoName).Values(cQual(dataCall(d)).Call())))
	f.Func().Id(d.GoName).Params().Id(d.Handle.GoName).Block(body...)
	f.Line()
}

func emitHandle(f *jen.File, h *handle) {
	genutil.DocLines(f, h.Doc)
	f.Type().Id(h.GoName).Struct(jen.Id("p").Add(cgoType(h.cgoPtr())))
	f.Line()
	f.Comment("IsNil reports whether the handle is C's NULL.")
	f.Func().Params(jen.Id("h").Id(h.GoName)).Id("IsNil").Params().Bool().Block(
		jen.Return(jen.Id("h").Dot("p").Op("==").Nil()))
	f.Line()
	f.Comment("Pointer is the handle's C address, for identity and diagnostics.")
	f.Func().Params(jen.Id("h").Id(h.GoName)).Id("Pointer").Params().Qual("unsafe", "Pointer").Block(
		jen.Return(jen.Qual("unsafe", "Pointer").Call(jen.Id("h").Dot("p"))))
	f.Line()
	for _, fl := range h.Fields {
		if fl.GoName == "_" {
			continue
		}
		if fl.Doc != "" {
			genutil.DocLines(f, fl.Doc)
		} else {
			f.Commentf("%s reads the C field %s.", fl.GoName, fl.CName)
		}
		f.Func().Params(jen.Id("h").Id(h.GoName)).Id(fl.GoName).Params().Add(goType(fl.Type)).
			Block(fieldRead(jen.Id("h").Dot("p").Dot(cgoField(fl.CName)), fl.Type)...)
		f.Line()
	}
}

// fieldRead returns statements that convert the C field x to its Go type and return it.
func fieldRead(x *jen.Statement, t *specType) []jen.Code {
	if t.Kind != kindArray {
		return []jen.Code{jen.Return(fromC(x, t))}
	}
	if t.Elem.Kind == kindChar {
		return []jen.Code{
			jen.Id("b").Op(":=").Params(jen.Op("*").Index(jen.Lit(t.Len)).Byte()).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Add(x))),
			jen.Id("n").Op(":=").Lit(0),
			jen.For(jen.Id("n").Op("<").Len(jen.Id("b")).Op("&&").Id("b").Index(jen.Id("n")).Op("!=").Lit(0)).Block(jen.Id("n").Op("++")),
			jen.Return(jen.String().Call(jen.Id("b").Index(jen.Empty(), jen.Id("n")))),
		}
	}
	return []jen.Code{
		jen.Var().Id("out").Add(goType(t)),
		jen.For(jen.List(jen.Id("i"), jen.Id("v")).Op(":=").Range().Add(x)).Block(
			jen.Id("out").Index(jen.Id("i")).Op("=").Add(fromC(jen.Id("v"), t.Elem))),
		jen.Return(jen.Id("out")),
	}
}

// fromC converts a C value x of type t to Go.
func fromC(x *jen.Statement, t *specType) *jen.Statement {
	switch t.Kind {
	case kindHandle:
		return jen.Id(t.Handle.GoName).Values(x)
	case kindHandlePtr:
		return jen.Parens(jen.Op("*").Id(t.Handle.GoName)).Call(jen.Qual("unsafe", "Pointer").Call(x))
	case kindEnum:
		return jen.Id(t.Enum.GoName).Call(x)
	case kindBool:
		return jen.Bool().Call(x)
	case kindInt, kindSize:
		return jen.Int().Call(x)
	case kindNumber:
		return jen.Id(t.Num).Call(x)
	case kindULLong:
		return jen.Uint64().Call(x)
	case kindString:
		return cQual("GoString").Call(x)
	case kindPtr:
		return jen.Qual("unsafe", "Pointer").Call(x)
	case kindChar:
		return jen.Byte().Call(x)
	case kindStruct:
		return jen.Id(structFromCName(t.Struct)).Call(x)
	case kindNumPtr:
		return jen.Parens(jen.Op("*").Id(t.Elem.Num)).Call(jen.Qual("unsafe", "Pointer").Call(x))
	}
	panic(fmt.Sprintf("gen: cannot convert kind %d from C", t.Kind))
}

// toC converts a Go value x of type t to C for a struct field or argument that needs no
// temporaries.
func toC(x *jen.Statement, t *specType) *jen.Statement {
	switch t.Kind {
	case kindHandle:
		return x.Dot("p")
	case kindHandlePtr:
		return jen.Parens(jen.Op("*").Add(cgoType(t.Handle.cgoPtr()))).Call(jen.Qual("unsafe", "Pointer").Call(x))
	case kindStruct:
		return x.Dot("c").Call()
	case kindPtr:
		return x
	case kindEnum, kindBool, kindInt, kindNumber, kindSize, kindULLong:
		return cgoType(t.cgoName()).Call(x)
	case kindChar:
		return cgoType("C.char").Call(x)
	}
	panic(fmt.Sprintf("gen: cannot convert kind %d to C without temporaries", t.Kind))
}

func emitStruct(f *jen.File, s *cStruct) {
	genutil.DocLines(f, s.Doc)
	var fields, values, arrays []jen.Code
	for _, fl := range s.Fields {
		decl := jen.Null()
		if fl.Doc != "" {
			for _, line := range strings.Split(fl.Doc, "\n") {
				decl.Comment(line).Line()
			}
		}
		decl.Id(fl.GoName).Add(goType(fl.Type))
		fields = append(fields, decl)
		switch {
		case fl.GoName == "_":
		case fl.Type.Kind == kindArray:
			// Element by element; a [N]Char field's Go string fills the array from its start
			// (all its bytes, NULs included), and the rest stays zero.
			x := jen.Id("s").Dot(fl.GoName)
			bound := jen.Len(x.Clone())
			if fl.Type.Elem.Kind == kindChar {
				bound = jen.Min(jen.Len(x.Clone()), jen.Lit(fl.Type.Len))
			}
			arrays = append(arrays, jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Add(bound), jen.Id("i").Op("++")).Block(
				jen.Id("c").Dot(cgoField(fl.CName)).Index(jen.Id("i")).Op("=").Add(cgoType(fl.Type.Elem.cgoName())).Call(x.Clone().Index(jen.Id("i")))))
		default:
			values = append(values, jen.Id(cgoField(fl.CName)).Op(":").Add(toC(jen.Id("s").Dot(fl.GoName), fl.Type)))
		}
	}
	f.Type().Id(s.GoName).Struct(fields...)
	f.Line()
	ctype := cgoType("C." + cgoTag(s.CName))
	if len(arrays) == 0 {
		f.Func().Params(jen.Id("s").Id(s.GoName)).Id("c").Params().Add(ctype).Block(
			jen.Return(ctype.Clone().Values(genutil.OneEach(values)...)))
	} else {
		body := append([]jen.Code{jen.Id("c").Op(":=").Add(ctype.Clone()).Values(genutil.OneEach(values)...)}, arrays...)
		f.Func().Params(jen.Id("s").Id(s.GoName)).Id("c").Params().Add(ctype).Block(append(body, jen.Return(jen.Id("c")))...)
	}
	f.Line()
}

func emitFunc(f *jen.File, fn *function, dyn *dynamic) {
	genutil.DocLines(f, fn.Doc)
	f.Comment("")
	if fn.Wide() {
		f.Comment("C:")
		f.Comment("")
		for _, line := range strings.Split(prototype(fn, "\t", false), "\n") {
			f.Comment("\t" + line)
		}
	} else {
		f.Commentf("C: %s.", cPrototype(fn))
	}
	var params, args, prelude, post []jen.Code
	for _, p := range fn.Params {
		params = append(params, jen.Id(p.Name).Add(goType(p.Type)))
		arg, pre := argument(p)
		args = append(args, arg)
		prelude = append(prelude, pre...)
		post = append(post, outCopy(p)...)
	}
	var body []jen.Code
	callee := fn.CName
	if dyn != nil {
		callee = dynCall(fn)
		body = append(body, jen.Id("mustBeLoaded").Call())
	}
	if fn.Wide() {
		params, args = genutil.PerLine(params), genutil.PerLine(args)
	}
	call := cQual(callee).Call(args...)
	body = append(body, prelude...)
	var result jen.Code = jen.Null()
	switch {
	case fn.Result == nil:
		body = append(body, call)
		body = append(body, post...)
	case len(post) == 0:
		result = goType(fn.Result)
		body = append(body, jen.Return(fromC(call, fn.Result)))
	default:
		result = goType(fn.Result)
		body = append(body, jen.Id("kgResult").Op(":=").Add(call))
		body = append(body, post...)
		body = append(body, jen.Return(fromC(jen.Id("kgResult"), fn.Result)))
	}
	f.Func().Id(fn.GoName).Params(params...).Add(result).Block(body...)
	f.Line()
}

// outCopy copies an out-parameter's C temporary back into the Go variable after the call.
func outCopy(p *param) []jen.Code {
	if p.Type.Kind != kindOut || p.Type.Const { // Const[*S]: C does not write it
		return nil
	}
	return []jen.Code{jen.If(jen.Id(p.Name).Op("!=").Nil()).Block(
		jen.Op("*").Id(p.Name).Op("=").Add(fromC(jen.Id("c_"+p.Name), p.Type.Elem)))}
}

// argument converts parameter p for the C call, with any temporaries it needs.
func argument(p *param) (jen.Code, []jen.Code) {
	x := jen.Id(p.Name)
	c := "c_" + p.Name
	t := p.Type
	switch t.Kind {
	case kindString:
		return jen.Id(c), []jen.Code{
			jen.Id(c).Op(":=").Add(cQual("CString").Call(x)),
			jen.Defer().Add(cQual("free")).Call(jen.Qual("unsafe", "Pointer").Call(jen.Id(c))),
		}
	case kindStringSlice:
		return jen.Id(c), []jen.Code{
			jen.Id(c+"s").Op(":=").Make(jen.Index().Op("*").Add(cQual("char")), jen.Len(x)),
			jen.For(jen.List(jen.Id("i"), jen.Id("s")).Op(":=").Range().Add(x)).Block(
				jen.Id(c+"s").Index(jen.Id("i")).Op("=").Add(cQual("CString")).Call(jen.Id("s")),
				jen.Defer().Add(cQual("free")).Call(jen.Qual("unsafe", "Pointer").Call(jen.Id(c+"s").Index(jen.Id("i"))))),
			jen.Var().Id(c).Op("**").Add(cQual("char")),
			jen.If(jen.Len(jen.Id(c + "s")).Op(">").Lit(0)).Block(jen.Id(c).Op("=").Op("&").Id(c + "s").Index(jen.Lit(0))),
		}
	case kindOut:
		decl := []jen.Code{jen.Var().Id(c).Add(cgoType(t.Elem.cgoName()))}
		if t.Elem.Kind == kindStruct { // in and out: C reads the struct and may change it
			decl = append(decl, jen.If(x.Clone().Op("!=").Nil()).Block(jen.Id(c).Op("=").Add(x.Clone()).Dot("c").Call()))
		}
		return jen.Op("&").Id(c), decl
	case kindPtrSlice:
		return jen.Id(c), []jen.Code{
			jen.Var().Id(c).Op("*").Qual("unsafe", "Pointer"),
			jen.If(jen.Len(x).Op(">").Lit(0)).Block(jen.Id(c).Op("=").Op("&").Add(x.Clone()).Index(jen.Lit(0))),
		}
	case kindHandleSlice, kindNumSlice:
		var elem *jen.Statement
		if t.Kind == kindHandleSlice {
			elem = cgoType(t.Handle.cgoPtr())
		} else {
			elem = cgoType(t.Elem.cgoName())
		}
		return jen.Id(c), []jen.Code{
			jen.Var().Id(c).Op("*").Add(elem),
			jen.If(jen.Len(x).Op(">").Lit(0)).Block(
				jen.Id(c).Op("=").Parens(jen.Op("*").Add(elem.Clone())).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Add(x.Clone()).Index(jen.Lit(0))))),
		}
	}
	return toC(x, t), nil
}

func emitEnums(m *model, t target) *jen.File {
	f := newFile(t)
	for _, e := range m.Enums {
		genutil.DocLines(f, e.Doc)
		f.Type().Id(e.GoName).Id(e.GoBase)
		f.Line()
		f.Const().DefsFunc(func(g *jen.Group) {
			for _, v := range e.Values {
				for _, line := range strings.Split(v.Doc, "\n") {
					if line != "" {
						g.Comment(line)
					}
				}
				g.Id(v.GoName).Id(e.GoName).Op("=").Lit(int(v.Value)).Comment(v.CName)
			}
		})
		f.Line()
		f.Commentf("String returns the name of the constant, or %s(N) for an undeclared value.", e.GoName)
		seen := map[int64]bool{}
		f.Func().Params(jen.Id("v").Id(e.GoName)).Id("String").Params().String().Block(
			jen.Switch(jen.Id("v")).BlockFunc(func(g *jen.Group) {
				for _, v := range e.Values {
					if seen[v.Value] {
						continue
					}
					seen[v.Value] = true
					g.Case(jen.Id(v.GoName)).Return(jen.Lit(v.GoName))
				}
			}),
			jen.Return(jen.Lit(e.GoName+"(").Op("+").Qual("strconv", "FormatInt").Call(jen.Int64().Call(jen.Id("v")), jen.Lit(10)).Op("+").Lit(")")),
		)
		f.Line()
	}
	// A compile-time guard in the manner of stringer: editing a constant's value here without
	// regenerating breaks the build.
	f.Comment("An \"invalid array index\" compiler error means a constant's value changed: run go generate.")
	f.Func().Id("_").Params().BlockFunc(func(g *jen.Group) {
		g.Var().Id("x").Index(jen.Lit(1)).Struct()
		for _, e := range m.Enums {
			for _, v := range e.Values {
				g.Id("_").Op("=").Id("x").Index(jen.Id(v.GoName).Op("-").Parens(jen.Lit(int(v.Value))))
			}
		}
	})
	f.Line()
	emitCheckLinked(f, m)
	return f
}

// emitCheckLinked writes CheckLinked, which asks the linked C library for the name of every
// enum constant that has a name function and compares it with the spec.
func emitCheckLinked(f *jen.File, m *model) {
	genutil.DocLines(f, "CheckLinked asks the linked library for the name of every enum constant that has a name\n"+
		"function and compares it with the name the spec gives, so a library whose enums were\n"+
		"renumbered is refused at start-up rather than computing with the wrong types. COUNT\n"+
		"sentinels have no name and are skipped.")
	f.Func().Id("CheckLinked").Params().Error().BlockFunc(func(g *jen.Group) {
		g.Var().Id("errs").Index().Error()
		enums := append([]*enum(nil), m.Enums...)
		sort.SliceStable(enums, func(i, j int) bool { return enums[i].GoName < enums[j].GoName })
		for _, e := range enums {
			if e.NameFunc == "" {
				continue
			}
			var rows []jen.Code
			for _, v := range e.Values {
				suffix := strings.TrimPrefix(v.CName, e.Prefix)
				if suffix == "COUNT" {
					continue
				}
				rows = append(rows, jen.Values(jen.Id(v.GoName), jen.Lit(suffix)))
			}
			g.For(jen.List(jen.Id("_"), jen.Id("c")).Op(":=").Range().Index().Struct(
				jen.Id("v").Id(e.GoName), jen.Id("want").String()).Values(genutil.OneEach(rows)...)).Block(
				jen.If(jen.Id("got").Op(":=").Id(e.NameFunc).Call(jen.Id("c").Dot("v")),
					jen.Op("!").Qual("strings", "EqualFold").Call(jen.Id("got"), jen.Id("c").Dot("want"))).Block(
					jen.Id("errs").Op("=").Append(jen.Id("errs"), jen.Qual("fmt", "Errorf").Call(
						jen.Lit(e.NameFunc+"(%d) is %q in the linked library, but the spec calls %s %q"),
						jen.Id("c").Dot("v"), jen.Id("got"), jen.Id("c").Dot("v"), jen.Id("c").Dot("want")))))
		}
		g.Return(jen.Qual("errors", "Join").Call(jen.Id("errs").Op("...")))
	})
}

// specPositions maps every Go name a binding model emits to its spec position.
func specPositions(m *model) map[string]token.Position {
	pos := map[string]token.Position{}
	for _, h := range m.Handles {
		pos[h.GoName] = h.Pos
	}
	for _, s := range m.Structs {
		pos[s.GoName] = s.Pos
	}
	for _, e := range m.Enums {
		pos[e.GoName] = e.Pos
		for _, v := range e.Values {
			pos[v.GoName] = v.Pos
		}
	}
	for _, f := range m.Funcs {
		pos[f.GoName] = f.Pos
	}
	for _, d := range m.Data {
		pos[d.GoName] = d.Pos
	}
	return pos
}

func structFromCName(s *cStruct) string { return "fromC" + s.GoName }

// emitStructFromC writes fromC<Name>, which copies a C struct returned by value (llama.cpp's
// llama_model_default_params and friends) into its Go type; the bindings have one for each struct
// some function returns (returned).
func emitStructFromC(f *jen.File, s *cStruct) {
	body := []jen.Code{jen.Var().Id("s").Id(s.GoName)}
	for _, fl := range s.Fields {
		switch {
		case fl.GoName == "_":
		case fl.Type.Kind == kindArray:
			body = append(body, jen.For(jen.List(jen.Id("i"), jen.Id("v")).Op(":=").Range().Id("c").Dot(cgoField(fl.CName))).Block(
				jen.Id("s").Dot(fl.GoName).Index(jen.Id("i")).Op("=").Add(fromC(jen.Id("v"), fl.Type.Elem))))
		default:
			body = append(body, jen.Id("s").Dot(fl.GoName).Op("=").Add(fromC(jen.Id("c").Dot(cgoField(fl.CName)), fl.Type)))
		}
	}
	body = append(body, jen.Return(jen.Id("s")))
	f.Commentf("%s copies a %s returned by value into its Go type.", structFromCName(s), s.CName)
	f.Func().Id(structFromCName(s)).Params(jen.Id("c").Add(cgoType("C." + cgoTag(s.CName)))).Id(s.GoName).Block(body...)
	f.Line()
}
