package infer

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/toyml/toy/engines/sample"
)

// stdin is where toy generate reads -p - and a conversation's messages: the process's standard
// input, a pipe in tests.
var stdin io.Reader = os.Stdin

// drawSeed gives p a random seed when it samples and no seed was given, and prints it on stderr
// so that the run can be repeated, as llama.cpp does.
func drawSeed(p *sample.Params, given bool, stderr io.Writer) {
	if given || p.Temperature <= 0 {
		return
	}
	p.Seed = rand.Uint64()
	fmt.Fprintf(stderr, "toy generate: seed %d (-seed %d repeats this generation)\n", p.Seed, p.Seed)
}
