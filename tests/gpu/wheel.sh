#!/usr/bin/env bash
# tests/gpu/wheel.sh: the whole GPU check in one command, on a machine that has NVIDIA GPUs, CUDA
# (nvcc), CMake, ninja, a C++20 compiler and Python with PyTorch's wheel (torch built with CUDA and the
# nvidia-nccl wheel) but none of idist's other dependencies and no network. Those come from the kit
# folder that tests/gpu/prepare-kit.sh fills (default <repo>/.gpukit: prefix/ with fmt, CLI11,
# GoogleTest, zlib and Asio; data/ with Fashion-MNIST). Steps, each under a timeout:
#
#   machine      what was found: GPUs, driver, nvcc, compiler, CMake, torch, Torch_DIR, NCCL, kit, data
#   configure    Release, the nccl backend and the LibTorch layer against the wheel (MPI, Gloo off)
#   build        libidist, idist_torch, the example and the GPU, conformance and bandwidth checks
#   run.sh       tests/gpu/run.sh on that build (PREBUILT=1): the nccl GPU tests, conformance, the
#                watchdog, the LibTorch layer's GPU tests, at world size 1 and on N ranks with N GPUs;
#                the bandwidth sweep and the latency against raw NCCL
#   example      examples/fashion_mnist under the wheel's torchrun (--standalone, --backend nccl)
#   ddp          PyTorch's DDP on the same job on the same GPU(s): benchmarks/peers/ddp_fashion_mnist.py
#                --device cuda under torchrun, with the example's threads per rank
#   torch_tests  the LibTorch layer's tests (idist_torch_tests) on nccl at world size 1, built after
#                the timed runs so that the build does not share the CPUs with them
#
# then one summary (each step PASS / FAIL / SKIP, the example's and DDP's images/s and test accuracy,
# their ratio), written with the JSON lines, the log and the step logs to
#   $OUT/benchmarks/results/gpu/<date>-<short commit>/  when OUT is set (what a device machine returns)
#   <repo>/benchmarks/results/gpu/<date>-<short commit>/ otherwise.
#
# Usage: tests/gpu/wheel.sh [--check | --stop-after configure|build | --no-build]
#   --check       report what was found and stop: exit 0 when the run has everything it needs
#   --stop-after  stop after that step (a build check without a GPU)
#   --no-build    use the binaries already in WHEEL_BUILD (configured and built elsewhere)
# Environment: WHEEL_BUDGET_S (whole run, default 420 s; each step's timeout is cut to what is left),
#   WHEEL_KIT (default <repo>/.gpukit), WHEEL_BUILD (default <repo>/build-wheel), WHEEL_JOBS (default:
#   cores), WHEEL_PYTHON (a python whose torch has CUDA; default: the first found), WHEEL_TORCH_DIR (a
#   TorchConfig.cmake folder), WHEEL_NCCL_ROOT (a folder with include/nccl.h and lib/libnccl.so*),
#   WHEEL_DATA (the four .gz files), WHEEL_NPROC (ranks of the example and DDP, default 1),
#   WHEEL_EPOCHS (default 1), WHEEL_MAX_BYTES (largest size of the bandwidth sweep, default 256M),
#   WHEEL_CMAKE_ARGS (extra configure arguments), TORCH_CUDA_ARCH_LIST (default: the first GPU's).
# Exit status: 0 when no step failed, 1 otherwise.
set -uo pipefail

T0=$(date +%s)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUDGET=${WHEEL_BUDGET_S:-420}
DEADLINE=$((T0 + BUDGET))
KIT=${WHEEL_KIT:-$REPO/.gpukit}
BUILD=${WHEEL_BUILD:-$REPO/build-wheel}
JOBS=${WHEEL_JOBS:-$(nproc)}
NPROC=${WHEEL_NPROC:-1}
EPOCHS=${WHEEL_EPOCHS:-1}
MODE=run
case "${1:-}" in
  "") ;;
  --check) MODE=check ;;
  --no-build) MODE=no-build ;;
  -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
  --stop-after)
    case "${2:-}" in
      configure | build) MODE=stop-after-$2 ;;
      *) echo "wheel.sh: --stop-after takes configure or build, not '${2:-}'" >&2 && exit 2 ;;
    esac ;;
  *) echo "wheel.sh: unknown argument '$1' (expected --check, --stop-after configure|build or --no-build)" >&2 && exit 2 ;;
