#!/usr/bin/env bash
# tests/gpu/run.sh: builds idist with the nccl backend and checks it on the GPUs of this machine.
#
#   1. configure + build (Release, IDIST_WITH_NCCL=ON) in $BUILD_DIR (default <repo>/build-gpu);
#   2. world size 1 on each visible GPU: the nccl GPU tests (idist_nccl_gpu), the conformance suite
#      (idist_conformance, IDIST_TEST_BACKEND=nccl) and the watchdog test (idist_nccl_gpu_faults);
#   3. with N >= 2 visible GPUs: the same on N ranks, one process per GPU (torchrun-style RANK /
#      LOCAL_RANK / WORLD_SIZE on 127.0.0.1), and the dead-peer test;
#   4. the LibTorch layer's tests (idist_torch_tests) on nccl and its GPU tests (idist_nccl_torch_gpu:
#      the tensor forms of reduce, gather, scatter, reduce_scatter, all_to_all, send / recv;
#      idist_torch_gpu_streams: stream ordering), at world size 1 and on N ranks, where LibTorch was
#      built with CUDA. Debian's libtorch-dev is CPU-only: then this step is skipped and says so;
#   5. the all-reduce bandwidth sweep (idist_nccl_allreduce_bw) on 1 GPU and on N ranks, then the
#      blocking all_reduce's latency against raw ncclAllReduce (--compare-raw).
#
# Exit status: 0 when every step that ran passed, 1 when one failed, 77 when no GPU is visible (after
# the build, which is checked either way).
# Environment: BUILD_DIR, PREBUILT (1: run the binaries already in $BUILD_DIR, built on another machine
# with the same CUDA major version or by tests/gpu/wheel.sh; nothing is configured or built; step 4
# runs the LibTorch GPU binaries found there, not idist_torch_tests), JOBS (build parallelism; default: number of cores), MAX_BYTES (largest size
# of the sweep, default 1G), CMAKE_ARGS (extra configure arguments), STEP_TIMEOUT (seconds per
# process, default 900), LOG_DIR (default $BUILD_DIR/gpu-logs).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$repo/build-gpu}
jobs=${JOBS:-$(nproc)}
max_bytes=${MAX_BYTES:-1G}
step_timeout=${STEP_TIMEOUT:-900}
logs=${LOG_DIR:-$build/gpu-logs}
declare -a summary=()
failed=0

say() { printf '\n=== %s\n' "$*"; }
record() {  # record <status> <what>
  summary+=("$(printf '%-8s %s' "$1" "$2")")
  [ "$1" = FAIL ] && failed=1
  return 0
}

# --- 1. build ----------------------------------------------------------------------------------
targets=(idist_nccl_gpu idist_nccl_gpu_faults idist_nccl_allreduce_bw idist_conformance)
# GPU tests of the LibTorch layer: built only against a LibTorch with CUDA (IDIST_TORCH_HAS_CUDA).
torch_gpu_targets=(idist_nccl_torch_gpu idist_torch_gpu_streams)
torch_gpu_bins=()
# has_target <name>: whether the configured build defines it (the output is captured whole, not piped
# into grep -q, which would end the lister early: SIGPIPE under pipefail).
has_target() {
  local all
  if [ -f "$build/build.ninja" ]; then all=$(ninja -C "$build" -t targets all 2>/dev/null); else all=$(make -C "$build" help 2>/dev/null); fi
  grep -qE "(^|[ .])$1(:|$)" <<<"$all"
}
if [ "${PREBUILT:-0}" = 1 ]; then
  for t in gpu/idist_nccl_gpu gpu/idist_nccl_gpu_faults gpu/idist_nccl_allreduce_bw conformance/idist_conformance; do
    [ -x "$build/tests/$t" ] || { echo "run.sh: PREBUILT=1 but $build/tests/$t is missing"; exit 1; }
  done
  torch_cuda=""
  for t in "${torch_gpu_targets[@]}"; do [ -x "$build/tests/gpu/$t" ] && torch_gpu_bins+=("$t"); done
  record PASS "prebuilt binaries in $build: ${targets[*]} ${torch_gpu_bins[*]}"
