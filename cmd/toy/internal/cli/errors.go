package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit reports how the command name ended, its error err (nil: it succeeded), on stderr and
// returns toy's exit status: 0 on success and when help was asked for with -h, 2 on a
// UsageError (with a pointer to the command's -h), 130 on an InterruptedError, as a shell
// reports a command SIGINT ended, 1 for any other failure.
func Exit(name string, err error, stderr io.Writer) int {
	var ue *UsageError
	var ie *InterruptedError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "toy %s: %v\nRun 'toy %s -h' for usage.\n", name, err, ue.Help(name))
		return 2
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "toy %s: %v\n", name, err)
		return 130
	}
	fmt.Fprintf(stderr, "toy %s: %v\n", name, err)
	return 1
}

// UsageError is an error in how toy was invoked (a bad or missing flag, an unexpected
// argument) rather than in what the command did: Exit reports it with a pointer to the
// command's help and exit status 2.
type UsageError struct {
	err error
	// cmd is the command line whose -h helps ("bench model"); empty: the top-level command.
	cmd string
}

func (e *UsageError) Error() string { return e.err.Error() }
func (e *UsageError) Unwrap() error { return e.err }

// Help is the command line whose -h a usage error of the command name points to.
func (e *UsageError) Help(name string) string {
	if e.cmd != "" {
		return e.cmd
	}
	return name
}

// InterruptedError reports a command stopped by SIGINT or SIGTERM once it had saved its work:
// Exit prints it and returns status 130.
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{err: fmt.Errorf(format, args...)}
}

// AsUsage marks err, when not nil, as a usage error.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	return &UsageError{err: err}
}