esac

# --- results folder and log ---------------------------------------------------------------------------
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || true)
COMMIT_NOTE="git"
if [ -z "$COMMIT" ]; then  # a copy of the checkout without .git: the commit the kit was made at
  COMMIT=$(cat "$KIT/COMMIT" 2>/dev/null || echo unknown)
  COMMIT_NOTE="recorded by prepare-kit.sh; the checkout may be newer"
fi
CHANGES=$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null) &&
  CHANGES="$(grep -c . <<<"$CHANGES") tracked file(s) changed" || CHANGES="changes unknown"
RUN=$BUILD/wheel-run  # scratch: step logs, the example's working folder
# A full run keeps its results; --check and --stop-after only log to the scratch folder.
RESULTS=$RUN
if [ "$MODE" = run ] || [ "$MODE" = no-build ]; then
  RESULTS=${OUT:+$OUT/}benchmarks/results/gpu/$(date -u +%Y-%m-%d)-$COMMIT
  [ -n "${OUT:-}" ] || RESULTS=$REPO/$RESULTS
fi
mkdir -p "$RESULTS" "$RUN"
exec > >(tee "$RESULTS/wheel.log") 2>&1
TEE_PID=$!
exec 3>&1  # run_step's own lines, wherever the step's output goes

say() { printf '\n=== [%4ds] %s\n' "$(($(date +%s) - T0))" "$*"; }
left() { echo $((DEADLINE - $(date +%s))); }
# limit <max> [reserve]: a step's timeout: at most <max> s, and what is left minus <reserve> for later steps.
limit() {
  local l=$(($(left) - ${2:-0}))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 5 ] && l=5
  echo "$l"
}
# run_step <seconds> <cmd...>: the command under timeout (TERM, then KILL 10 s later); its status.
run_step() {
  local t=$1 rc
  shift
  echo "+ (timeout ${t}s) $*" >&3
  timeout -k 10 "$t" "$@"
  rc=$?
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && echo "!!! timed out after ${t}s: $1" >&3
  return "$rc"
}
STEPS=()
declare -A STATUS=() DETAIL=()
# record <step> <PASS|FAIL|SKIP> <detail>
record() {
  STEPS+=("$1")
  STATUS[$1]=$2
  DETAIL[$1]=$3
  echo "--> $1: $2 $3"
}

# --- machine --------------------------------------------------------------------------------------------
say "machine (mode $MODE, budget ${BUDGET}s, results in $RESULTS)"
MISSING=()
uname -srm
grep -E '^PRETTY_NAME=' /etc/os-release 2>/dev/null
echo "cores: $(nproc)"
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -8
  NGPU=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
else
  echo "nvidia-smi: not found"
fi
[ "$NGPU" -gt 0 ] || MISSING+=("a GPU (nvidia-smi lists none)")
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do [ -x "$c" ] && NVCC=$c && break; done
if [ -n "$NVCC" ]; then
  CUDA_ROOT=$(cd "$(dirname "$(readlink -f "$NVCC")")/.." && pwd)
  echo "nvcc: $NVCC ($("$NVCC" --version | grep -o 'release [0-9.]*'))"
else
  CUDA_ROOT=/usr/local/cuda
  MISSING+=("nvcc")
  echo "nvcc: not found"
fi
for tool in c++ cmake ninja timeout; do
  command -v "$tool" >/dev/null 2>&1 || MISSING+=("$tool")
done
echo "$(c++ --version 2>&1 | head -1); $(cmake --version 2>&1 | head -1); ninja $(ninja --version 2>&1)"

# A python whose torch has CUDA: WHEEL_PYTHON, else the first of these (one with CPU-only torch as a last resort).
PY=""
for c in ${WHEEL_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
  command -v "$c" >/dev/null 2>&1 || continue
  if timeout 60 "$c" -c 'import sys, torch; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then PY=$c && break; fi
  [ -z "$PY" ] && timeout 60 "$c" -c 'import torch' 2>/dev/null && PY=$c
done
TORCH_CUDA=""
if [ -n "$PY" ]; then
  PY=$(command -v "$PY")
  echo "python: $PY"
  timeout 60 "$PY" - <<'EOF' 2>&1
import torch
print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| cuda available", torch.cuda.is_available(),
      "| devices", torch.cuda.device_count())
