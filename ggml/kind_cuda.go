//go:build cuda

package ggml

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/toyml/toy/generated/ggmlc"
)

// BackendKind is the backend this binary was built for: "cuda" here.
const BackendKind = "cuda"

// CUDALibraryEnv names the environment variable that points at ggml's CUDA backend library
// (libggml-cuda.so); without it the library is looked for beside the executable.
const CUDALibraryEnv = "TOY_GGML_CUDA"

// CUDALibraryName is the file name of ggml's CUDA backend library.
const CUDALibraryName = "libggml-cuda.so"

// cudaLibraryPath finds libggml-cuda.so: $TOY_GGML_CUDA (a file, or a directory holding it),
// else the executable's directory or its lib/ subdirectory.
func cudaLibraryPath() (string, error) {
	var candidates []string
	if env := os.Getenv(CUDALibraryEnv); env != "" {
		candidates = []string{env, filepath.Join(env, CUDALibraryName)}
	} else if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		candidates = []string{filepath.Join(dir, CUDALibraryName), filepath.Join(dir, "lib", CUDALibraryName)}
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("ggml: this binary was built for cuda, but ggml's CUDA backend library was not found (looked for %v); make target=cuda builds it beside bin/toy, or set $%s", candidates, CUDALibraryEnv)
}

// loadCUDA loads and registers the CUDA backend library once per process.
var loadCUDA = sync.OnceValues(func() (ggmlc.BackendReg, error) {
	path, err := cudaLibraryPath()
	if err != nil {
		return ggmlc.BackendReg{}, err
	}
	reg := ggmlc.BackendLoad(path)
	if reg.IsNil() {
		return reg, fmt.Errorf("ggml: could not load ggml's CUDA backend from %s (ggml printed why above: a missing CUDA runtime library, or no driver)", path)
	}
	return reg, nil
})

// NewBackend opens the backend this binary was built for: ggml's CUDA backend on the first
// CUDA device, loaded from libggml-cuda.so (built by make target=cuda from the same ggml
// sources this binary links). threads is unused by the GPU.
func NewBackend(threads int) (*Backend, error) {
	if err := linkCheck(); err != nil {
		return nil, fmt.Errorf("ggml: the linked library disagrees with the bindings: %w", err)
	}
	reg, err := loadCUDA()
	if err != nil {
		return nil, err
	}
	if ggmlc.BackendRegDevCount(reg) == 0 {
		return nil, fmt.Errorf("ggml: the CUDA backend found no CUDA device")
	}
	b := ggmlc.BackendDevInit(ggmlc.BackendRegDevGet(reg, 0), "")
	if b.IsNil() {
		return nil, fmt.Errorf("ggml: the CUDA backend failed to start on %s", ggmlc.BackendDevDescription(ggmlc.BackendRegDevGet(reg, 0)))
	}
	return &Backend{b: b, threads: threads}, nil
}