else
  say "configure and build in $build"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  # shellcheck disable=SC2086
  if ! cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DIDIST_WITH_NCCL=ON \
       -DIDIST_BUILD_EXAMPLES=OFF -DIDIST_BUILD_BENCHMARKS=OFF ${CMAKE_ARGS:-}; then
    echo "run.sh: configuring with IDIST_WITH_NCCL=ON failed (are CUDA and NCCL installed? set NCCL_ROOT / CUDAToolkit_ROOT)"
    exit 1
  fi
  torch_cuda=""
  torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  # A CUDA build of LibTorch ships libtorch_cuda.so: <libtorch>/lib (pytorch.org) or the multiarch lib dir.
  if [ -n "$torch_dir" ] && [ "$torch_dir" != "Torch_DIR-NOTFOUND" ]; then
    for lib_dir in "$torch_dir/../../../lib" "$torch_dir/../.."; do
      if ls "$lib_dir"/libtorch_cuda*.so* >/dev/null 2>&1; then torch_cuda=$(cd "$lib_dir" && pwd); fi
    done
  fi
  if [ -n "$torch_cuda" ]; then
    targets+=(idist_torch_tests)
    for t in "${torch_gpu_targets[@]}"; do has_target "$t" && torch_gpu_bins+=("$t") && targets+=("$t"); done
  fi
  if ! cmake --build "$build" -j"$jobs" --target "${targets[@]}"; then
    echo "run.sh: the build failed"
    exit 1
  fi
  record PASS "build (Release, IDIST_WITH_NCCL=ON): ${targets[*]}"
fi
bin=$build/tests
mkdir -p "$logs"

# --- GPUs ---------------------------------------------------------------------------------------
ngpu=$("$bin/gpu/idist_nccl_allreduce_bw" --count-devices 2>/dev/null || echo 0)
if [ "${ngpu:-0}" -eq 0 ]; then
  say "no CUDA device is visible (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}): nothing to run on a GPU"
  record SKIP "GPU steps: no CUDA device visible"
  printf '%s\n' "${summary[@]}"
  exit 77
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpu_ids <<<"$CUDA_VISIBLE_DEVICES"
else
  mapfile -t gpu_ids < <(seq 0 $((ngpu - 1)))
fi
say "$ngpu GPU(s) visible: ${gpu_ids[*]}"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L

# run_one <name> <gpu id> <cmd...>: one process, world size 1, on one GPU.
run_one() {
  local name=$1 gpu=$2
  shift 2
  local log="$logs/$name.log"
  env CUDA_VISIBLE_DEVICES="$gpu" RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 IDIST_TEST_BACKEND=nccl \
    timeout "$step_timeout" "$@" >"$log" 2>&1
  local rc=$?
  tail -n 25 "$log"
  case $rc in
    0) record PASS "$name" ;;
    77) record SKIP "$name (exit 77: skipped, see $log)" ;;
    *) record FAIL "$name (exit $rc, log $log)" ;;
  esac
}

# run_ranks <name> <n> <cmd...>: n processes, one per GPU (cuda:<local rank>), torchrun-style variables.
run_ranks() {
  local name=$1 n=$2
  shift 2
  local port=$((20000 + RANDOM % 20000)) pids=() rc=0 r
  for ((r = 0; r < n; r++)); do
    env RANK="$r" LOCAL_RANK="$r" WORLD_SIZE="$n" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" IDIST_TEST_BACKEND=nccl \
      timeout "$step_timeout" "$@" >"$logs/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  local codes=()
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"
    codes+=($?)
  done
  tail -n 25 "$logs/$name.rank0.log"
  for ((r = 0; r < n; r++)); do
    if [ "${codes[$r]}" -ne 0 ]; then
      rc=${codes[$r]}
      echo "--- rank $r exited with ${codes[$r]}:"
      tail -n 15 "$logs/$name.rank$r.log"
    fi
  done
  if [ "$rc" -eq 0 ]; then record PASS "$name"; else record FAIL "$name (exit codes ${codes[*]}, logs $logs/$name.rank*.log)"; fi
}

# --- 2. world size 1 per GPU ----------------------------------------------------------------------
for gpu in "${gpu_ids[@]}"; do
  say "world size 1 on GPU $gpu"
  run_one "nccl_gpu_ws1_gpu$gpu" "$gpu" "$bin/gpu/idist_nccl_gpu"
  run_one "conformance_nccl_ws1_gpu$gpu" "$gpu" "$bin/conformance/idist_conformance"