try:
    print("torch's NCCL", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("torch's NCCL: unknown (" + type(e).__name__ + ")")
EOF
  TORCH_CUDA=$(timeout 60 "$PY" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null)
  [ -n "$TORCH_CUDA" ] || MISSING+=("a torch built with CUDA ($PY has a CPU-only torch)")
else
  echo "python: none with torch"
  MISSING+=("a python with torch")
fi

TORCH_DIR=${WHEEL_TORCH_DIR:-}
[ -z "$TORCH_DIR" ] && [ -n "$PY" ] &&
  TORCH_DIR=$(timeout 60 "$PY" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))' 2>/dev/null)
TORCH_LIB=""
if [ -f "$TORCH_DIR/TorchConfig.cmake" ]; then
  TORCH_LIB=$(cd "$TORCH_DIR/../../../lib" 2>/dev/null && pwd)
  echo "Torch_DIR: $TORCH_DIR (lib: ${TORCH_LIB:-?}, $(ls "$TORCH_LIB"/libtorch_cuda.so >/dev/null 2>&1 && echo with || echo WITHOUT) libtorch_cuda.so)"
else
  echo "Torch_DIR: none (no TorchConfig.cmake in '${TORCH_DIR}')"
  MISSING+=("TorchConfig.cmake")
fi

# NCCL: a folder with include/nccl.h and a libnccl.so* beside it. The wheel's first (the library torch
# itself loads), then the CUDA toolkit's and the system's.
nccl_candidates() {
  [ -n "${WHEEL_NCCL_ROOT:-}" ] && echo "$WHEEL_NCCL_ROOT"
  [ -n "$PY" ] && timeout 60 "$PY" - <<'EOF' 2>/dev/null
import glob, os, site
seen = []
def add(p):
    p = os.path.realpath(p)
    if p not in seen:
        seen.append(p)
try:
    import nvidia.nccl as m  # a namespace package in some wheels, a regular one in others
    for p in list(getattr(m, "__path__", [])) + ([os.path.dirname(m.__file__)] if getattr(m, "__file__", None) else []):
        add(p)
except Exception:
    pass
dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
try:
    import torch
    dirs.append(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    pass
for d in dirs:
    for h in glob.glob(os.path.join(d, "nvidia", "**", "nccl.h"), recursive=True):
        add(os.path.dirname(os.path.dirname(h)))
print("\n".join(seen))
EOF
  printf '%s\n' "$CUDA_ROOT" /usr/local/cuda /usr
}
NCCL_SRC="" NCCL_SRC_LIB=""
while read -r cand; do
  [ -n "$cand" ] && [ -f "$cand/include/nccl.h" ] || continue
  for l in lib lib64 lib/x86_64-linux-gnu targets/x86_64-linux/lib; do
    if ls "$cand/$l"/libnccl.so* >/dev/null 2>&1; then NCCL_SRC=$cand NCCL_SRC_LIB=$cand/$l && break 2; fi
  done
done < <(nccl_candidates)
if [ -n "$NCCL_SRC" ]; then
  echo "NCCL: $NCCL_SRC (nccl.h $(grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL_SRC/include/nccl.h" | awk '{printf "%s.", $3}' | sed 's/\.$//'); $(cd "$NCCL_SRC_LIB" && ls libnccl.so* | tr '\n' ' '))"
else
  echo "NCCL: not found (no include/nccl.h with a libnccl.so* beside it)"
  MISSING+=("NCCL")
fi

P=$KIT/prefix
for f in fmt/include/fmt/format.h cli11/include/CLI/CLI.hpp gtest/include/gtest/gtest.h zlib/include/zlib.h asio/include/asio.hpp; do
  [ -f "$P/$f" ] || MISSING+=("$P/$f (run tests/gpu/prepare-kit.sh)")
done
echo "kit: $KIT ($(ls "$P" 2>/dev/null | tr '\n' ' '))"
DATA=${WHEEL_DATA:-}
if [ -z "$DATA" ]; then
  DATA=/usr/share/datasets/fashion-mnist
  [ -s "$KIT/data/train-images-idx3-ubyte.gz" ] && DATA=$KIT/data
