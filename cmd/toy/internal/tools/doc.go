// Package tools holds toy's utility commands, which run no model: toy tokenizer train and toy
// tokenize (tokenizer.go: a BPE tokenizer and a token corpus for toy train), toy plot
// (plot.go: a run's curves to PNGs), toy kernels (kernels.go: the compiled-in kernel table, and
// a GGUF model resolved and audited against it) and toy version (version.go).
package tools
