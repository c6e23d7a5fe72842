//go:build !cuda && !metal

package ggml

// BackendKind is the backend this binary was built for: "cpu" here. Other targets are chosen
// with build tags (make target=cuda), never at run time.
const BackendKind = "cpu"

// NewBackend opens the backend this binary was built for, with threads CPU threads (0: one per
// core).
func NewBackend(threads int) (*Backend, error) { return NewCPUBackend(threads) }
