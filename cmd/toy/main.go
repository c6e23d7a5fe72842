// Command toy trains and runs small transformer models on ggml.
//
// Usage:
//
//	toy <command> [flags]
//
// Commands:
//
//	generate  run a GGUF model on a prompt
//	chat      a conversation with a GGUF model in the terminal (toy generate -cnv)
//	serve     serve a GGUF model over HTTP with OpenAI's API
//	perplexity perplexity of a text, as llama.cpp computes it
//	inspect   print a GGUF file's metadata and tensor table
//	train     train a LLaMA/SmolLM2-shaped or GPT-2 model, or a ViT classifier (-arch vit), from scratch
//	train-vit toy train -arch vit
//	classify  the top-k classes of images under a ViT checkpoint
//	finetune  adapt a GGUF model to text or chat data: LoRA, full fine-tune or warm start
//	export    quantize or convert a GGUF model as llama-quantize does, merging LoRA adapters first
//	tokenizer train a byte-level BPE tokenizer (tokenizer train)
//	tokenize  turn text into a token corpus
//	plot      draw a run's loss (and a classifier's accuracy and confusion matrix) to PNGs
//	kernels   list the compiled-in kernel table and resolve a GGUF model against it
//	version   print the backend, the linked ggml and the SIMD it was compiled for
//	bench     bench matmul: matrix-multiply throughput and graph-building overhead;
//	          bench model: a model's prompt and generation speed;
//	          bench train: training throughput and memory of a model shape;
//	          bench finetune: LoRA on a frozen base of each type vs a full fine-tune;
//	          bench serve: toy serve's throughput with 1 and N streaming clients
//	help      print this help
//
// This package is the command table, the usage and the dispatch; each command's code lives in
// a room under cmd/toy/internal: infer (generate, chat, perplexity, inspect), serve, bench,
// train (train, train-vit, classify, finetune), export and tools (tokenizer, tokenize, plot,
// kernels, version), over cli, what every command shares.
//
// The backend (cpu, cuda, metal) is fixed when toy is built: `make` builds for cpu, `make
// target=cuda` for NVIDIA GPUs (docs/CUDA.md); metal is declared but not built.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/toyml/toy/cmd/toy/internal/bench"
	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/export"
	"github.com/toyml/toy/cmd/toy/internal/infer"
	"github.com/toyml/toy/cmd/toy/internal/serve"
	"github.com/toyml/toy/cmd/toy/internal/tools"
	"github.com/toyml/toy/cmd/toy/internal/train"
	"github.com/toyml/toy/ggml"
)

// command is a word of the command line, its one-line summary in the usage, and the function
// that runs it (a room's entry) on the arguments after it.
type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

// commands are toy's commands in the order the usage lists them.
func commands() []command {
	return []command{
		{"train", "train a LLaMA/SmolLM2-shaped or GPT-2 model, or a ViT classifier (-arch vit), from scratch (default: a demo model on Go's source)", train.Run},
		{"train-vit", "train a ViT image classifier from scratch: toy train -arch vit, spelled as its own command", train.RunViT},
		{"classify", "top-k classes of images under a ViT checkpoint (toy classify -m MODEL.gguf IMAGE...)", train.RunClassify},
		{"finetune", "adapt a GGUF model to text or chat data: LoRA on a frozen base (default), -full, -warm-start", train.RunFinetune},
		{"export", "quantize or convert a GGUF model as llama-quantize does (-type Q4_K_M, Q8_0, F16, ...), merging LoRA adapters first if given", export.Run},
		{"generate", "run a GGUF model on a prompt and stream the text (llama, qwen2, qwen3, gemma2/3, MoE, gpt2; -draft or -dflash for speculative decoding)", infer.RunGenerate},
		{"chat", "a conversation with a GGUF model in the terminal, through its chat template (toy generate -cnv)", infer.RunChat},
		{"serve", "serve a GGUF model over HTTP with OpenAI's API (continuous batching, /health, /metrics, a chat page)", serve.Run},
		{"perplexity", "perplexity of a text under a GGUF model, as llama.cpp computes it", infer.RunPerplexity},
		{"inspect", "print a GGUF file's metadata and tensor table", infer.RunInspect},
		{"tokenizer", "'tokenizer train': train a byte-level BPE tokenizer into a GGUF file", tools.RunTokenizer},
		{"tokenize", "turn text into a token corpus for train -corpus", tools.RunTokenize},
		{"plot", "draw a run's loss curves to a PNG (a classifier's: with its accuracy, and its confusion matrix)", tools.RunPlot},
		{"kernels", "list the compiled-in kernel table; resolve and audit a GGUF model against it", tools.RunKernels},
		{"version", "print the backend, the linked ggml and the SIMD it was compiled for", tools.RunVersion},
		{"bench", "'bench matmul': GFLOP/s; 'bench model': prompt/generation t/s; 'bench train' and 'bench finetune': training t/s and memory; 'bench serve': toy serve's t/s with 1 and N streams; 'bench dram': the DRAM read bandwidth", bench.Run},
	}
}

// usage writes toy's help: the commands and their summaries.
func usage(w io.Writer) {
	fmt.Fprintf(w, "toy trains and runs small transformer models on ggml (backend: %s).\n\nUsage:\n\n  toy <command> [flags]\n\nCommands:\n\n", ggml.BackendKind)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n\nRun 'toy <command> -h' for a command's flags.\n", "help", "print this help")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command named by args[0] and returns the exit status (cli.Exit): 0 on success
// (and when help is asked for with -h), 2 on a usage error (a bad or missing flag, an
// unexpected argument, an unknown command), 130 when Ctrl-C (SIGINT or SIGTERM) stopped the
// command after it saved its work, as a shell reports a command SIGINT ended, 1 when the
// command fails.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		return cli.Exit(c.name, c.run(args[1:], stdout, stderr), stderr)
	}
	fmt.Fprintf(stderr, "toy: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}
