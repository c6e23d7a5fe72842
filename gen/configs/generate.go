// Package configs is kernelgen's generator of engine configurations and command options: it
// loads the structs of specs/engines that //kernelgen:config (a model's configuration, read from
// and written to GGUF) and //kernelgen:options (a group of command options) mark, checks their
// tags (json, gguf, default, min, max, enum, ...; docs/SPECS.md), and emits generated/config:
// the types with their defaults, validation, flags, GGUF conversions and presets.
//
// Generate does all of it for every spec package of All. The kernel tables' generator
// (gen/kerneltables) reads the option groups it returns (Sampling, DFlash; OptionGroup finds one)
// for their defaults and bounds: a Config, its Fields, and Field.Check for a value.
package configs

import (
	"fmt"
	"go/ast"
	"go/token"

	"github.com/toyml/toy/gen/genutil"
)

// ImportPath is the import path of the generated option groups and model configs, which the
// kernel tables' sampling presets (config.SamplingOverlay) name too.
const ImportPath = "github.com/toyml/toy/generated/config"

// All lists the engine spec packages and where their configs go.
var All = []struct {
	Spec, OutDir string
	Target       target
}{{
	Spec:   "./specs/engines",
	OutDir: "generated/config",
	Target: target{ImportPath: ImportPath, PkgName: "config", Source: "specs/engines"},
}}

// Generate loads and emits every spec package of All under root, the module root, into out,
// and returns the option groups (//kernelgen:options) it loaded.
func Generate(root string, out *genutil.Output) ([]*Config, error) {
	var options []*Config
	for _, c := range All {
		cs, err := Load(root, c.Spec)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if c.Options {
				options = append(options, c)
			}
		}
		files, err := emit(cs, c.Target)
		if err != nil {
			return nil, err
		}
		out.Dirs[c.OutDir] = files
		out.Summary = append(out.Summary, fmt.Sprintf("%s → %s: %d configs", c.Spec, c.OutDir, len(cs)))
	}
	return options, nil
}

// Load reads the engine spec package matched by pattern (relative to dir).
func Load(dir, pattern string) ([]*Config, error) {
	spec, err := genutil.LoadSpec(dir, pattern)
	if err != nil {
		return nil, err
	}
	l := &loader{spec}
	var out []*Config
	for _, f := range l.Files() {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				l.Errorf(decl.Pos(), "engine specs declare only config struct types")
				continue
			}
			if gd.Tok == token.IMPORT {
				continue
			}
			if gd.Tok != token.TYPE {
				l.Errorf(gd.Pos(), "engine specs declare only config struct types")
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				dg := ts.Doc
				if dg == nil && len(gd.Specs) == 1 {
					dg = gd.Doc
				}
				if c := l.config(ts, dg); c != nil {
					out = append(out, c)
				}
			}
		}
	}
	l.resolveShapes(out)
	for _, c := range out {
		l.presets(c)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
