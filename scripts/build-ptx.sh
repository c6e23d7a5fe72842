#!/usr/bin/env bash
# build-ptx.sh compiles, for every cuda target kernels/<hw>/HARDWARE.toml, each CUDA source of the
# tree it names (sources = "../cuda": kernels/cuda/<dir>/<name>.cu) into the target's own
# generated/kernels/<hw>.<dir>.<name>.ptx (the only copy: the kernel table embeds it there),
# using the compiler flags the HARDWARE.toml declares
# ([[hardware.compilers]] name and flags, each on one line). The sources exist once; the PTX,
# a build output, once per target arch. The first line of each PTX records the source's sha256,
# the compiler with its version and the PTX target it produced:
#
#   // toy-ptx: source-sha256=<hex> compiler=clang-16.0.6 target=sm_90
#
# go generate (cmd/kernelgen) refuses a PTX whose source changed, whose header is missing, or
# whose target does not suit its HARDWARE.toml arch, and embeds the blobs into generated/kernels.
#
# The compiler is chosen the same way on every machine:
#   1. nvcc, when on PATH;
#   2. else clang's NVPTX back end (no CUDA toolkit needed): $CLANG when set, else clang-16, else
#      plain clang when it is version 16 or later (older clang knows no sm_90).
# COMPILER=nvcc or COMPILER=clang forces the family (CI uses COMPILER=clang CLANG=clang-16, which
# built the committed PTX). A compiler that refuses the declared flags is an error: nothing falls
# back to another arch. clang (16) cannot emit sm_90a-only features, so the sm_90a target's clang
# flags ask for sm_90, and the header says so.
# The clang flags also pin the PTX ISA version (--cuda-feature=+ptxNN): clang otherwise raises it
# to suit any CUDA toolkit it finds, and the bytes would depend on the machine.
#
#   scripts/build-ptx.sh           build all
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-ptx.sh: $*" >&2; exit 1; }

clang_major() { "$1" -dumpversion 2>/dev/null | cut -d. -f1; }

find_clang() {
  if [[ -n "${CLANG:-}" ]]; then
    command -v "$CLANG" >/dev/null 2>&1 || die "CLANG=$CLANG not found"
    [[ "$(clang_major "$CLANG")" -ge 16 ]] 2>/dev/null || die "CLANG=$CLANG is older than clang 16, which knows no sm_90"
    echo "$CLANG"
  elif command -v clang-16 >/dev/null 2>&1; then
    echo clang-16
  elif command -v clang >/dev/null 2>&1 && [[ "$(clang_major clang)" -ge 16 ]]; then
    echo clang
  else
    return 1
  fi
}

family="${COMPILER:-}"
case "$family" in
  "")
    if command -v nvcc >/dev/null 2>&1; then family=nvcc
    elif find_clang >/dev/null; then family=clang
    else die "no nvcc, and no clang 16 or later (apt-get install clang-16, or set CLANG=)"
    fi ;;
  nvcc) command -v nvcc >/dev/null 2>&1 || die "COMPILER=nvcc but nvcc is not on PATH" ;;
  clang) find_clang >/dev/null || die "COMPILER=clang but no clang 16 or later (apt-get install clang-16, or set CLANG=)" ;;
  *) die "COMPILER=$family: want nvcc or clang" ;;
esac

# bin runs the compiler; id names it with its version in the PTX header (clang-16.0.6,
# nvcc-12.4.131).
case "$family" in
  nvcc)
    bin=nvcc
    ver="$(nvcc --version | sed -n 's/.*release [0-9.]*, V\([0-9][0-9.]*\).*/\1/p' | head -n1)"
    [[ -n "$ver" ]] || die "cannot read nvcc's version"
    id="nvcc-$ver" ;;
  clang)
    bin="$(find_clang)"
    ver="$("$bin" -dumpversion)"
    [[ "$ver" =~ ^[0-9][0-9.]*$ ]] || die "cannot read $bin's version (got '$ver')"
    id="clang-$ver" ;;
