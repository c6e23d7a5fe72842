// Command toy trains and runs small transformer models on ggml.
//
// Usage:
//
//	toy <command> [flags]
//
// Commands:
//
//	generate  run a GGUF model on a prompt
//	perplexity perplexity of a text, as llama.cpp computes it
//	inspect   print a GGUF file's metadata and tensor table
//	train     train a LLaMA/SmolLM2-shaped model from scratch
//	tokenizer train a byte-level BPE tokenizer (tokenizer train)
//	tokenize  turn text into a token corpus
//	plot      draw a run's loss curves to a PNG
//	kernels   list the compiled-in kernel table and resolve a GGUF model against it
//	version   print the backend, the linked ggml and the SIMD it was compiled for
//	bench     measure matrix-multiply throughput and graph-building overhead
//	          (bench train: training throughput and memory of a model shape)
//	help      print this help
//
// The backend (cpu, cuda, metal) is fixed when toy is built: `make` builds for cpu, `make
// target=cuda` for NVIDIA GPUs (docs/CUDA.md); metal is declared but not built.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/toyml/toy/ggml"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

func commands() []command {
	return []command{
		{"train", "train a LLaMA/SmolLM2-shaped model from scratch (default: a demo model on Go's source)", runTrain},
		{"generate", "run a GGUF model on a prompt and stream the text (llama, qwen2, qwen3, gemma2/3, MoE)", runGenerate},
		{"perplexity", "perplexity of a text under a GGUF model, as llama.cpp computes it", runPerplexity},
		{"inspect", "print a GGUF file's metadata and tensor table", runInspect},
		{"tokenizer", "'tokenizer train': train a byte-level BPE tokenizer into a GGUF file", runTokenizer},
		{"tokenize", "turn text into a token corpus for train -corpus", runTokenize},
		{"plot", "draw a run's loss curves to a PNG", runPlot},
		{"kernels", "list the compiled-in kernel table; resolve and audit a GGUF model against it", runKernels},
		{"version", "print the backend, the linked ggml and the SIMD it was compiled for", runVersion},
		{"bench", "matmul GFLOP/s; 'bench -m MODEL' or '-random PRESET': prompt/generation t/s; 'bench train': training t/s and memory", benchCommand},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "toy trains and runs small transformer models on ggml (backend: %s).\n\nUsage:\n\n  toy <command> [flags]\n\nCommands:\n\n", ggml.BackendKind)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n\nRun 'toy <command> -h' for a command's flags.\n", "help", "print this help")
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

// benchCommand dispatches `toy bench` (matrix multiply), `toy bench -m MODEL` or
// `toy bench -random PRESET` (a model's prompt and generation speed) and `toy bench train`.
func benchCommand(args []string) error {
	if len(args) > 0 && args[0] == "train" {
		return runBenchTrain(args[1:])
	}
	for _, a := range args {
		if a == "-m" || strings.HasPrefix(a, "-m=") || a == "--m" || a == "-random" || strings.HasPrefix(a, "-random=") {
			return runBenchModel(args)
		}
	}
	return runBench(args)
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
