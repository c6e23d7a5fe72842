// Package genutil is the layer kernelgen's three generators share (gen/bindings, gen/configs,
// gen/kerneltables): loading a spec package and reporting its problems at their file:line
// (SpecPackage, Directives), the naming conventions between Go and C (Snake, GoDoc), rendering
// a generated Go file (Header, Render, OneEach), the check that every exported declaration's
// doc comment starts with its name (CheckDocs), and writing or diffing generated directories
// (Output, WriteFiles, Diff).
//
// It imports none of the generators; each of them imports it.
package genutil
