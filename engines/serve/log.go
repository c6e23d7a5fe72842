package serve

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// logField is s as a field of a log line (a path, a header's value): as it is when every
// character of it is printable and none is a blank or a quote, quoted (strconv.Quote)
// otherwise, so that what a client sent can neither end the line and forge another (a newline,
// a NUL, a terminal's escape sequence, a line separator, invalid UTF-8, all of which a path may
// carry percent-encoded) nor run into the next field.
func logField(s string) string {
	if s == "" || !printable(s, false) {
		return strconv.Quote(s)
	}
	return s
}

// logText is free text in a log line (an error's message, which may quote what a client sent):
// as it is when every character of it is printable (blanks included), quoted otherwise.
func logText(s string) string {
	if !printable(s, true) {
		return strconv.Quote(s)
	}
	return s
}

// printable reports whether every character of s is printable (strconv.IsPrint: no control
// character, no line or paragraph separator, no invalid UTF-8) and, unless blanks, neither a
// space nor a double quote.
func printable(s string, blanks bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !strconv.IsPrint(r) || !blanks && (r == ' ' || r == '"') {
			return false
		}
		i += n
	}
	return true
}

// statusWriter records the status a handler wrote, and what the request log says of it.
type statusWriter struct {
	http.ResponseWriter
	status int
	// note is the request log's account of the reply: its tokens, or the error's message.
	note string
}

// noteOn sets the request log's account of a reply written to w, when w is the statusWriter
// of counted.
func noteOn(w http.ResponseWriter, format string, args ...any) {
	if sw, ok := w.(*statusWriter); ok {
		sw.note = fmt.Sprintf(format, args...)
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