fi
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -s "$DATA/$f.gz" ] || MISSING+=("$DATA/$f.gz")
done
if [ -f "$DATA/SHA256SUMS" ]; then
  (cd "$DATA" && sha256sum --quiet -c SHA256SUMS) && echo "data: $DATA (checksums match)" || MISSING+=("data whose checksums match ($DATA)")
else
  echo "data: $DATA"
fi
echo "commit: $COMMIT ($COMMIT_NOTE; $CHANGES)"
if [ ${#MISSING[@]} -eq 0 ]; then record machine PASS "$NGPU GPU(s), torch CUDA $TORCH_CUDA"; else record machine FAIL "missing: $(IFS=';' && echo "${MISSING[*]}")"; fi

finish() {
  say "end (exit $1)"
  exec 1>&- 2>&- 3>&-  # tee ends once no one holds the pipe
  wait "$TEE_PID" 2>/dev/null
  exit "$1"
}
[ "$MODE" = check ] && finish $((${#MISSING[@]} > 0))

# --- environment of the build and the runs -----------------------------------------------------------------
if [ -n "$NCCL_SRC" ]; then
  # idist's FindNCCL looks for libnccl.so; the wheel has only libnccl.so.2: a root of links.
  NCCL_STAGE=$RUN/nccl
  rm -rf "$NCCL_STAGE" && mkdir -p "$NCCL_STAGE/lib"
  ln -s "$NCCL_SRC/include" "$NCCL_STAGE/include"
  for f in "$NCCL_SRC_LIB"/libnccl.so*; do ln -s "$f" "$NCCL_STAGE/lib/$(basename "$f")"; done
  real=$(ls "$NCCL_SRC_LIB"/libnccl.so.2* 2>/dev/null | head -1)
  [ -e "$NCCL_STAGE/lib/libnccl.so" ] || ln -s "${real:-$(ls "$NCCL_SRC_LIB"/libnccl.so* | head -1)}" "$NCCL_STAGE/lib/libnccl.so"
  export NCCL_ROOT=$NCCL_STAGE
fi
# The wheel's CUDA libraries (nvidia/*/lib): the linker resolves libtorch_cuda.so's own needs through them.
NV_LIBS=""
[ -n "$PY" ] && NV_LIBS=$(timeout 60 "$PY" - <<'EOF' 2>/dev/null
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(site, "nvidia", "**", "lib", "*.so*"), recursive=True)})))
EOF
)
export LD_LIBRARY_PATH="${NCCL_ROOT:+$NCCL_ROOT/lib:}$P/fmt/lib/x86_64-linux-gnu${TORCH_LIB:+:$TORCH_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # CMake 4 refuses the kit's configs' old cmake_policy ranges otherwise
# Torch's CMake config probes the GPU's architecture unless told: the first GPU's compute capability.
CAP=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-${CAP:-9.0}}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST"

# --- configure and build ---------------------------------------------------------------------------------
# Phase 1: what run.sh, the example and DDP need; phase 2 (after them): the LibTorch layer's tests.
PHASE1=(idist idist_torch fashion_mnist idist_nccl_gpu idist_nccl_gpu_faults idist_nccl_allreduce_bw idist_conformance
  idist_nccl_torch_gpu idist_torch_gpu_streams)
