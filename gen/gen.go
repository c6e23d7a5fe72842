// Package gen is the library behind cmd/kernelgen: Generate runs its three generators, each a
// package of its own, and gathers what they produce:
//
//   - gen/bindings: the cgo bindings of the C libraries toy calls, from the specs of their
//     surfaces (specs/ggml, specs/cuda, ...) proven against the C headers → generated/ggmlc, ...;
//   - gen/configs: the engine configs and command options of specs/engines → generated/config;
//   - gen/kerneltables: the kernel tables of kernels/ → generated/kernels, whose sampling
//     presets and DFlash pairings take the option groups gen/configs loads.
//
// What they share (spec loading, naming, rendering, the doc-comment check, writing and diffing
// generated directories) is gen/genutil. Imports run one way: genutil ← bindings, configs;
// configs ← kerneltables; all of them ← gen; and inside each package no two files need each
// other, so its files read top-down (layering_test.go holds both).
package gen

import (
	"github.com/toyml/toy/gen/bindings"
	"github.com/toyml/toy/gen/configs"
	"github.com/toyml/toy/gen/genutil"
	"github.com/toyml/toy/gen/kerneltables"
)

// Options configure one generation run.
type Options struct {
	// Root is the module root; specs and outputs are relative to it.
	Root string
	// Prove compiles the ABI proof against the linked headers (needs a C compiler).
	Prove bool
	// CC is the C compiler command for the proof ("cc" when empty).
	CC string
}

// Output is everything one run generates: file contents by directory (relative to the root),
// a summary line per input, and what could not be bound.
type Output struct {
	genutil.Output
	Unbound []bindings.Unbound
}

// Generate loads, proves and emits every binding, config and kernel table, without writing
// anything.
func Generate(opts Options) (*Output, error) {
	out := &Output{Output: genutil.Output{Dirs: map[string]map[string][]byte{}}}
	unbound, err := bindings.Generate(opts.Root, opts.Prove, opts.CC, &out.Output)
	if err != nil {
		return nil, err
	}
	out.Unbound = unbound
	options, err := configs.Generate(opts.Root, &out.Output)
	if err != nil {
		return nil, err
	}
	if err := kerneltables.Generate(opts.Root, options, &out.Output); err != nil {
		return nil, err
	}
	return out, nil
}
