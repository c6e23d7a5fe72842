package infer

import (
	"io"
	"testing"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// commands are this package's commands, as main.go's table names them.
var commands = map[string]clitest.Command{"generate": RunGenerate, "chat": RunChat, "perplexity": RunPerplexity, "inspect": RunInspect}

// run runs this package's command args[0] as toy does, writing to stdout and stderr, and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return clitest.Run(commands, args, stdout, stderr)
}

// runToy runs this package's commands with args as toy does and returns what they wrote to
// standard output and standard error, and the exit status.
func runToy(args ...string) (stdout, stderr string, code int) { return clitest.Toy(commands, args...) }

// withStdin makes text toy's standard input for the rest of the test.
func withStdin(t *testing.T, r io.Reader) { clitest.Swap(t, &stdin, r) }
