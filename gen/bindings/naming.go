package bindings

import (
	"strings"
	"unicode"
)

// snake converts a Go identifier to C's lower snake case, the way ggml names its functions:
// MulMatID → mul_mat_id, NewTensor1D → new_tensor_1d, GetValU8 → get_val_u8, RMSNorm → rms_norm.
// A word starts at an upper-case letter that follows a lower-case letter, at the last upper-case
// letter of an acronym that a lower-case letter follows, and at a digit that follows a
// lower-case letter. Underscores are kept as word breaks.
func snake(name string) string {
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

// upperSnake is snake in upper case, for enum constants: CrossEntropyLoss → CROSS_ENTROPY_LOSS,
// Q4_K → Q4_K, BF16 → BF16.
func upperSnake(name string) string { return strings.ToUpper(snake(name)) }

// enumConstCName derives the C name of an enum constant: the Go constant's name without its
// type's name, in upper snake case, after the enum's prefix (TypeQ4_K of Type with prefix
// GGML_TYPE_ → GGML_TYPE_Q4_K). ok is false when the constant's name does not start with its
// type's name.
func enumConstCName(constName, typeName, prefix string) (cname string, ok bool) {
	rest, found := strings.CutPrefix(constName, typeName)
	if !found || rest == "" {
		return "", false
	}
	return prefix + upperSnake(strings.TrimPrefix(rest, "_")), true
}
