package bindings

import (
	"github.com/dave/jennifer/jen"
)

// Structs returned by value (llama.cpp's llama_model_default_params and friends) are converted
// back to their Go type by a generated fromC<Name> function, emitted only for the structs some
// function returns.

// returned reports whether a bound function of m returns s by value or through a pointer
// parameter (*S, copied back after the call).
func returned(m *model, s *cStruct) bool {
	for _, f := range m.Funcs {
		if f.Result != nil && f.Result.Kind == kindStruct && f.Result.Struct == s {
			return true
		}
		for _, p := range f.Params {
			if p.Type.Kind == kindOut && p.Type.Elem.Kind == kindStruct && p.Type.Elem.Struct == s {
				return true
			}
		}
	}
	return false
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

func structFromCName(s *cStruct) string { return "fromC" + s.GoName }

// emitStructFromC writes fromC<Name>, which copies a C struct returned by value into its Go type.
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
