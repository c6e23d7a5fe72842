package infer

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/ggml"
)

// RunInspect is toy inspect: a GGUF file's metadata and tensor table.
func RunInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	full := fs.Bool("full", false, "print arrays in full")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy inspect [-full] MODEL.gguf\n\nPrints a GGUF file's metadata and tensor table.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("name one GGUF file")
	}
	f, err := ggml.OpenGGUF(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(stdout, "%s: GGUF v%d, %d keys, %d tensors, alignment %d, data at %d\n", escapeText(f.Path()), f.Version(), len(f.Keys()), len(f.Tensors()), f.Alignment(), f.DataOffset())
	keys := f.Keys()
	for _, k := range keys {
		v, err := f.Value(k)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %-48s %s\n", escapeText(k), showValue(v, *full))
	}
	ts := f.Tensors()
	byType := map[string]int64{}
	var total int64
	fmt.Fprintf(stdout, "\n  %-40s %-6s %-24s %12s %12s\n", "tensor", "type", "shape", "offset", "bytes")
	for _, t := range ts {
		fmt.Fprintf(stdout, "  %-40s %-6s %-24s %12d %12d\n", escapeText(t.Name), ggml.TypeName(t.Type), fmt.Sprint(t.Ne[:t.NDims]), t.Offset, t.Size)
		byType[ggml.TypeName(t.Type)] += t.Size
		total += t.Size
	}
	var types []string
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	fmt.Fprintf(stdout, "\n  %.1f MiB of tensor data:", float64(total)/(1<<20))
	for _, t := range types {
		fmt.Fprintf(stdout, " %s %.1f MiB", t, float64(byType[t])/(1<<20))
	}
	fmt.Fprintln(stdout)
	return nil
}

// showValue renders a metadata value on one line: strings quoted (strconv.Quote's escapes),
// long values cut at 160 characters unless full, and no control character of the file's
// reaching the terminal raw.
func showValue(v any, full bool) string {
	s := fmt.Sprint(v)
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case []string:
		if len(x) > 8 && !full {
			return escapeText(fmt.Sprintf("[%d strings: %q ...]", len(x), x[:8]))
		}
		s = fmt.Sprintf("%q", x)
	}
	s = escapeText(s)
	if r := []rune(s); len(r) > 160 && !full {
		return string(r[:157]) + "..."
	}
	return s
}

// escapeText returns s with every rune that is not printable (strconv.IsPrint: control
// characters, invalid UTF-8, ...) written as its Go escape, so that text from a file cannot
// move the cursor, clear the screen or retitle the terminal.
func escapeText(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !strconv.IsPrint(r) || r == utf8.RuneError:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
