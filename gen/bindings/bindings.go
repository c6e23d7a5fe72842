// Package bindings is kernelgen's generator of cgo bindings: Generate loads the typed specs of
// each C library's surface that allBindings lists (specs/ggml, specs/cuda, ...) with go/packages,
// checks them into a model (naming and C↔Go type mapping live there), proves the model against
// the real C headers (proof.go: prototypes, enum values and struct layouts, compiled with
// -Werror), and emits the bindings (generated/ggmlc, generated/cudadrv, ...) with jennifer,
// returning what it could not bind (Unbound).
//
// The layers follow go-gl/glow: load decodes and validates, the model owns every decision, and
// the emitters only print it.
package bindings

import (
	"errors"
	"fmt"

	"github.com/toyml/toy/gen/genutil"
)

// allBindings lists what toy generates bindings for.
var allBindings = []binding{{
	Spec:   "./specs/ggml",
	OutDir: "generated/ggmlc",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/ggmlc",
		PkgName:    "ggmlc",
		Source:     "specs/ggml",
		Link:       ggml.GoPackage,
	},
	Lib: ggml,
}, {
	Spec:   "./specs/cuda",
	OutDir: "generated/cudadrv",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/cudadrv",
		PkgName:    "cudadrv",
		Source:     "specs/cuda",
		Dynamic:    &dynamic{Sonames: []string{"libcuda.so.1", "libcuda.so"}, What: "the CUDA driver (libcuda)"},
	},
	Lib: cudaDriver,
}, {
	// A CBLAS sgemm, which toy bench times as the best GEMM of the machine (cmd/toy).
	Spec:   "./specs/cblas",
	OutDir: "generated/cblas",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/cblas",
		PkgName:    "cblas",
		Source:     "specs/cblas",
		Dynamic:    &dynamic{Sonames: []string{"libopenblas.so.0", "libopenblas.so"}, What: "OpenBLAS (libopenblas)"},
	},
	Lib: openBLAS,
}, {
	Spec:   "./specs/mpi",
	OutDir: "generated/mpi",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/mpi",
		PkgName:    "mpi",
		Source:     "specs/mpi",
		// Open MPI opens its own components with dlopen; builds whose components are not linked
		// against libmpi and libopen-pal resolve those symbols in the global namespace, so the
		// library is loaded globally, as mpi4py does (Debian's 4.1 works either way).
		Dynamic: &dynamic{Sonames: []string{"libmpi.so.40", "libmpi.so"}, What: "Open MPI (libmpi)", Global: true},
	},
	Lib: openMPI,
}, {
	// NCCL is bound for the cuda target's data-parallel training; the bindings build anywhere
	// (nothing is loaded until the generated Load), the Go layer over them only with -tags cuda.
	Spec:   "./specs/nccl",
	OutDir: "generated/nccl",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/nccl",
		PkgName:    "nccl",
		Source:     "specs/nccl",
		Dynamic:    &dynamic{Sonames: []string{"libnccl.so.2", "libnccl.so"}, What: "NCCL (libnccl)"},
	},
	Lib: nccl,
}, {
	// toy's own CPU operations (kernels/cpu/c): C kernels ggml runs as custom operations where
	// its own are slow; the package compiles them, and reads struct ggml_tensor from kg_ggml.h.
	Spec:   "./specs/cpuops",
	OutDir: "generated/cpuops",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/cpuops",
		PkgName:    "cpuops",
		Source:     "specs/cpuops",
	},
	Lib:        cpuOps,
	Sources:    "kernels/cpu/c",
	Declares:   "./specs/ggml",
	DeclHeader: "kg_ggml.h",
}, {
	// llama.cpp is bound only for the differential oracle (internal/oracle), which tests and
	// benchmarks import; the product binary never links it.
	Spec:   "./specs/llamacpp",
	OutDir: "generated/llamacpp",
	Target: target{
		ImportPath: "github.com/toyml/toy/generated/llamacpp",
		PkgName:    "llamacpp",
		Source:     "specs/llamacpp",
		Link:       llamaCpp.GoPackage,
	},
	Lib: llamaCpp,
}}

// llamaCpp is llama.cpp's core as the ollama module carries it (the same ggml as ggml), whose
// llama.h the oracle's bindings are proven against.
var llamaCpp = library{
	GoPackage:  "github.com/ollama/ollama/llama/llama.cpp/src",
	IncludeRel: "../include",
	Headers:    []string{"llama.h"},
	Deps:       []library{ggml},
}

// cpuOps is toy's own CPU operations' header, in the module (kernels/cpu/c); its kernels take
// ggml's tensors, so ggml's headers are on the proof's include path too.
var cpuOps = library{
	RootDir: "kernels/cpu/c",
	Headers: []string{"toy_cpu.h"},
	Deps:    []library{ggml},
}

// cudaDriver is the CUDA driver API's header, found where a CUDA toolkit is installed. Without
// one the bindings are generated unproven here; the proof file they carry
// (generated/cudadrv/abiproof) is compiled by scripts/gpu-check.sh on a machine with the toolkit.
var cudaDriver = library{
	HeaderDirs: []string{"$CUDA_PATH/include", "$CUDA_HOME/include", "/usr/local/cuda/include", "/usr/include"},
	Headers:    []string{"cuda.h"},
}

