// Package toy trains and runs small transformer models from Go on the ggml tensor library.
//
// Nothing that crosses into C is written by hand: cmd/kernelgen reads the typed specs under
// specs/ and writes generated/. Run it with
//
//	go generate ./...
//
// The layout: specs/ and kernels/ (inputs), gen/ and cmd/kernelgen (the generator: gen/bindings,
// gen/configs and gen/kerneltables over gen/genutil), generated/ (its output, never edited by
// hand), ggml/ (the idiomatic Go layer), engines/ (models and training), cmd/toy (the command
// line). See README.md and docs/.
package toy

//go:generate go run ./cmd/kernelgen
