#!/usr/bin/env bash
# gpu-check.sh runs toy's CUDA checks on a machine with an NVIDIA GPU, from prebuilt test
# binaries (make gpu-tests writes them to bin/gpu; the machine needs no Go), and prints one
# table: kernel, cases, max relative error against the CPU reference, time per call.
#
#   scripts/gpu-check.sh [DIR]      DIR holds cuda.test, ggml.test, decoding.test and training.test (default bin/gpu)
#
# 1. the ABI proof of the CUDA driver bindings (generated/cudadrv/abiproof/proof.c) compiled
#    against the installed cuda.h, when there is one, and NCCL's (generated/nccl/abiproof) against
#    nccl.h ($NCCL_INCLUDE, $NCCL_HOME/include, the toolkit's or /usr/include);
# 2. toy's own kernels (package cuda: argmax, sampling, AdamW) against their float64 references;
# 3. when ggml's CUDA backend library is there ($TOY_GGML_CUDA, or DIR/libggml-cuda.so), ggml's
#    op tests (package ggml) on the GPU against internal/reference, and
# 4. the decoder (package engines/decoding) on the GPU against its float64 reference, per
#    architecture, KV cache and weight type, and
# 5. training on the GPU: whole-model gradients against finite differences, one AdamW step
#    against plain Go, the evaluator against the reference, and
# 6. data-parallel training over NCCL, one rank per GPU (needs mpirun and libnccl.so.2).
# GPU_CHECK_PARTS selects parts (default "proof kernels ggml llama train nccl"); GPU_CHECK_LOGS names a
# directory that keeps each part's whole test log. It exits non-zero if any check
# fails. Keep it to one short run: device time is scarce.
set -uo pipefail
cd "$(dirname "$0")/.."
dir="${1:-bin/gpu}"
fail=0
rows=()
row() { rows+=("$(printf '%-22s %-6s %-12s %-12s %s' "$@")"); }

echo "gpu-check: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"

parts=" ${GPU_CHECK_PARTS:-proof kernels ggml llama train nccl} "
logs="${GPU_CHECK_LOGS:-}"
[ -n "$logs" ] && mkdir -p "$logs"
keep() { [ -n "$logs" ] && cp "$1" "$logs/$2.log"; rm -f "$1"; }
part() { [[ "$parts" == *" $1 "* ]]; }

# 1. The ABI proof.
inc=""
for d in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
  if [ -n "$d" ] && [ -f "$d/include/cuda.h" ]; then inc="$d/include"; break; fi
done
# prove HEADER SPEC PROOF_C INCLUDE...: compile a generated ABI proof against the header found
# in the first include directory, and report the row.
prove() {
  local header=$1 spec=$2 proof=$3; shift 3
  local flags=() d
  for d in "$@"; do flags+=(-I "$d"); done
  if out=$(${CC:-cc} -std=c11 -fsyntax-only -Wall -Werror "${flags[@]}" "$proof" 2>&1); then
    row "abi-proof ($header)" "-" "-" "-" "$spec proven against $1/$header"
  else
    echo "$out"; fail=1
    row "abi-proof ($header)" "-" "FAIL" "-" "see the compiler errors above"
  fi
}
if ! part proof; then :
elif [ -n "$inc" ]; then
  prove cuda.h specs/cuda generated/cudadrv/abiproof/proof.c "$inc"
else
  row "abi-proof (cuda.h)" "-" "skipped" "-" "no cuda.h found"
fi
nccl_inc=""
for d in "${NCCL_INCLUDE:-}" "${NCCL_HOME:+$NCCL_HOME/include}" "$inc" /usr/include; do
  if [ -n "$d" ] && [ -f "$d/nccl.h" ]; then nccl_inc="$d"; break; fi
done
if ! part proof; then :
elif [ -n "$nccl_inc" ] && [ -n "$inc" ]; then
  prove nccl.h specs/nccl generated/nccl/abiproof/proof.c "$nccl_inc" "$inc"
else
  row "abi-proof (nccl.h)" "-" "skipped" "-" "no nccl.h or cuda.h found"
fi