// OpenBLAS's cblas.h, as Debian's libopenblas-dev installs it. Without it the bindings are
// generated unproven (they are loaded with dlopen, as the CUDA driver's).
var openBLAS = library{
	HeaderDirs: []string{"/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu", "/usr/include/openblas", "/usr/include"},
	Headers:    []string{"cblas.h"},
}

// openMPI is Open MPI's mpi.h, found where Debian's libopenmpi-dev (or an Open MPI installed
// under $MPI_HOME) put it. Without it the bindings are generated unproven here, with their proof
// in generated/mpi/abiproof; CI installs it, so CI proves them.
var openMPI = library{
	HeaderDirs: []string{"$MPI_HOME/include", "/usr/lib/x86_64-linux-gnu/openmpi/include", "/usr/lib/aarch64-linux-gnu/openmpi/include"},
	Headers:    []string{"mpi.h"},
}

// nccl is nccl.h, found through $NCCL_INCLUDE or where NVIDIA's NCCL packages put it. It
// includes the CUDA toolkit's runtime headers: where those are not installed, the proof
// stands in for them with the one declaration nccl.h uses (cudaStream_t, the same opaque
// struct pointer the spec binds) and empty half-precision headers. Without nccl.h the bindings
// are generated unproven here, with their proof in generated/nccl/abiproof for a GPU machine.
var nccl = library{
	HeaderDirs: []string{"$NCCL_INCLUDE", "$NCCL_HOME/include", "$CUDA_PATH/include", "$CUDA_HOME/include", "/usr/local/cuda/include", "/usr/include"},
	Headers:    []string{"nccl.h"},
	Deps:       []library{cudaRuntime},
	StandIns: map[string]string{
		"cuda_runtime.h": "/* kernelgen's stand-in for the CUDA runtime header: what nccl.h uses of it. */\n#include <stddef.h>\ntypedef struct CUstream_st *cudaStream_t;\n",
		"cuda_fp16.h":    "/* kernelgen's stand-in: nccl.h's C declarations use no half type. */\n",
		"cuda_bf16.h":    "/* kernelgen's stand-in: nccl.h's C declarations use no bfloat16 type. */\n",
		"cuda_fp8.h":     "/* kernelgen's stand-in: nccl.h includes it only in C++. */\n",
	},
}

// cudaRuntime is the CUDA toolkit's runtime header, which nccl.h includes; optional for its
// proof (NCCL's StandIns).
var cudaRuntime = library{
	HeaderDirs: []string{"$CUDA_PATH/include", "$CUDA_HOME/include", "/usr/local/cuda/include"},
	Headers:    []string{"cuda_runtime.h"},
	Optional:   true,
}

// Generate loads every binding of allBindings under root, the module root, proves it (with
// prove, with cc as the C compiler, "cc" when empty) and emits it into out, writing nothing. It
// returns what the bindings could not bind.
func Generate(root string, prove bool, cc string, out *genutil.Output) ([]Unbound, error) {
	if cc == "" {
		cc = "cc"
	}
	var unbound []Unbound
	models := map[string]*model{}
	for _, b := range allBindings {
		m, err := load(root, b.Spec)
		if err != nil {
			return nil, err
		}
		models[b.Spec] = m
		proven := "proven"
		if prove {
			inc, err := includeDirs(root, b.Lib)
			switch {
			case errors.Is(err, errNoHeaders) && b.Target.Dynamic != nil:
				proven = "not proven here (" + err.Error() + ")"
			case err != nil:
				return nil, err
			default:
				if err := proveWith(m, b.Lib, inc, cc); err != nil {
					return nil, err
				}
			}
		} else {
			proven = "not proven (-prove=false)"
		}
		t := b.Target
		t.IncludesOwnDir = b.Sources != ""
		files, err := emit(m, t)
		if err != nil {
			return nil, err
		}
		out.Dirs[b.OutDir] = files
		if b.Sources != "" {
			if err := addSources(root, b, models, files); err != nil {
				return nil, err
			}
		}
		if b.Target.Dynamic != nil {
			// The proof travels with bindings whose headers may be absent where they are generated.
			out.Dirs[b.OutDir+"/abiproof"] = map[string][]byte{
				"proof.c": []byte("// " + genutil.Header(b.Target.Source) + "\n" + proofSource(m, b.Lib)),
			}
		}
		unbound = append(unbound, m.Unbound...)
		values := 0
		for _, e := range m.Enums {
			values += len(e.Values)
		}
		dataNote := ""
		if len(m.Data) > 0 {
			dataNote = fmt.Sprintf(", %d dataNote symbols", len(m.Data))
		}
		out.Summary = append(out.Summary, fmt.Sprintf("%s → %s: %d functions, %d handles, %d structs, %d enums (%d values)%s, %d unbound; %s",
			b.Spec, b.OutDir, len(m.Funcs), len(m.Handles), len(m.Structs), len(m.Enums), values, dataNote, len(m.Unbound), proven))
	}
	return unbound, nil
}
