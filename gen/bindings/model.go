package bindings

import (
	"fmt"
	"go/token"
)

// model is a validated spec package: everything the emitters need, with C and Go names decided.
// Emitters only read it.
type model struct {
	// SpecPkg is the import path of the spec package it was loaded from.
	SpecPkg string
	// Handles, Structs, Enums, Funcs and Data are in declaration order (files sorted by name).
	Handles []*handle
	Structs []*cStruct
	Enums   []*enum
	Funcs   []*function
	Data    []*data
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

// handle is an opaque pointer to a C struct, optionally with a declared (and proven) layout.
type handle struct {
	GoName  string
	Doc     string
	Struct  string // the C struct tag, e.g. "struct ggml_tensor"
	Typedef string // the pointer typedef when C spells the handle so, e.g. "ggml_backend_t"
	Fields  []*field
	Pos     token.Position
}

// CPtr is the C spelling of the handle's pointer type.
func (h *handle) CPtr() string {
	if h.Typedef != "" {
		return h.Typedef
	}
	return h.Struct + " *"
}

// cStruct is a C struct passed by value.
type cStruct struct {
	GoName string
	Doc    string
	CName  string // "struct ggml_init_params"
	Fields []*field
	Pos    token.Position
}

// field is a field of a cStruct or of a handle with a layout.
type field struct {
	GoName string // "_" for padding
	CName  string
	Doc    string
	Type   *specType
	// ProofCType, set by kernelgen:ctype on a Ptr field, is the field's real C type (a
	// function pointer typedef, `const float *`, ...): the proof checks the field against it,
	// while the bindings, which see no headers, declare the field `void *` (same size and
	// alignment, same class in every ABI toy targets).
	ProofCType string
	Pos        token.Position
}

// enum is a C enum, or a family of #defined ints (CType "int").
type enum struct {
	GoName string
	Doc    string
	CType  string // "enum ggml_type" or "int"
	GoBase string // the spec's underlying Go type, e.g. "int32"
	Prefix string
	// NameFunc, when set, names a bound function that maps a value to its C name without the
	// prefix (case-insensitively); CheckLinked compares every constant through it at start-up.
	NameFunc string
	Values   []*enumValue
	Pos      token.Position
}

// enumValue is one constant of an enum.
type enumValue struct {
	GoName string
	CName  string
	Doc    string
	Value  int64
	Pos    token.Position
}

// function is a bound C function.
type function struct {
	GoName   string
	CName    string
	Doc      string
	Params   []*param
	Result   *specType // nil for void
	Optional bool
	// Address, set by kernelgen:address, also binds the function's address (GoName+"Address"),
	// for a C API that takes it as a callback (ggml's custom operations).
	Address bool
	Pos     token.Position
}

// param is a function parameter.
type param struct {
	Name string
	Type *specType
	// ProofCType, set by kernelgen:ctype on a method for a Ptr parameter, is the parameter's real
	// C type (`char ***`): the proof's prototype declares it, while the bindings, which see no
	// headers, declare the parameter `void *`.
	ProofCType string
}

// data is an object the library exports whose address is a handle: Open MPI's MPI_COMM_WORLD
// is the address of its ompi_mpi_comm_world. The bindings read the address (with dlsym for a
// dynamic library); the object's contents stay opaque.
type data struct {
	GoName string
	CName  string // the exported symbol, e.g. "ompi_mpi_comm_world"
	// Macro, when set, is the header's public spelling of the handle ("MPI_COMM_WORLD"): the
	// proof checks that it has the handle's type and is the symbol's address.
	Macro  string
	Doc    string
	Handle *handle
	// Constant, set by kernelgen:macro NAME value=N on a method returning Ptr, makes the method
	// no object but the constant address N that the macro spells (Open MPI's MPI_IN_PLACE is
	// ((void *) 1)): nothing is resolved, Handle is nil, and the proof checks that the macro is a
	// void * equal to N.
	Constant bool
	Address  uint64
	Pos      token.Position
}

// kind classifies a spec type by how it crosses into C.
type kind int

// The kinds of spec types; see docs/SPECS.md for the table.
const (
	kindHandle      kind = iota // H
	kindHandlePtr               // *H (fields only)
	kindHandleSlice             // []H
	kindEnum                    // an enum
	kindStruct                  // a cStruct by value
	kindBool                    // bool
	kindInt                     // spec.Int: C int
	kindNumber                  // int8..uint64, float32, float64
	kindSize                    // spec.Size: size_t
	kindString                  // string
	kindStringSlice             // []string
	kindPtr                     // spec.Ptr: void *
	kindNumSlice                // []T of a number type
	kindArray                   // [N]T (fields only)
	kindChar                    // spec.Char (array and slice elements only)
	kindULLong                  // spec.ULLong: unsigned long long
	kindOut                     // *T: an out-parameter C writes one value into (params only)
	kindPtrSlice                // []spec.Ptr: void ** (params only)
	kindNumPtr                  // *T of a number type: T * (results only), e.g. float * logits
)

// specType is a resolved spec type.
type specType struct {
	Kind   kind
	Const  bool    // the pointee is const (Const[...])
	Handle *handle // kindHandle, kindHandlePtr, kindHandleSlice
	Enum   *enum
	Struct *cStruct
	Num    string    // Go name of a number type: "int64", "float32", ...
	Elem   *specType // kindArray, kindNumSlice, kindOut, kindNumPtr
	Len    int       // kindArray
}

var numberCTypes = map[string]string{
	"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
	"uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
	"float32": "float", "float64": "double",
}

// CType is the C spelling of the type, for a declaration with the given name ("" for an abstract
// declarator): CType("ne") of [4]int64 is "int64_t ne[4]".
func (t *specType) CType(name string) string {
	if t.Kind == kindArray {
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

func (t *specType) cBase() string {
	switch t.Kind {
	case kindHandle:
		if t.Const {
			return "const " + t.Handle.Struct + " *"
		}
		return t.Handle.CPtr()
	case kindHandlePtr, kindHandleSlice:
		if p := t.Handle.CPtr(); p[len(p)-1] == '*' {
			return p + "*"
		}
		return t.Handle.CPtr() + " *"
	case kindEnum:
		return t.Enum.CType
	case kindStruct:
		return t.Struct.CName
	case kindBool:
		return "bool"
	case kindInt:
		return "int"
	case kindNumber:
		return numberCTypes[t.Num]
	case kindSize:
		return "size_t"
	case kindString:
		return "const char *"
	case kindStringSlice:
		return "const char **"
	case kindPtr:
		return constq(t.Const) + "void *"
	case kindNumSlice:
		return constq(t.Const) + t.Elem.cBase() + " *"
	case kindChar:
		return "char"
	case kindULLong:
		return "unsigned long long"
	case kindOut:
		if e := t.Elem.cBase(); e[len(e)-1] == '*' {
			return e + "*"
		}
		return constq(t.Const) + t.Elem.cBase() + " *"
	case kindPtrSlice:
		return "void **"
	case kindNumPtr:
		return t.Elem.cBase() + " *"
	}
	panic(fmt.Sprintf("gen: no C type for kind %d", t.Kind))
}

// GoString is the Go spelling of the type in generated code (without package qualifiers).
func (t *specType) GoString() string {
	switch t.Kind {
	case kindHandle:
		return t.Handle.GoName
	case kindHandlePtr:
		return "*" + t.Handle.GoName
	case kindHandleSlice:
		return "[]" + t.Handle.GoName
	case kindEnum:
		return t.Enum.GoName
	case kindStruct:
		return t.Struct.GoName
	case kindBool:
		return "bool"
	case kindInt, kindSize:
		return "int"
	case kindNumber:
		return t.Num
	case kindString:
		return "string"
	case kindStringSlice:
		return "[]string"
	case kindPtr:
		return "unsafe.Pointer"
	case kindNumSlice:
		return "[]" + t.Elem.GoString()
	case kindArray:
		return fmt.Sprintf("[%d]%s", t.Len, t.Elem.GoString())
	case kindChar:
		return "byte"
	case kindULLong:
		return "uint64"
	case kindOut:
		return "*" + t.Elem.GoString()
	case kindPtrSlice:
		return "[]unsafe.Pointer"
	case kindNumPtr:
		return "*" + t.Elem.GoString()
	}
	panic(fmt.Sprintf("gen: no Go type for kind %d", t.Kind))
}

// cgoName is how cgo names the C type, as used in conversions: C.int64_t, *C.struct_ggml_tensor,
// C.ggml_backend_t, C.enum_ggml_type.
func (t *specType) cgoName() string {
	switch t.Kind {
	case kindHandle:
		return t.Handle.cgoPtr()
	case kindEnum:
		if t.Enum.CType == "int" {
			return "C.int"
		}
		return "C." + cgoTag(t.Enum.CType)
	case kindStruct:
		return "C." + cgoTag(t.Struct.CName)
	case kindBool:
		return "C.bool"
	case kindInt:
		return "C.int"
	case kindNumber:
		return "C." + numberCTypes[t.Num]
	case kindSize:
		return "C.size_t"
	case kindChar:
		return "C.char"
	case kindULLong:
		return "C.ulonglong"
	case kindString:
		return "*C.char"
	}
	panic(fmt.Sprintf("gen: no cgo name for kind %d", t.Kind))
}

func (h *handle) cgoPtr() string {
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
