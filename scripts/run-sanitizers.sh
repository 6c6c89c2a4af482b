#!/usr/bin/env bash
# Sanitizer runs of the suite without LibTorch (nothing of LibTorch is instrumented):
#   1. ASan + UBSan (build-asan/): every test but the emulated cluster, the install test (it builds a
#      consumer against an installed, uninstrumented idist), the benchmarks' smoke runs and the style
#      and docs checks (scripts that run no instrumented code);
#   2. TSan (build-tsan/): the gloo, store and launcher tests (only their executables are built).
# Suppressions (scripts/sanitizers/*.supp) cover only Open MPI and Gloo internals, each with its reason.
# Instrumented code runs several times slower, so the tests' upper bounds on durations are scaled
# (IDIST_TEST_TIME_SCALE, tests/support/time_scale.hpp): 3 under ASan + UBSan, 5 under TSan (its
# shadow-memory bookkeeping costs more, and Gloo's threads make it pay most); lower bounds never scale.
# Usage: scripts/run-sanitizers.sh [asan|tsan|all] [--build-only]   (default all; --build-only configures
#   and builds, runs nothing: run-tests.sh does that at idle priority while ctest runs).
#   Environment: JOBS (default nproc), ASAN_TIME_SCALE / TSAN_TIME_SCALE to change those factors.
# Exits non-zero when a test fails or a sanitizer reports.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
what="${1:-all}"
build_only=0
[[ "${2:-}" == --build-only ]] && build_only=1
[[ -z "${2:-}" || $build_only == 1 ]] || { echo "usage: $0 [asan|tsan|all] [--build-only]" >&2; exit 2; }
supp="$root/scripts/sanitizers"
common=(-G Ninja -DIDIST_BUILD_TESTS=ON -DIDIST_BUILD_EXAMPLES=OFF -DIDIST_BUILD_BENCHMARKS=OFF
        -DIDIST_WITH_TORCH=OFF -DIDIST_WITH_NCCL=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
status=0

run_asan() {
  local build="$root/build-asan"
  cmake -S "$root" -B "$build" "${common[@]}" -DIDIST_SANITIZE=address,undefined
  cmake --build "$build" -j"$jobs"
  ((build_only)) && return
  # detect_leaks=0: Open MPI's and hwloc's allocations made in MPI_Init live until exit by design and
  # are reported as leaks by LeakSanitizer in every mpirun-launched process; idist's own leaks are
  # still covered by ASan's heap checks in the non-MPI tests, which run with leak detection on below.
  # abort_on_error / halt_on_error: a report fails the test instead of scrolling by.
  local asan="halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=0"
  local ubsan="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
  export IDIST_TEST_TIME_SCALE="${ASAN_TIME_SCALE:-3}"
  (cd "$build" && ASAN_OPTIONS="$asan:detect_leaks=1:suppressions=$supp/asan.supp" \
       LSAN_OPTIONS="suppressions=$supp/lsan.supp" UBSAN_OPTIONS="$ubsan" \
       ctest --output-on-failure -E '^(cluster_|install_|bench_|style_|docs_)|mpi' ) || status=1
  (cd "$build" && ASAN_OPTIONS="$asan:detect_leaks=0:suppressions=$supp/asan.supp" UBSAN_OPTIONS="$ubsan" \
       ctest --output-on-failure -R 'mpi' -E '^(cluster_|install_|bench_|style_|docs_)' ) || status=1
}

# test_executables <build> <ctest regex>: the executables (ninja outputs, relative to <build>) that the
# commands of the matching tests name, read from the CTestTestfile.cmake files (ctest itself leaves out
# the command of a test whose executable is not built yet), so that a build can compile only those.
test_executables() {
  local build=$1 regex=$2
  find "$build" -name CTestTestfile.cmake -print0 | xargs -0 cat | python3 -c '
import os, re, sys
build, regex, outputs = sys.argv[1], re.compile(sys.argv[2]), set(sys.argv[3].split())
found = set()
for line in sys.stdin:
    m = re.match(r"add_test\(\[(=*)\[(.*?)\]\1\]\s+(.*)\)\s*$", line)
    if not m or not regex.search(m.group(2)):
        continue
    for arg in re.findall(r"\"((?:[^\"\\]|\\.)*)\"|\[(=*)\[(.*?)\]\2\]", m.group(3)):
        for part in (arg[0] or arg[2]).split(";"):
            if os.path.isabs(part) and os.path.relpath(part, build) in outputs:
                found.add(os.path.relpath(part, build))
print("\n".join(sorted(found)))' "$build" "$regex" \
    "$(ninja -C "$build" -t targets all | sed -n -E 's/^([^:]+): CXX_EXECUTABLE_LINKER.*/\1/p')"
}

run_tsan() {
  local build="$root/build-tsan"
  local tests='^(gloo_|store_|launcher_)'
  cmake -S "$root" -B "$build" "${common[@]}" -DIDIST_SANITIZE=thread
  # Only the executables of the tests TSan runs (a test whose executable were missing would fail).
  local executables
  mapfile -t executables < <(test_executables "$build" "$tests")
  if ((${#executables[@]} == 0)); then
    echo "run-sanitizers: no executable found for the TSan tests ($tests)" >&2
    status=1
    return
  fi
  cmake --build "$build" -j"$jobs" --target "${executables[@]}"
  ((build_only)) && return
  # second_deadlock_stack: both stacks of a lock-order report; halt_on_error: a report fails the test.
  export IDIST_TEST_TIME_SCALE="${TSAN_TIME_SCALE:-5}"
  (cd "$build" && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
       ctest --output-on-failure -R "$tests") || status=1
}

case "$what" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all] [--build-only]" >&2; exit 2 ;;
esac
exit "$status"