done
say "watchdog: a collective past its deadline (world size 1, timeout 3 s)"
IDIST_GPU_TEST_TIMEOUT_S=3 run_one "nccl_gpu_faults_ws1" "${gpu_ids[0]}" "$bin/gpu/idist_nccl_gpu_faults"

# --- 3. N ranks on N GPUs ---------------------------------------------------------------------------
if [ "$ngpu" -ge 2 ]; then
  say "$ngpu ranks, one per GPU"
  run_ranks "nccl_gpu_np$ngpu" "$ngpu" "$bin/gpu/idist_nccl_gpu"
  run_ranks "conformance_nccl_np$ngpu" "$ngpu" "$bin/conformance/idist_conformance"
  say "a peer that never arrives ($ngpu ranks, timeout 3 s)"
  IDIST_GPU_TEST_TIMEOUT_S=3 run_ranks "nccl_gpu_faults_np$ngpu" "$ngpu" "$bin/gpu/idist_nccl_gpu_faults"
else
  record SKIP "multi-rank runs: only 1 GPU visible (N ranks need N GPUs: NCCL refuses two ranks on one GPU)"
fi

# --- 4. the LibTorch layer on CUDA tensors ----------------------------------------------------------
if [ -n "$torch_cuda" ]; then
  say "LibTorch layer on nccl (CUDA LibTorch in $torch_cuda)"
  run_one "torch_nccl_ws1" "${gpu_ids[0]}" "$bin/torch/idist_torch_tests"
  [ "$ngpu" -ge 2 ] && run_ranks "torch_nccl_np$ngpu" "$ngpu" "$bin/torch/idist_torch_tests"
fi
for t in "${torch_gpu_bins[@]}"; do
  say "LibTorch layer's GPU test $t"
  run_one "${t#idist_}_ws1" "${gpu_ids[0]}" "$bin/gpu/$t"
  [ "$ngpu" -ge 2 ] && run_ranks "${t#idist_}_np$ngpu" "$ngpu" "$bin/gpu/$t"
done
if [ "${PREBUILT:-0}" = 1 ]; then
  [ ${#torch_gpu_bins[@]} -gt 0 ] || record SKIP "LibTorch layer on CUDA tensors: no LibTorch GPU test among the prebuilt binaries"
elif [ -z "$torch_cuda" ]; then
  say "LibTorch layer on CUDA tensors: skipped"
  echo "The LibTorch found at configure time (${torch_dir:-none}) has no CUDA (no libtorch_cuda.so beside it);"
  echo "Debian's libtorch-dev is CPU-only. Point CMAKE_ARGS=-DTorch_DIR=<libtorch with CUDA>/share/cmake/Torch to run it."
  record SKIP "LibTorch layer on CUDA tensors: LibTorch ${torch_dir:-not found} is CPU-only"
fi

# --- 5. bandwidth sweep ---------------------------------------------------------------------------
say "all-reduce bandwidth sweep, 1 GPU"
run_one "allreduce_bw_ws1" "${gpu_ids[0]}" "$bin/gpu/idist_nccl_allreduce_bw" --max-bytes "$max_bytes"
if [ "$ngpu" -ge 2 ]; then
  say "all-reduce bandwidth sweep, $ngpu ranks"
  run_ranks "allreduce_bw_np$ngpu" "$ngpu" "$bin/gpu/idist_nccl_allreduce_bw" --max-bytes "$max_bytes"
fi
say "blocking all_reduce latency against raw ncclAllReduce + cudaStreamSynchronize, 1 GPU"
run_one "allreduce_vs_raw_ws1" "${gpu_ids[0]}" "$bin/gpu/idist_nccl_allreduce_bw" --compare-raw --max-bytes 64M
if [ "$ngpu" -ge 2 ]; then
  run_ranks "allreduce_vs_raw_np$ngpu" "$ngpu" "$bin/gpu/idist_nccl_allreduce_bw" --compare-raw --max-bytes 64M
fi

say "summary (logs in $logs)"
printf '%s\n' "${summary[@]}"
exit "$failed"
