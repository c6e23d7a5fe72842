package bindings

import (
	"fmt"
	"go/token"
)

// Model is a validated spec package: everything the emitters need, with C and Go names decided.
// Emitters only read it.
type Model struct {
	// SpecPkg is the import path of the spec package it was loaded from.
	SpecPkg string
	// Handles, Structs, Enums, Funcs and Data are in declaration order (files sorted by name).
	Handles []*Handle
	Structs []*Struct
	Enums   []*Enum
	Funcs   []*Func
	Data    []*Data
	// Unbound lists what the generator could not bind, with the reason; it is reported, never
	// silently dropped.
	Unbound []Unbound
}

// Unbound is one declaration the generator left out of its output.
type Unbound struct {
	Name   string // C name
	Pos    string // spec file:line
	Reason string
}

// Handle is an opaque pointer to a C struct, optionally with a declared (and proven) layout.
type Handle struct {
	GoName  string
	Doc     string
	Struct  string // the C struct tag, e.g. "struct ggml_tensor"
	Typedef string // the pointer typedef when C spells the handle so, e.g. "ggml_backend_t"
	Fields  []*Field
	Pos     token.Position
}

// CPtr is the C spelling of the handle's pointer type.
func (h *Handle) CPtr() string {
	if h.Typedef != "" {
		return h.Typedef
	}
	return h.Struct + " *"
}

// Struct is a C struct passed by value.
type Struct struct {
	GoName string
	Doc    string
	CName  string // "struct ggml_init_params"
	Fields []*Field
	Pos    token.Position
}

// Field is a field of a Struct or of a Handle with a layout.
type Field struct {
	GoName string // "_" for padding
	CName  string
	Doc    string
	Type   *Type
	// ProofCType, set by kernelgen:ctype on a Ptr field, is the field's real C type (a
	// function pointer typedef, `const float *`, ...): the proof checks the field against it,
	// while the bindings, which see no headers, declare the field `void *` (same size and
	// alignment, same class in every ABI toy targets).
	ProofCType string
	Pos        token.Position
}

// Enum is a C enum, or a family of #defined ints (CType "int").
type Enum struct {
	GoName string
	Doc    string
	CType  string // "enum ggml_type" or "int"
	GoBase string // the spec's underlying Go type, e.g. "int32"
	Prefix string
	// NameFunc, when set, names a bound function that maps a value to its C name without the
	// prefix (case-insensitively); CheckLinked compares every constant through it at start-up.
	NameFunc string
	Values   []*EnumValue
	Pos      token.Position
}

// EnumValue is one constant of an Enum.
type EnumValue struct {
	GoName string
	CName  string
	Doc    string
	Value  int64
	Pos    token.Position
}

// Func is a bound C function.
type Func struct {
	GoName   string
	CName    string
	Doc      string
	Params   []*Param
	Result   *Type // nil for void
	Optional bool
	// Address, set by kernelgen:address, also binds the function's address (GoName+"Address"),
	// for a C API that takes it as a callback (ggml's custom operations).
	Address bool
	Pos     token.Position
}

// wideProto is the length of a C prototype beyond which a function is Wide.
const wideProto = 160

// Wide reports whether f's parameters are laid out one per line wherever the generated code
// lists them (its C prototype, its doc, its Go signature and its call), so no line runs long.
func (f *Func) Wide() bool { return len(Prototype(f)) > wideProto }

// Param is a function parameter.
type Param struct {
	Name string
	Type *Type
	// ProofCType, set by kernelgen:ctype on a method for a Ptr parameter, is the parameter's real
	// C type (`char ***`): the proof's prototype declares it, while the bindings, which see no
	// headers, declare the parameter `void *`.
	ProofCType string
}

// Data is an object the library exports whose address is a handle: Open MPI's MPI_COMM_WORLD
// is the address of its ompi_mpi_comm_world. The bindings read the address (with dlsym for a
// dynamic library); the object's contents stay opaque.
type Data struct {
	GoName string
	CName  string // the exported symbol, e.g. "ompi_mpi_comm_world"
	// Macro, when set, is the header's public spelling of the handle ("MPI_COMM_WORLD"): the
	// proof checks that it has the handle's type and is the symbol's address.
	Macro  string
	Doc    string
	Handle *Handle
	// Constant, set by kernelgen:macro NAME value=N on a method returning Ptr, makes the method
	// no object but the constant address N that the macro spells (Open MPI's MPI_IN_PLACE is
	// ((void *) 1)): nothing is resolved, Handle is nil, and the proof checks that the macro is a
	// void * equal to N.
	Constant bool
	Address  uint64
	Pos      token.Position
}

// Kind classifies a spec type by how it crosses into C.
type Kind int

// The kinds of spec types; see docs/SPECS.md for the table.
const (
	KindHandle      Kind = iota // H
	KindHandlePtr               // *H (fields only)
	KindHandleSlice             // []H
	KindEnum                    // an Enum
	KindStruct                  // a Struct by value
	KindBool                    // bool
	KindInt                     // spec.Int: C int
	KindNumber                  // int8..uint64, float32, float64
	KindSize                    // spec.Size: size_t
	KindString                  // string
	KindStringSlice             // []string
	KindPtr                     // spec.Ptr: void *
	KindNumSlice                // []T of a number type
	KindArray                   // [N]T (fields only)
	KindChar                    // spec.Char (array and slice elements only)
	KindULLong                  // spec.ULLong: unsigned long long
	KindOut                     // *T: an out-parameter C writes one value into (params only)
	KindPtrSlice                // []spec.Ptr: void ** (params only)
	KindNumPtr                  // *T of a number type: T * (results only), e.g. float * logits
)