PHASE2=(idist_torch_tests)
EX_BIN=$BUILD/examples/fashion_mnist/fashion_mnist
TT_BIN=$BUILD/tests/torch/idist_torch_tests
# build_targets <step> <seconds> <targets...>: the targets this configuration defines (-k 0: one that
# fails does not stop the others), recorded as <step>.
build_targets() {
  local step=$1 t=$2 x known rc missing=()
  shift 2
  local targets=()
  known=$(ninja -C "$BUILD" -t targets all 2>/dev/null)  # captured whole: grep -q on a pipe + pipefail = SIGPIPE
  for x in "$@"; do
    if grep -q "^$x: " <<<"$known"; then targets+=("$x"); else echo "target $x: not in this configuration"; fi
  done
  [ ${#targets[@]} -gt 0 ] || { record "$step" FAIL "no target to build" && return 1; }
  run_step "$t" cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" -- -k 0
  rc=$?
  for x in "${targets[@]}"; do
    case $x in
      idist) [ -e "$BUILD/src/libidist.so" ] || missing+=("$x") ;;
      idist_torch) [ -e "$BUILD/src/torch/libidist_torch.so" ] || missing+=("$x") ;;
      *) [ -n "$(find "$BUILD" -name "$x" -type f -perm -u+x 2>/dev/null | head -1)" ] || missing+=("$x") ;;
    esac
  done
  if [ "$rc" -eq 0 ]; then
    record "$step" PASS "${targets[*]}"
  else
    record "$step" FAIL "exit $rc; not built: ${missing[*]:-?}"
  fi
  return "$rc"
}
if [ "$MODE" != no-build ]; then
  say "configure $BUILD"
  cfg=(-S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIDIST_WITH_MPI=OFF -DIDIST_WITH_GLOO=OFF
    -DIDIST_WITH_NCCL=ON -DIDIST_WITH_TORCH=ON -DIDIST_BUILD_TESTS=ON -DIDIST_BUILD_EXAMPLES=ON
    -DIDIST_BUILD_BENCHMARKS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON
    "-DCMAKE_PREFIX_PATH=$P/fmt;$P/cli11;$P/gtest;$P/zlib;$P/asio" "-DTorch_DIR=$TORCH_DIR"
    "-DCUDAToolkit_ROOT=$CUDA_ROOT")
  [ -n "$NVCC" ] && cfg+=("-DCMAKE_CUDA_COMPILER=$NVCC")
  if [ -n "$NV_LIBS" ]; then
    rpl="-Wl,-rpath-link,${NV_LIBS//:/ -Wl,-rpath-link,}"
    cfg+=("-DCMAKE_EXE_LINKER_FLAGS=$rpl" "-DCMAKE_SHARED_LINKER_FLAGS=$rpl")
  fi
  # shellcheck disable=SC2086  # WHEEL_CMAKE_ARGS: words on purpose
  if run_step "$(limit 120 240)" cmake "${cfg[@]}" ${WHEEL_CMAKE_ARGS:-} >"$RUN/configure.log" 2>&1; then
    record configure PASS "$(grep -o 'LibTorch with CUDA = [A-Z]*' "$RUN/configure.log" | head -1)"
  else
    tail -n 40 "$RUN/configure.log"
    record configure FAIL "see configure.log"
  fi
  grep -E 'idist:|Torch|NCCL' "$RUN/configure.log" | head -20
  grep -E '^(fmt_DIR|CLI11_DIR|GTest_DIR|ZLIB_LIBRARY[A-Z_]*|Torch_DIR|NCCL_INCLUDE_DIR|NCCL_LIBRARY):' "$BUILD/CMakeCache.txt" 2>/dev/null
  [ "$MODE" = stop-after-configure ] && finish "$([ "${STATUS[configure]}" = PASS ] && echo 0 || echo 1)"
  if [ "${STATUS[configure]}" = PASS ]; then
    say "build, phase 1: ${PHASE1[*]}"
    build_targets build "$(limit 300 150)" "${PHASE1[@]}" >"$RUN/build.log" 2>&1
    grep -E '^(FAILED|ninja: build stopped)|error:' "$RUN/build.log" | head -20
    echo "--> build: ${STATUS[build]} ${DETAIL[build]}"
  fi
  if [ "$MODE" = stop-after-build ]; then
    say "build, phase 2: ${PHASE2[*]}"
    build_targets build_torch_tests "$(limit 600)" "${PHASE2[@]}" >"$RUN/build2.log" 2>&1
    grep -E '^(FAILED|ninja: build stopped)|error:' "$RUN/build2.log" | head -20
    echo "--> build_torch_tests: ${STATUS[build_torch_tests]} ${DETAIL[build_torch_tests]}"
    finish "$([ "${STATUS[build]:-}" = PASS ] && [ "${STATUS[build_torch_tests]}" = PASS ] && echo 0 || echo 1)"
  fi
fi

# The wheel's torchrun: the one beside this python, else its module (the same entry point).
TORCHRUN=("${PY:-python3}" -m torch.distributed.run)
[ -n "$PY" ] && [ -x "$(dirname "$PY")/torchrun" ] && TORCHRUN=("$(dirname "$PY")/torchrun")
echo "torchrun: ${TORCHRUN[*]}"

