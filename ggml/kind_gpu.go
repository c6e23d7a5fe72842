//go:build cuda || metal

package ggml

import "fmt"

// BackendKind is the backend this binary was built for.
const BackendKind = gpuKind

// NewBackend opens the backend this binary was built for. The GPU targets are declared (their
// kernel tables are compiled in, see generated/kernels) but ggml's GPU backends are not linked
// yet, so this returns an error naming what is missing.
func NewBackend(threads int) (*Backend, error) {
	return nil, fmt.Errorf("ggml: this binary was built for %s, but ggml's %s backend is not linked in this version of toy; build with make (target=cpu)", BackendKind, BackendKind)
}
