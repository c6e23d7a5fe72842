package ggml

import (
	"runtime/debug"
	"strings"

	"github.com/toyml/toy/generated/ggmlc"
)

// GGMLModule is the Go module whose cgo package compiles the ggml this binary links.
const GGMLModule = "github.com/ollama/ollama"

// GGMLPackage is that cgo package.
const GGMLPackage = GGMLModule + "/ml/backend/ggml/ggml/src"

// BuildInfo says what this binary computes with, all of it fixed when it was built.
type BuildInfo struct {
	Backend     string   // BackendKind
	GGMLModule  string   // module path and version, e.g. "github.com/ollama/ollama v0.17.4"
	CFlags      string   // the CGO_CFLAGS ggml was compiled with
	CPUFeatures []string // SIMD the CPU kernels were compiled for (empty: scalar)
}

// Build reports how this binary was built.
func Build() BuildInfo {
	bi := BuildInfo{Backend: BackendKind, GGMLModule: GGMLModule + " (version unknown)"}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == GGMLModule {
				bi.GGMLModule = d.Path + " " + d.Version
				if d.Replace != nil {
					bi.GGMLModule += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
		for _, s := range info.Settings {
			if s.Key == "CGO_CFLAGS" {
				bi.CFlags = s.Value
			}
		}
	}
	for _, f := range []struct {
		name string
		has  func() int
	}{
		{"SSE3", ggmlc.CPUHasSSE3}, {"AVX", ggmlc.CPUHasAVX}, {"AVX2", ggmlc.CPUHasAVX2},
		{"F16C", ggmlc.CPUHasF16C}, {"FMA", ggmlc.CPUHasFMA}, {"BMI2", ggmlc.CPUHasBMI2},
		{"AVX512", ggmlc.CPUHasAVX512}, {"NEON", ggmlc.CPUHasNEON}, {"DOTPROD", ggmlc.CPUHasDotprod},
	} {
		if f.has() != 0 {
			bi.CPUFeatures = append(bi.CPUFeatures, f.name)
		}
	}
	return bi
}

// String formats the build info for `toy version`.
func (b BuildInfo) String() string {
	simd := strings.Join(b.CPUFeatures, " ")
	if simd == "" {
		simd = "none (scalar kernels: build with make, which passes -march)"
	}
	flags := b.CFlags
	if flags == "" {
		flags = "(none recorded)"
	}
	return "backend: " + b.Backend + " (fixed at build time)\n" +
		"ggml:    " + b.GGMLModule + ", package " + GGMLPackage + "\n" +
		"simd:    " + simd + "\n" +
		"cflags:  " + flags + "\n"
}
