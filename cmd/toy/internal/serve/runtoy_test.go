package serve

import (
	"testing"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// runToy runs toy serve with args as toy does and returns what it wrote to standard output
// and standard error, and the exit status.
func runToy(args ...string) (stdout, stderr string, code int) {
	return clitest.Toy(map[string]clitest.Command{"serve": Run}, args...)
}

// startServe runs toy serve with args until it is ready (clitest.StartServe).
func startServe(t *testing.T, args ...string) (url string, stop func()) {
	return clitest.StartServe(t, Run, args...)
}

// startServeLog is startServe without the -addr, also returning what toy serve wrote to
// stderr until it was ready (clitest.StartServeLog).
func startServeLog(t *testing.T, args ...string) (url string, lines []string, stop func()) {
	return clitest.StartServeLog(t, Run, args...)
}
