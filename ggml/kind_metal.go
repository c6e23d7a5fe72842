//go:build metal && !cuda

package ggml

import "fmt"

// BackendKind is the backend this binary was built for.
const BackendKind = "metal"

// NewBackend opens the backend this binary was built for. The metal target is declared (its
// kernel table is compiled in, see generated/kernels) but ggml's Metal backend is not built by
// this version of toy, so this returns an error naming what is missing.
func NewBackend(threads int) (*Backend, error) {
	return nil, fmt.Errorf("ggml: this binary was built for metal, but ggml's Metal backend is not built by this version of toy (unvalidated off macOS); build with make (target=cpu) or make target=cuda")
}
