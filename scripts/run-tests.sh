#!/usr/bin/env bash
# README command 2: the test suite. Installs the dependencies, configures with Ninja in build/,
# builds everything and runs ctest, then builds the single-backend configurations
# (scripts/check-configurations.sh: serial-, mpi-, gloo- and nccl-only, each linking a consumer of
# idist::Parallel) and the sanitizer runs (scripts/run-sanitizers.sh: ASan + UBSan
# and TSan builds of the tests without LibTorch). Exits non-zero when a test fails or a sanitizer
# reports.
# Extra arguments go to ctest, e.g.  scripts/run-tests.sh -R conformance  (they skip the sanitizer runs
# and the single-backend builds; under CI=true the run then FAILS, as it left part of the suite out)
# Environment: BUILD_DIR (default build/), JOBS (build parallelism, default nproc),
#   SANITIZERS=0 to skip the sanitizer runs, CONFIGURATIONS=0 to skip the single-backend builds,
#   (default: both run when no ctest arguments are given; under CI=true skipping either fails the run),
#   PREBUILD=0 to build those (and the fuzz targets) in their own steps, not at idle priority during ctest,
#   IDIST_TEST_RERUN=1 (outside CI only): an mpi job whose launcher alone crashed or hung runs once more
#   (tests/support/mpi_launcher.sh) instead of failing its test.
# CI=true (or CI=1) makes the run a gate (docs/testing.md, "How a test decides pass or fail"):
#   - configure with every backend and part required (mpi, gloo, LibTorch, examples, benchmarks; nccl
#     when /usr/local/cuda has NCCL), so that a missing dependency is a configure error, not missing tests;
#   - fewer registered tests (ctest -N) than tests/test-count-floor.txt fails;
#   - a test that reports Skipped in ctest fails, unless it is a GPU test (gpu_*); the tests themselves
#     fail instead of skipping under CI=true (tests/support/skip.sh), this is the net behind them;
#   - a GoogleTest skip (which ctest counts as passed) fails unless tests/support/allowed_skips.txt lists
#     it with a registration whose record shows the test passed (tests/support/check_skips.py);
#   - an mpi launcher fault fails its test, never rerun.
# Outside CI the same checks run and report; only failing tests fail the run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

