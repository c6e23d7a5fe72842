package tools

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/ggml"
)

// RunVersion is toy version: toy's version, the backend it was built for and the ggml it links.
func RunVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: toy version\n\nPrints toy's version, the backend it was built for and the ggml it links.")
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	version := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		version = info.Main.Version
	}
	fmt.Fprintf(stdout, "toy %s (%s, %s/%s)\n%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, ggml.Build())
	return nil
}
