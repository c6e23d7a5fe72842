#!/usr/bin/env bash
# build-ptx.sh compiles every CUDA kernel source kernels/cuda*/**/*.cu to PTX beside it
# (name.ptx), with nvcc when present and otherwise clang's NVPTX back end (no CUDA toolkit needed),
# using the compiler flags its target's HARDWARE.toml declares ([[hardware.compilers]] name and
# flags, each on one line). The first line of each PTX records the source's sha256 and the
# compiler that produced it; go generate (cmd/kernelgen) refuses a PTX whose source changed and
# embeds the blobs into generated/kernels.
#
#   scripts/build-ptx.sh           build all; COMPILER=clang or COMPILER=nvcc forces one
#
# clang older than 16 knows no sm_90: when clang refuses the declared arch, the PTX is built for
# the highest older arch it accepts (sm_86, sm_80), which the driver JIT-compiles; the PTX's
# .target line says which.
set -euo pipefail
cd "$(dirname "$0")/.."

compiler="${COMPILER:-}"
if [[ -z "$compiler" ]]; then
  if command -v nvcc >/dev/null 2>&1; then compiler=nvcc
  elif command -v clang >/dev/null 2>&1; then compiler=clang
  else echo "build-ptx.sh: neither nvcc nor clang found (apt-get install clang)" >&2; exit 1
  fi
fi

# flags_of HARDWARE.toml NAME prints the flags array of the [[hardware.compilers]] named NAME.
flags_of() {
  awk -v want="$2" '
    /^\[\[hardware\.compilers\]\]/ { cur = ""; next }
    /^[[:space:]]*name[[:space:]]*=/ { s = $0; sub(/^[^=]*=[[:space:]]*"/, "", s); sub(/".*$/, "", s); cur = s; next }
    /^[[:space:]]*flags[[:space:]]*=/ && cur == want { s = $0; sub(/^[^[]*\[/, "", s); sub(/\][^]]*$/, "", s); gsub(/,/, " ", s); print s }
  ' "$1"
}

built=0
for hw in kernels/cuda*/; do
  hw="${hw%/}"
  toml="$hw/HARDWARE.toml"
  list="$(flags_of "$toml" "$compiler")"
  if [[ -z "$list" ]]; then
    echo "build-ptx.sh: $toml declares no flags for $compiler" >&2; exit 1
  fi
  eval "flags=($list)"
  while IFS= read -r -d '' cu; do
    out="${cu%.cu}.ptx"
    tmp="$(mktemp)"
    case "$compiler" in
      nvcc)
        nvcc "${flags[@]}" -o "$tmp" "$cu" ;;
      clang)
        if ! clang "${flags[@]}" -o "$tmp" "$cu" 2>"$tmp.err"; then
          if grep -q "unsupported CUDA gpu architecture" "$tmp.err"; then
            ok=
            for fallback in sm_86 sm_80; do
              f2=("${flags[@]/--cuda-gpu-arch=*/--cuda-gpu-arch=$fallback}")
              if clang "${f2[@]}" -o "$tmp" "$cu" 2>/dev/null; then
                echo "build-ptx.sh: $cu: this clang does not know the declared arch; built $fallback PTX (JIT-compiled by the driver)" >&2
                ok=1; break
              fi
            done
            [[ -n "$ok" ]] || { cat "$tmp.err" >&2; exit 1; }
          else
            cat "$tmp.err" >&2; exit 1
          fi
        fi
        rm -f "$tmp.err" ;;
      *) echo "build-ptx.sh: unknown compiler $compiler" >&2; exit 1 ;;
    esac
    sum="$(sha256sum "$cu" | cut -d' ' -f1)"
    { echo "// toy-ptx: source-sha256=$sum compiler=$compiler"; cat "$tmp"; } >"$out.new"
    rm -f "$tmp"
    if [[ -f "$out" ]] && cmp -s "$out" "$out.new"; then rm -f "$out.new"; else mv "$out.new" "$out"; echo "build-ptx.sh: wrote $out"; fi
    built=$((built + 1))
  done < <(find "$hw" -name '*.cu' -print0 | sort -z)
done
echo "build-ptx.sh: $built sources with $compiler"