esac

# flags_of HARDWARE.toml NAME prints the flags array of the [[hardware.compilers]] named NAME.
flags_of() {
  awk -v want="$2" '
    /^\[\[hardware\.compilers\]\]/ { cur = ""; next }
    /^[[:space:]]*name[[:space:]]*=/ { s = $0; sub(/^[^=]*=[[:space:]]*"/, "", s); sub(/".*$/, "", s); cur = s; next }
    /^[[:space:]]*flags[[:space:]]*=/ && cur == want { s = $0; sub(/^[^[]*\[/, "", s); sub(/\][^]]*$/, "", s); gsub(/,/, " ", s); print s }
  ' "$1"
}

# Every PTX is built into name.ptx.new first; only when all sources compiled are they moved into
# place, so a failure leaves the committed PTX as it was.
news=()
cleanup() { for n in "${news[@]}"; do rm -f "$n"; done; }
trap cleanup EXIT

# sources_of HARDWARE.toml prints its [hardware] sources (a path relative to its directory).
sources_of() {
  awk '
    /^[[:space:]]*\[/ { tbl = $0; next }
    tbl ~ /^[[:space:]]*\[hardware\][[:space:]]*(#.*)?$/ && /^[[:space:]]*sources[[:space:]]*=/ { s = $0; sub(/^[^=]*=[[:space:]]*"/, "", s); sub(/".*$/, "", s); print s }
  ' "$1"
}

built=0
for toml in kernels/*/HARDWARE.toml; do
  hw="${toml%/HARDWARE.toml}"
  grep -Eq '^[[:space:]]*backend[[:space:]]*=[[:space:]]*"cuda"' "$toml" || continue
  src="$(sources_of "$toml")"
  [[ -n "$src" ]] || continue
  tree="$(realpath -m --relative-to=. "$hw/$src")"
  [[ "$tree" == kernels/* && -d "$tree" ]] || die "$toml: sources = \"$src\" is no directory under kernels/"
  list="$(flags_of "$toml" "$family")"
  [[ -n "$list" ]] || die "$toml declares no flags for $family"
  eval "flags=($list)"
  while IFS= read -r -d '' cu; do
    rel="${cu#"$tree"/}"
    rel="${rel%.cu}"
    out="generated/kernels/${hw#kernels/}.${rel//\//.}.ptx"
    tmp="$(mktemp)"
    news+=("$out.new")
    if ! "$bin" "${flags[@]}" -o "$tmp" "$cu" 2>"$tmp.err"; then
      cat "$tmp.err" >&2; rm -f "$tmp" "$tmp.err"
      die "$cu: $id failed for $hw (flags from $toml, [[hardware.compilers]] $family)"
    fi
    rm -f "$tmp.err"
    target="$(sed -n 's/^[[:space:]]*\.target[[:space:]]\{1,\}\(sm_[0-9a-z]*\).*/\1/p' "$tmp" | head -n1)"
    [[ -n "$target" ]] || { rm -f "$tmp"; die "$cu: the PTX $id wrote for $hw has no .target line"; }
    sum="$(sha256sum "$cu" | cut -d' ' -f1)"
    { echo "// toy-ptx: source-sha256=$sum compiler=$id target=$target"; cat "$tmp"; } >"$out.new"
    rm -f "$tmp"
    built=$((built + 1))
  done < <(find "$tree" -name '*.cu' -print0 | LC_ALL=C sort -z)
done
for n in "${news[@]}"; do
  out="${n%.new}"
  if [[ -f "$out" ]] && cmp -s "$out" "$n"; then rm -f "$n"
  else mv "$n" "$out"; echo "build-ptx.sh: wrote $out ($(head -n1 "$out" | sed 's/.* target=//'))"
  fi
done
echo "build-ptx.sh: $built PTX files with $id ($bin)"
