package genutil

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Snake converts a Go identifier to C's lower snake case, the way ggml names its functions:
// MulMatID → mul_mat_id, NewTensor1D → new_tensor_1d, GetValU8 → get_val_u8, RMSNorm → rms_norm.
// A word starts at an upper-case letter that follows a lower-case letter, at the last upper-case
// letter of an acronym that a lower-case letter follows, and at a digit that follows a
// lower-case letter. Underscores are kept as word breaks.
func Snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && rs[i-1] != '_' && r != '_' && startsWord(rs, i) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func startsWord(rs []rune, i int) bool {
	prev, r := rs[i-1], rs[i]
	switch {
	case unicode.IsUpper(r) && unicode.IsLower(prev):
		return true
	case unicode.IsUpper(r) && unicode.IsUpper(prev):
		return i+1 < len(rs) && unicode.IsLower(rs[i+1])
	case unicode.IsDigit(r) && unicode.IsLower(prev):
		return true
	}
	return false
}

// UpperSnake is Snake in upper case, for enum constants: CrossEntropyLoss → CROSS_ENTROPY_LOSS,
// Q4_K → Q4_K, BF16 → BF16.
func UpperSnake(name string) string { return strings.ToUpper(Snake(name)) }

// EnumConstCName derives the C name of an enum constant: the Go constant's name without its
// type's name, in upper snake case, after the enum's prefix (TypeQ4_K of Type with prefix
// GGML_TYPE_ → GGML_TYPE_Q4_K). ok is false when the constant's name does not start with its
// type's name.
func EnumConstCName(constName, typeName, prefix string) (cname string, ok bool) {
	rest, found := strings.CutPrefix(constName, typeName)
	if !found || rest == "" {
		return "", false
	}
	return prefix + UpperSnake(strings.TrimPrefix(rest, "_")), true
}

// GoDoc makes doc, the doc comment of a spec declaration, start with goName, the name the
// declaration has in generated/ (Go's convention, which godoc and linters rely on). A doc that
// starts with specName, the declaration's name in the spec (a method before its interface's
// goprefix), has that word replaced (CPUInit … → BackendCPUInit …); any other doc is prefixed
// with goName and a dash. An empty doc stays empty.
func GoDoc(goName, specName, doc string) string {
	switch {
	case doc == "" || startsWithName(doc, goName):
		return doc
	case specName != "" && startsWithName(doc, specName):
		return goName + doc[len(specName):]
	}
	return goName + " — " + doc
}

// startsWithName reports whether text starts with the word name: name followed by the end, a
// space or a punctuation mark that cannot continue an identifier.
func startsWithName(text, name string) bool {
	rest, ok := strings.CutPrefix(text, name)
	if !ok || name == "" {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
}
