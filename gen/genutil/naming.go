package genutil

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

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
