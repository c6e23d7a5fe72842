// Package genutil is the layer kernelgen's three generators share (gen/bindings, gen/configs,
// gen/kerneltables): loading a spec package and reporting its problems at their file:line
// (SpecPackage, Directives), the doc comments of generated declarations (GoDoc, which makes a
// spec's doc start with the generated name, and CheckFileDocs, which holds every rendered file to
// that), rendering a generated Go file (Header, Render, OneEach), and writing or diffing
// generated directories (Output and its Write, Diff).
//
// It imports none of the generators; each of them imports it.
package genutil