# --- tests/gpu/run.sh on that build -------------------------------------------------------------------------
say "tests/gpu/run.sh (PREBUILT=1, BUILD_DIR=$BUILD)"
if [ -x "$BUILD/tests/gpu/idist_nccl_gpu" ]; then
  BUILD_DIR=$BUILD PREBUILT=1 LOG_DIR=$RUN/gpu-logs MAX_BYTES=${WHEEL_MAX_BYTES:-256M} STEP_TIMEOUT=60 \
    run_step "$(limit 150 120)" bash "$REPO/tests/gpu/run.sh" >"$RUN/runsh.log" 2>&1
  rc=$?
  RUNSH_LINES=$(sed -n '/^=== summary/,$p' "$RUN/runsh.log" | grep -E '^(PASS|FAIL|SKIP) ')
  case $rc in
    0) record run.sh PASS "$(grep -c '^PASS' <<<"$RUNSH_LINES") passed, $(grep -c '^SKIP' <<<"$RUNSH_LINES") skipped" ;;
    77) record run.sh SKIP "no GPU visible to the tests" ;;
    *) record run.sh FAIL "exit $rc$([ -z "$RUNSH_LINES" ] && echo ' (no summary: see runsh.log)')" ;;
  esac
  [ -z "$RUNSH_LINES" ] && tail -n 25 "$RUN/runsh.log"
  [ -n "$RUNSH_LINES" ] && sed 's/^/    /' <<<"$RUNSH_LINES"
  tail -n 20 "$RUN/gpu-logs/allreduce_vs_raw_ws1.log" 2>/dev/null  # the blocking all_reduce against raw NCCL
else
  record run.sh FAIL "no build ($BUILD/tests/gpu/idist_nccl_gpu is missing)"
fi

# --- the example and DDP, one after the other on the same GPU(s) -------------------------------------------------
json_of() { grep '^{"world_size"' "$1" 2>/dev/null | tail -1; }
say "example: fashion_mnist under torchrun --standalone --nproc_per_node $NPROC, backend nccl"
EXAMPLE_JSON=""
if [ -x "$EX_BIN" ]; then
  mkdir -p "$RUN/example"
  (cd "$RUN/example" && run_step "$(limit 120 90)" "${TORCHRUN[@]}" --standalone --nproc_per_node "$NPROC" --no_python \
    "$EX_BIN" --backend nccl --data-dir "$DATA" --epochs "$EPOCHS") >"$RUN/example.out" 2>"$RUN/example.err"
  rc=$?
  tail -n 15 "$RUN/example.err"
  EXAMPLE_JSON=$(json_of "$RUN/example.out")
  if [ "$rc" -eq 0 ] && [ -n "$EXAMPLE_JSON" ]; then record example PASS ""; else record example FAIL "exit $rc$([ -z "$EXAMPLE_JSON" ] && echo ', no JSON line')"; fi
else
  record example FAIL "no binary ($EX_BIN)"
fi

say "ddp: benchmarks/peers/ddp_fashion_mnist.py --device cuda under torchrun, backend nccl"
DDP_JSON=""
threads=$(sed -n 's/.*"threads_per_rank": \([0-9]*\).*/\1/p' <<<"$EXAMPLE_JSON")
if [ -n "$TORCH_CUDA" ]; then
  PYTHONUNBUFFERED=1 run_step "$(limit 150 60)" "${TORCHRUN[@]}" --standalone --nproc_per_node "$NPROC" \
    "$REPO/benchmarks/peers/ddp_fashion_mnist.py" --nproc 0 --device cuda --backend nccl --data-dir "$DATA" \
    --epochs "$EPOCHS" --threads "${threads:-1}" >"$RUN/ddp.out" 2>"$RUN/ddp.err"
  rc=$?
  tail -n 15 "$RUN/ddp.err"
  DDP_JSON=$(json_of "$RUN/ddp.out")
  if [ "$rc" -eq 0 ] && [ -n "$DDP_JSON" ]; then record ddp PASS "threads ${threads:-1}"; else record ddp FAIL "exit $rc$([ -z "$DDP_JSON" ] && echo ', no JSON line')"; fi
else
  record ddp SKIP "no torch with CUDA"
fi