// Type is a resolved spec type.
type Type struct {
	Kind   Kind
	Const  bool    // the pointee is const (Const[...])
	Handle *Handle // KindHandle, KindHandlePtr, KindHandleSlice
	Enum   *Enum
	Struct *Struct
	Num    string // Go name of a number type: "int64", "float32", ...
	Elem   *Type  // KindArray, KindNumSlice, KindOut, KindNumPtr
	Len    int    // KindArray
}

var numberCTypes = map[string]string{
	"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
	"uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
	"float32": "float", "float64": "double",
}

// CType is the C spelling of the type, for a declaration with the given name ("" for an abstract
// declarator): CType("ne") of [4]int64 is "int64_t ne[4]".
func (t *Type) CType(name string) string {
	if t.Kind == KindArray {
		return join(t.Elem.cBase(), name) + fmt.Sprintf("[%d]", t.Len)
	}
	return join(t.cBase(), name)
}

func join(ctype, name string) string {
	if name == "" {
		return ctype
	}
	if ctype[len(ctype)-1] == '*' {
		return ctype + name
	}
	return ctype + " " + name
}

func constq(c bool) string {
	if c {
		return "const "
	}
	return ""
}

func (t *Type) cBase() string {
	switch t.Kind {
	case KindHandle:
		if t.Const {
			return "const " + t.Handle.Struct + " *"
		}
		return t.Handle.CPtr()
	case KindHandlePtr, KindHandleSlice:
		if p := t.Handle.CPtr(); p[len(p)-1] == '*' {
			return p + "*"
		}
		return t.Handle.CPtr() + " *"
	case KindEnum:
		return t.Enum.CType
	case KindStruct:
		return t.Struct.CName
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindNumber:
		return numberCTypes[t.Num]
	case KindSize:
		return "size_t"
	case KindString:
		return "const char *"
	case KindStringSlice:
		return "const char **"
	case KindPtr:
		return constq(t.Const) + "void *"
	case KindNumSlice:
		return constq(t.Const) + t.Elem.cBase() + " *"
	case KindChar:
		return "char"
	case KindULLong:
		return "unsigned long long"
	case KindOut:
		if e := t.Elem.cBase(); e[len(e)-1] == '*' {
			return e + "*"
		}
		return constq(t.Const) + t.Elem.cBase() + " *"
	case KindPtrSlice:
		return "void **"
	case KindNumPtr:
		return t.Elem.cBase() + " *"
	}
	panic(fmt.Sprintf("gen: no C type for kind %d", t.Kind))
}

// GoString is the Go spelling of the type in generated code (without package qualifiers).
func (t *Type) GoString() string {
	switch t.Kind {
	case KindHandle:
		return t.Handle.GoName
	case KindHandlePtr:
		return "*" + t.Handle.GoName
	case KindHandleSlice:
		return "[]" + t.Handle.GoName
	case KindEnum:
		return t.Enum.GoName
	case KindStruct:
		return t.Struct.GoName
	case KindBool:
		return "bool"
	case KindInt, KindSize:
		return "int"
	case KindNumber:
		return t.Num
	case KindString:
		return "string"
	case KindStringSlice:
		return "[]string"
	case KindPtr:
		return "unsafe.Pointer"
	case KindNumSlice:
		return "[]" + t.Elem.GoString()
	case KindArray:
		return fmt.Sprintf("[%d]%s", t.Len, t.Elem.GoString())
	case KindChar:
		return "byte"
	case KindULLong:
		return "uint64"
	case KindOut:
		return "*" + t.Elem.GoString()
	case KindPtrSlice:
		return "[]unsafe.Pointer"
	case KindNumPtr:
		return "*" + t.Elem.GoString()
	}
	panic(fmt.Sprintf("gen: no Go type for kind %d", t.Kind))
}

// cgoName is how cgo names the C type, as used in conversions: C.int64_t, *C.struct_ggml_tensor,
// C.ggml_backend_t, C.enum_ggml_type.
func (t *Type) cgoName() string {
	switch t.Kind {
	case KindHandle:
		return t.Handle.cgoPtr()
	case KindEnum:
		if t.Enum.CType == "int" {
			return "C.int"
		}
		return "C." + cgoTag(t.Enum.CType)
	case KindStruct:
		return "C." + cgoTag(t.Struct.CName)
	case KindBool:
		return "C.bool"
	case KindInt:
		return "C.int"
	case KindNumber:
		return "C." + numberCTypes[t.Num]
	case KindSize:
		return "C.size_t"
	case KindChar:
		return "C.char"
	case KindULLong:
		return "C.ulonglong"
	case KindString:
		return "*C.char"
	}
	panic(fmt.Sprintf("gen: no cgo name for kind %d", t.Kind))
}

func (h *Handle) cgoPtr() string {
	if h.Typedef != "" {
		return "C." + h.Typedef
	}
	return "*C." + cgoTag(h.Struct)
}

// cgoTag turns "struct ggml_tensor" into "struct_ggml_tensor" and "enum ggml_type" into
// "enum_ggml_type", cgo's names for tagged types.
func cgoTag(ctype string) string {
	for i := 0; i < len(ctype); i++ {
		if ctype[i] == ' ' {
			return ctype[:i] + "_" + ctype[i+1:]
		}
	}
	return ctype
}
