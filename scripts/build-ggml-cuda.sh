#!/usr/bin/env bash
# build-ggml-cuda.sh builds ggml's CUDA backend (libggml-cuda.so, with the libggml-base.so.0 it
# needs) from the sources of the ggml module this repository links, with cmake and nvcc, and
# copies both libraries into OUTDIR (default bin/), beside the toy binary that loads them.
#
#   scripts/build-ggml-cuda.sh [OUTDIR]
#
# GGML_MODULE_DIR names the github.com/ollama/ollama module directory (default: go list finds
# it; set it on a machine without Go, pointing at a copy of that directory). CUDA_ARCHS sets CMAKE_CUDA_ARCHITECTURES (default: "native" when a GPU is visible, else
# "80;90"); JOBS the parallel compile jobs (default: all cores). The build tree is
# build/ggml-cuda; a second run only rebuilds what changed.
#
# The library must come from these sources: ollama's patches changed ggml's backend ABI, so a
# libggml-cuda.so from elsewhere is refused or crashes. ggml builds it as a loadable backend
# (GGML_BACKEND_DL); ggml.NewBackend loads it with ggml_backend_load.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin}"

missing=()
command -v nvcc  >/dev/null 2>&1 || missing+=("nvcc (the CUDA toolkit; put its bin/ on PATH)")
command -v cmake >/dev/null 2>&1 || missing+=("cmake (3.21 or later)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-ggml-cuda.sh: ggml's CUDA backend needs: ${missing[*]}" >&2
  echo "build-ggml-cuda.sh: without them, go build -tags cuda ./cmd/toy still builds toy, which then needs a libggml-cuda.so built elsewhere from the same ggml (\$TOY_GGML_CUDA)" >&2
  exit 1
fi

mod="${GGML_MODULE_DIR:-}"
if [ -z "$mod" ]; then
  mod="$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)" || { echo "build-ggml-cuda.sh: cannot locate the ggml module (no Go? set GGML_MODULE_DIR)" >&2; exit 1; }
fi
[ -f "$mod/CMakeLists.txt" ] || { echo "build-ggml-cuda.sh: $mod has no CMakeLists.txt (run go mod download)" >&2; exit 1; }

archs="${CUDA_ARCHS:-}"
if [ -z "$archs" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then archs=native; else archs="80;90"; fi
fi
jobs="${JOBS:-$(nproc)}"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)

mkdir -p build
echo "build-ggml-cuda.sh: ggml from $mod, CUDA architectures $archs, $jobs jobs"
cmake -S "$mod" -B build/ggml-cuda "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DCMAKE_BUILD_RPATH='$ORIGIN' -DGGML_CCACHE=OFF >build/ggml-cuda.configure.log 2>&1 \
  || { tail -30 build/ggml-cuda.configure.log >&2; exit 1; }
cmake --build build/ggml-cuda --target ggml-cuda -j "$jobs"

lib=build/ggml-cuda/lib/ollama
mkdir -p "$out"
for f in "$lib"/libggml-cuda.so "$lib"/libggml-base.so*; do
  cp -P "$f" "$out/"
done
echo "build-ggml-cuda.sh: wrote $out/libggml-cuda.so (load it with a -tags cuda build of toy, from beside the binary or \$TOY_GGML_CUDA)"
