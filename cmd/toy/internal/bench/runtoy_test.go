package bench

import "github.com/toyml/toy/cmd/toy/internal/clitest"

// runToy runs toy bench with args as toy does and returns what it wrote to standard output
// and standard error, and the exit status.
func runToy(args ...string) (stdout, stderr string, code int) {
	return clitest.Toy(map[string]clitest.Command{"bench": Run}, args...)
}
