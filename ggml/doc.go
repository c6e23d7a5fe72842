// Package ggml is the idiomatic Go layer over toy's generated ggml bindings (generated/ggmlc):
// contexts, tensors, graphs, backends and GGUF files, with explicit lifetimes (Close) and Go
// errors where ggml would abort the process.
//
// ggml calls abort() on misuse — mismatched shapes, a wrong type, a full context — which kills
// the whole Go program. This package checks every precondition it knows of before it calls into
// C. Graph building uses a sticky error, as bufio.Scanner does: an op whose inputs are wrong
// records the first error on its Context and returns an invalid tensor; later ops on invalid
// tensors do nothing, and Context.Err (or any call that computes) reports the first problem with
// the op and the shapes involved.
//
// The usual arrangement (docs/GGML.md, "Weights, graphs and allocators"): weights live in a
// Context without data whose tensors are allocated in a backend Buffer; each step builds a
// graph in a fresh Context, an Allocator places its intermediate tensors, and the Backend
// computes it.
//
// No file of this package imports "C": everything that crosses into C is generated.
package ggml