# --- the LibTorch layer's tests on nccl, world size 1 -------------------------------------------------------------
say "torch_tests: idist_torch_tests on nccl, world size 1"
if [ "$MODE" != no-build ] && [ "${STATUS[configure]:-}" = PASS ]; then
  if [ "$(left)" -gt 60 ]; then
    build_targets build_torch_tests "$(limit 240 40)" "${PHASE2[@]}" >"$RUN/build2.log" 2>&1
    grep -E '^(FAILED|ninja: build stopped)|error:' "$RUN/build2.log" | head -20
    echo "--> build_torch_tests: ${STATUS[build_torch_tests]} ${DETAIL[build_torch_tests]}"
  else
    record build_torch_tests SKIP "$(left)s left of the budget"
  fi
fi
if [ -x "$TT_BIN" ] && [ "$(left)" -gt 15 ]; then
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 IDIST_TEST_BACKEND=nccl \
    run_step "$(limit 150 10)" "$TT_BIN" >"$RUN/torch_tests.log" 2>&1
  rc=$?
  # gtest names a failed test twice (with its time, then in the list at the end): counted once.
  failed_tests=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$RUN/torch_tests.log" | sed 's/ (.*//' | sort -u)
  [ -n "$failed_tests" ] && head -n 40 <<<"$failed_tests"
  [ "$rc" -ne 0 ] && [ -z "$failed_tests" ] && tail -n 15 "$RUN/torch_tests.log"  # ended before gtest's report
  counts="$(grep -cE '^\[       OK \]' "$RUN/torch_tests.log") passed, $(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$RUN/torch_tests.log") skipped, $(grep -c . <<<"$failed_tests") failed"
  if [ "$rc" -eq 0 ]; then record torch_tests PASS "$counts"; else record torch_tests FAIL "exit $rc: $counts"; fi
else
  record torch_tests SKIP "$([ -x "$TT_BIN" ] && echo "$(left)s left of the budget" || echo "no binary")"
fi

# --- summary ------------------------------------------------------------------------------------------------------
say "summary"
[ -n "$EXAMPLE_JSON" ] && echo "$EXAMPLE_JSON" >"$RESULTS/example.json"
[ -n "$DDP_JSON" ] && echo "$DDP_JSON" >"$RESULTS/ddp.json"
for f in runsh.log example.err ddp.err torch_tests.log configure.log build.log build2.log; do
  [ -f "$RUN/$f" ] && cp "$RUN/$f" "$RESULTS/"
done
[ -d "$RUN/gpu-logs" ] && tar -czf "$RESULTS/gpu-logs.tar.gz" -C "$RUN" gpu-logs
{
  echo "idist GPU check (tests/gpu/wheel.sh), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT ($COMMIT_NOTE; $CHANGES)"
  echo "device: $(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo none); GPUs: $NGPU; torch $(timeout 60 "$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none); $(($(date +%s) - T0)) s of a ${BUDGET} s budget"
  for s in "${STEPS[@]}"; do
    printf '%-6s %-18s %s\n' "${STATUS[$s]}" "$s" "${DETAIL[$s]}"
    [ "$s" = run.sh ] && [ -n "${RUNSH_LINES:-}" ] && sed 's/^/         /' <<<"$RUNSH_LINES"
  done
  timeout 60 "${PY:-python3}" - "$EXAMPLE_JSON" "$DDP_JSON" <<'EOF'
import json, sys
def load(s):
    try:
        return json.loads(s)
    except ValueError:
        return None
e, d = load(sys.argv[1]), load(sys.argv[2])
for name, j in (("example", e), ("ddp", d)):
    if j:
        print(f"{name + ':':9} {j['images_per_s']} images/s, test accuracy {j['test_accuracy']}, "
              f"{j['world_size']} rank(s), {j.get('threads_per_rank', '?')} thread(s) per rank, {j.get('epochs', '?')} epoch(s)")
    else:
        print(f"{name + ':':9} no result")
if e and d and d["images_per_s"]:
    print(f"ratio:    example / DDP images/s = {e['images_per_s'] / d['images_per_s']:.3f}")
else:
    print("ratio:    n/a")
EOF
  echo "files: $RESULTS"
} | tee "$RESULTS/summary.txt"
FAILED=0
for s in "${STEPS[@]}"; do [ "${STATUS[$s]}" = FAIL ] && FAILED=1; done
finish "$FAILED"
