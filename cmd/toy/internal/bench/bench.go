package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/toyml/toy/cmd/toy/internal/cli"
)

// benchCommands are the words of `toy bench`.
var benchCommands = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}{
	{"matmul", "matrix-multiply GFLOP/s per weight type and shape, and the graph-building overhead", runBenchMatMul},
	{"model", "a model's prompt-processing and generation tokens/s (-m MODEL or -random PRESET), as llama-bench", runBenchModel},
	{"train", "training tokens/s and memory of a model shape on random tokens", runBenchTrain},
	{"finetune", "fine-tuning tokens/s and peak memory: LoRA on a frozen base of each type vs a full fine-tune", runBenchFinetune},
	{"dram", "the DRAM read bandwidth bench model's generation share is of, on its own (to bracket another program's run)", runBenchDRAM},
	{"serve", "toy serve's aggregate generation tokens/s with 1 and N streaming clients over HTTP, and time to first token", runBenchServe},
}

// benchNames are the words of `toy bench`.
func benchNames() []string {
	var names []string
	for _, c := range benchCommands {
		names = append(names, c.name)
	}
	return names
}

func benchUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: toy bench <%s> [flags]\n\nBenchmarks:\n\n", strings.Join(benchNames(), "|"))
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'toy bench <benchmark> -h' for its flags. See docs/PERFORMANCE.md.\n")
}

// Run dispatches `toy bench matmul`, `model`, `train`, `finetune`, `dram` and `serve`. Without a
// word (or with -h) it lists them, as plain `toy` lists the commands; an unknown word is a
// usage error.
func Run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		benchUsage(stdout)
		return nil
	}
	for _, c := range benchCommands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	return cli.Usagef("unknown benchmark %q: want %s", args[0], strings.Join(benchNames(), ", "))
}