# 2. toy's kernels.
if ! part kernels; then :
elif [ -x "$dir/cuda.test" ]; then
  log=$(mktemp)
  "$dir/cuda.test" -test.v -test.timeout 300s -test.run 'Test(OpenWithoutDevice|PickTarget|SampleRef|Argmax|Sample|SampleValidates|AdamW)$' >"$log" 2>&1
  rc=$?
  grep -E '^\s*(cuda_test.go:[0-9]+: device|--- (FAIL|SKIP))' "$log" | sed 's/^ *//'
  while IFS= read -r line; do
    k=$(sed -n 's/.*kernel=\([^ ]*\).*/\1/p' <<<"$line")
    c=$(sed -n 's/.*cases=\([^ ]*\).*/\1/p' <<<"$line")
    e=$(sed -n 's/.*maxrel=\([^ ]*\).*/\1/p' <<<"$line")
    t=$(sed -n 's/.*time_us=\([^ ]*\).*/\1/p' <<<"$line")
    rest=$(sed -n 's/.*time_us=[^ ]* //p' <<<"$line")
    row "$k" "$c" "$e" "${t} us" "$rest"
  done < <(grep -o 'gpu-check: .*' "$log")
  if [ $rc -ne 0 ]; then fail=1; echo "--- package cuda failed:"; grep -v '^=== RUN' "$log" | tail -40; fi
  grep -q -- '--- SKIP: TestArgmax' "$log" && { row "toy kernels" "-" "skipped" "-" "no device: $(grep -o 'no CUDA device here.*' "$log" | head -1)"; fail=1; }
  keep "$log" kernels
else
  row "toy kernels" "-" "missing" "-" "$dir/cuda.test not found (make gpu-tests)"; fail=1
fi

# 3-5. Go tests on ggml's CUDA backend: one row per test, then the errors they logged.
lib="${TOY_GGML_CUDA:-$dir/libggml-cuda.so}"
backend_part() { # part name, test binary, test regexp, note
  if ! part "$1"; then return; fi
  if [ ! -x "$dir/$2" ] || [ ! -f "$lib" ]; then
    row "$1" "-" "skipped" "-" "no $dir/$2 or $lib (scripts/build-ggml-cuda.sh)"; return
  fi
  local log rc
  log=$(mktemp)
  TOY_GGML_CUDA="$lib" "$dir/$2" -test.v -test.timeout 300s -test.run "$3" >"$log" 2>&1
  rc=$?
  while IFS= read -r line; do
    name=$(awk '{print $3}' <<<"$line"); res=$(awk '{print $2}' <<<"$line"); secs=$(grep -o '([0-9.]*s)' <<<"$line")
    row "$1 ${name#Test}" "-" "${res%:}" "$secs" "$4"
  done < <(grep -E '^--- (PASS|FAIL|SKIP): Test[A-Za-z0-9]+ ' "$log")
  echo "--- $1 on CUDA, errors against the references:"
  grep -E 'relative error|max err|Error:|cannot compute|panic' "$log" | sed 's/^ *//' | head -120
  [ $rc -ne 0 ] && fail=1
  keep "$log" "$1"
}
backend_part ggml ggml.test "${GGML_TESTS:-^Test(BinaryOpsBroadcast|ScalarOps|UnaryOps|Reductions|Norms|MulMatF32|MulMatF16|MulMatQuantized|GLU|SoftMax|RopeExt|FlashAttnExt|GetRows|SetRows|CrossEntropyLoss|OptStepAdamW|CopyAndCast)$}" "CUDA backend vs internal/reference, the test's own tolerance"
backend_part llama decoding.test "${LLAMA_TESTS:-^Test(DecoderMatchesReference|DecoderKVCaches|QuantizedWeights|SortedTopK|F16Embeddings)$}" "decoder on CUDA vs the float64 reference"
backend_part sampler cuda.test '^TestTokenSampler$' "toy generate's device sampling, from ggml's logits in place, vs the host sampler"
backend_part train training.test "${TRAIN_TESTS:-^Test(GradientsMatchFiniteDifferences|AdamWStepMatchesGo|EvaluatorMatchesReference)$}" "training on CUDA vs finite differences / plain Go"
# 6. Data-parallel training with NCCL: one rank per GPU (4, 2 or 1 of them) sums its gradients on
# the device with ncclAllReduce and reproduces one trainer on one GPU; it needs Open MPI's mpirun
# and NCCL's libnccl.so.2.
if part nccl; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  export TOY_NCCL_RANKS=1
  [ "$gpus" -ge 2 ] && TOY_NCCL_RANKS=2
  [ "$gpus" -ge 4 ] && TOY_NCCL_RANKS=4
  if ! command -v mpirun >/dev/null; then
    row nccl "-" "skipped" "-" "no mpirun (Debian: openmpi-bin)"
  elif ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2' && [ -z "${LD_LIBRARY_PATH:-}" ]; then
    row nccl "-" "skipped" "-" "no libnccl.so.2 (NVIDIA's libnccl2)"
  else
    backend_part nccl training.test '^TestDataParallelOnGPUs$' "$TOY_NCCL_RANKS rank(s), one GPU each, NCCL allreduce vs one trainer"
  fi
fi

echo
printf '%-22s %-6s %-12s %-12s %s\n' kernel cases "max rel err" "time/call" notes
for r in "${rows[@]}"; do echo "$r"; done
exit $fail
