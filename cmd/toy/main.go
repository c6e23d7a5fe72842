// Command toy trains and runs small transformer models on ggml.
//
// Usage:
//
//	toy <command> [flags]
//
// Commands:
//
//	version   print the backend, the linked ggml and the SIMD it was compiled for
//	bench     measure matrix-multiply throughput and graph-building overhead
//	help      print this help
//
// The backend (cpu, cuda, metal) is fixed when toy is built: `make` builds for cpu.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/toyml/toy/ggml"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

func commands() []command {
	return []command{
		{"version", "print the backend, the linked ggml and the SIMD it was compiled for", runVersion},
		{"bench", "measure matrix-multiply throughput (GFLOP/s) and graph-building overhead", runBench},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "toy trains and runs small transformer models on ggml (backend: %s).\n\nUsage:\n\n  toy <command> [flags]\n\nCommands:\n\n", ggml.BackendKind)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-9s %s\n\nRun 'toy <command> -h' for a command's flags.\n", "help", "print this help")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(os.Stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if err := c.run(args[1:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return 0
				}
				fmt.Fprintf(os.Stderr, "toy %s: %v\n", c.name, err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "toy: unknown command %q\n\n", args[0])
	usage(os.Stderr)
	return 2
}

func runVersion(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: toy version\n\nPrints toy's version, the backend it was built for and the ggml it links.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	version := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		version = info.Main.Version
	}
	fmt.Printf("toy %s (%s, %s/%s)\n%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, ggml.Build())
	return nil
}