in_ci() { [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; }

bash "$root/scripts/install-deps.sh"
configure=(-G Ninja -DIDIST_BUILD_TESTS=ON)
if in_ci; then
  # Every backend and part required: a dependency that stops being found fails here.
  nccl=OFF
  [[ -e /usr/local/cuda/include/nccl.h ]] && nccl=ON
  configure+=(-DIDIST_WITH_MPI=ON -DIDIST_WITH_GLOO=ON -DIDIST_WITH_TORCH=ON -DIDIST_WITH_NCCL=$nccl
              -DIDIST_BUILD_EXAMPLES=ON -DIDIST_BUILD_BENCHMARKS=ON)
fi
cmake -S "$root" -B "$build" "${configure[@]}"
cmake --build "$build" -j"$jobs"
# The public API's Doxygen: any warning (an undocumented public declaration) fails the suite.
cmake --build "$build" --target docs

# logged <log> <command...>: runs the command with its output also in <log>; prints nothing more and
# returns the command's exit status (the script goes on: every part runs, the worst status is kept).
logged() {
  local log=$1
  shift
  set +e
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}
enabled() { [[ "${!1:-$([[ $nargs -eq 0 ]] && echo 1 || echo 0)}" == 1 ]]; }
nargs=$#
export JOBS="$jobs"

# The backends this build has (include/idist/config.hpp, generated) and the registered tests against
# the floor kept in the repository: tests disappear when a dependency or a directory drops out.
backends=$(sed -n -E 's/^#define IDIST_HAVE_([A-Z]+) 1$/\1/p' "$build/include/idist/config.hpp" | tr 'A-Z\n' 'a-z ' | sed 's/ $//')
registered=$(cd "$build" && ctest -N | sed -n -E 's/^Total Tests: ([0-9]+)$/\1/p')
floor=$(grep -E -m1 '^[0-9]+$' "$root/tests/test-count-floor.txt")
count_status=0
if [[ "$registered" -lt "$floor" ]]; then
  echo "FEWER TESTS: $registered registered, the floor (tests/test-count-floor.txt) is $floor"
  in_ci && count_status=1
fi

# The launcher-fault logs of this run's ctest invocations and the gtest records (tests/CMakeLists.txt
# names them), emptied first.
rerun_logs=("$build/test-reruns.log")
log="$build/ctest.log"
status=0
rm -f "$build/test-reruns.log"
rm -rf "$build/test-records"
# ---- The later steps' builds, at idle priority while ctest runs ----
# ctest runs one test at a time, and most of its time goes to multi-rank tests that wait (timeouts,
# restarts, rendezvous): about half of both cores sits idle. The single-backend, sanitizer and
# fuzzing builds take that time under SCHED_IDLE, which gives a core to any test process that wakes;
# the emulated-cluster tests wait for them (below).
# Each step below still builds first (a no-op when this finished) and reports its own errors, so a
# failure here is only logged. PREBUILD=0 builds them in their steps instead.
prebuild() {
  if enabled CONFIGURATIONS; then
    bash "$root/scripts/check-configurations.sh" --build-only || echo "prebuild: configurations failed"
  fi
  if enabled SANITIZERS; then
    bash "$root/scripts/run-sanitizers.sh" all --build-only || echo "prebuild: sanitizer builds failed"
  fi
  if enabled FUZZ && command -v "${FUZZ_CXX:-clang++}" >/dev/null; then
    CXX="${FUZZ_CXX:-clang++}" bash "$root/scripts/run-fuzz.sh" --build-only || echo "prebuild: fuzz build failed"
  fi
}
prebuild_pid=
if [[ "${PREBUILD:-1}" == 1 ]] && { enabled CONFIGURATIONS || enabled SANITIZERS || enabled FUZZ; }; then
  (chrt --idle -p 0 "$BASHPID" && renice -n 19 -p "$BASHPID" >/dev/null && prebuild) \
    >"$build/prebuild.log" 2>&1 &
  prebuild_pid=$!
fi

# Multi-rank tests already use every core: one test at a time.
run_ctest() { logged "$1" bash -c 'cd "$1" && shift && ctest --output-on-failure "$@"' _ "$build" "${@:2}"; }
if [[ -z "$prebuild_pid" ]]; then
  run_ctest "$log" "$@" || status=$?
else
  # The emulated-cluster tests (label cluster: faults, restarts and timeouts across hosts) run after
  # the builds, on a quiet machine; the rest alongside them.
  run_ctest "$log" -LE cluster "$@" || status=$?
  start=$SECONDS
  wait "$prebuild_pid" || echo "prebuild: could not start at idle priority (see $build/prebuild.log)"
  echo "==================== prebuild: waited $((SECONDS - start)) s after ctest (log: $build/prebuild.log) ===================="
  run_ctest "$build/ctest-cluster.log" -L cluster "$@" || status=$?
  cat "$build/ctest-cluster.log" >>"$log"
fi

cfg_log="$build/configurations.log"
cfg_status=0
configurations=$(enabled CONFIGURATIONS && echo 1 || echo 0)
if [[ "$configurations" == 1 ]]; then
  logged "$cfg_log" bash "$root/scripts/check-configurations.sh" || cfg_status=$?
fi

san_log="$build/sanitizers.log"
san_status=0
sanitizers=$(enabled SANITIZERS && echo 1 || echo 0)
if [[ "$sanitizers" == 1 ]]; then
  rerun_logs+=("$root/build-asan/test-reruns.log" "$root/build-tsan/test-reruns.log")
  rm -f "$root/build-asan/test-reruns.log" "$root/build-tsan/test-reruns.log"
  rm -rf "$root/build-asan/test-records" "$root/build-tsan/test-records"
  logged "$san_log" bash "$root/scripts/run-sanitizers.sh" all || san_status=$?
fi

# ---- Store fuzzing step (scripts/run-fuzz.sh; docs/testing.md, "Store under load and fuzzing") ----
# The libFuzzer targets of the stores' parsers, 60 s each (FUZZ_SECONDS), built with clang in
# build-fuzz/: a crash, a sanitizer report or a hang fails the run. FUZZ=0 skips it, as do ctest
# arguments; without clang++ it is skipped with a message, except under CI=true, where that fails.
fuzz_status=0
if enabled FUZZ; then
  if command -v "${FUZZ_CXX:-clang++}" >/dev/null; then
    logged "$build/fuzz.log" env CXX="${FUZZ_CXX:-clang++}" FUZZ_SECONDS="${FUZZ_SECONDS:-60}" \
      bash "$root/scripts/run-fuzz.sh" || fuzz_status=$?
  else
    echo "store fuzzing skipped: no ${FUZZ_CXX:-clang++} (install clang and libclang-rt-dev)"
    in_ci && fuzz_status=1
  fi
fi
# ---- end of the store fuzzing step (its status is the last one checked below) ----

# skipped_tests <log>...: the tests ctest lists as "(Skipped)" under "The following tests did not run".
skipped_tests() {
  cat "$@" 2>/dev/null | sed -n -E 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\)[[:space:]]*$/\1/p'
}

echo
echo "==================== build: backends $backends; $registered tests registered (floor $floor) ===================="
echo "==================== ctest summary ===================="
sed -n -e '/tests passed, /,$p' "$log"
echo "(full log: $log)"
if [[ "$configurations" == 1 ]]; then
  sed -n -e '/single-backend configurations =/,$p' "$cfg_log"
fi
if [[ "$sanitizers" == 1 ]]; then
  echo "==================== sanitizer runs (ASan + UBSan, then TSan) ===================="
  grep -E 'tests passed, |Total Test time' "$san_log" || true
  echo "(full log: $san_log; exit status $san_status)"
fi
logs=("$log")
[[ "$sanitizers" == 1 ]] && logs+=("$san_log")
mapfile -t skipped < <(skipped_tests "${logs[@]}")
not_gpu=()
for t in "${skipped[@]}"; do [[ "$t" == gpu_* ]] || not_gpu+=("$t"); done
echo "==================== skipped tests: ${#skipped[@]} (not GPU: ${#not_gpu[@]}) ===================="
((${#skipped[@]})) && printf '  %s\n' "${skipped[@]}"
skip_status=0
if ((${#not_gpu[@]})) && in_ci; then
  echo "FAILED: CI=true and ${#not_gpu[@]} test(s) other than the GPU tests skipped: ${not_gpu[*]}"
  skip_status=1
fi
# GoogleTest skips (reported to ctest as passes): each must be listed with a registration that ran it.
echo "==================== GoogleTest skips ===================="
record_builds=("$build")
[[ "$sanitizers" == 1 ]] && record_builds+=("$root/build-asan" "$root/build-tsan")
gtest_skip_status=0
python3 "$root/tests/support/check_skips.py" $(in_ci && echo --ci) "$root/tests/support/allowed_skips.txt" \
  "${record_builds[@]}" || gtest_skip_status=$?
faults=0
for f in "${rerun_logs[@]}"; do
  [[ -s "$f" ]] && faults=$((faults + $(wc -l <"$f")))
done
echo "==================== mpi launcher faults: $faults ===================="
if ((faults)); then
  echo "WARNING: $faults mpi job(s) met a launcher fault (mpirun itself crashed or hung; action=failed: the"
  echo "test failed with the job's output, action=rerun: IDIST_TEST_RERUN=1 ran it once more). See"
  echo "tests/support/launcher_soak.sh to measure it:"
  for f in "${rerun_logs[@]}"; do [[ -s "$f" ]] && sed "s|^|  $(basename "$(dirname "$f")"): |" "$f"; done
fi
# Under CI the whole suite runs: ctest arguments, SANITIZERS=0 or CONFIGURATIONS=0 leave parts out.
partial_status=0
if in_ci; then
  left_out=()
  ((nargs)) && left_out+=("ctest arguments: $*")
  [[ "$configurations" == 1 ]] || left_out+=("the single-backend configurations")
  [[ "$sanitizers" == 1 ]] || left_out+=("the sanitizer runs")
  if ((${#left_out[@]})); then
    echo "FAILED: CI=true runs the whole suite, but this run left out: $(IFS=';'; echo "${left_out[*]}" | sed 's/;/; /g')"
    partial_status=1
  fi
fi
[[ "$status" -ne 0 ]] && exit "$status"
[[ "$skip_status" -ne 0 ]] && exit "$skip_status"
[[ "$gtest_skip_status" -ne 0 ]] && exit "$gtest_skip_status"
[[ "$count_status" -ne 0 ]] && exit "$count_status"
[[ "$cfg_status" -ne 0 ]] && exit "$cfg_status"
[[ "$san_status" -ne 0 ]] && exit "$san_status"
[[ "$fuzz_status" -ne 0 ]] && exit "$fuzz_status"  # the store fuzzing step
exit "$partial_status"
