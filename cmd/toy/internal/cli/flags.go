package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ParseFlags parses args with fs, whose usage goes to stderr. The flag package's own report of
// a bad flag is suppressed, so that Exit prints the error once: a parse error comes back as a
// UsageError. -h prints the usage and returns flag.ErrHelp.
func ParseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return &UsageError{err: err, cmd: fs.Name()}
	}
	return nil
}

// ParseFlagsOnly is ParseFlags for a command that takes no arguments besides its flags: a
// leftover argument is a usage error naming it.
func ParseFlagsOnly(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	if err := ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &UsageError{err: fmt.Errorf("unexpected argument %q", fs.Arg(0)), cmd: fs.Name()}
	}
	return nil
}

// SetFlags is the set of the flags the command line gave (not those left at their defaults).
func SetFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// StringList is a repeatable string flag: each use appends its value.
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ",") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }
