#!/usr/bin/env bash
# README command 2: the test suite. Installs the dependencies, configures with Ninja in build/,
# builds everything and runs ctest, then builds the single-backend configurations
# (scripts/check-configurations.sh: serial-, mpi-, gloo- and nccl-only, each linking a consumer of
# idist::Parallel) and the sanitizer runs (scripts/run-sanitizers.sh: ASan + UBSan
# and TSan builds of the tests without LibTorch). Exits non-zero when a test fails or a sanitizer
# reports.
# Extra arguments go to ctest, e.g.  scripts/run-tests.sh -R conformance  (they skip the sanitizer runs)
# Environment: BUILD_DIR (default build/), JOBS (build parallelism, default nproc),
#   SANITIZERS=0 to skip the sanitizer runs, CONFIGURATIONS=0 to skip the single-backend builds
#   (default: both run when no ctest arguments are given),
#   CI=true: a test that reports Skipped fails the run, unless it is a GPU test (gpu_*), which skips
#   with its reason wherever no GPU is visible. The tests themselves fail instead of skipping under
#   CI=true (tests/support/skip.sh); this is the net behind them.
# The summary also prints the mpi jobs rerun because only mpirun failed (tests/support/mpi_launcher.sh;
# at most once per job, each logged in <build>/test-reruns.log): a count above 0 is a launcher fault
# that the rerun absorbed, to be investigated, not a pass to forget.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DIDIST_BUILD_TESTS=ON
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

# The rerun logs of this run's ctest invocations, emptied first (tests/CMakeLists.txt names them).
rerun_logs=("$build/test-reruns.log")
log="$build/ctest.log"
status=0
rm -f "$build/test-reruns.log"
# Multi-rank tests already use every core: one test at a time.
logged "$log" bash -c 'cd "$1" && shift && ctest --output-on-failure "$@"' _ "$build" "$@" || status=$?

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
  logged "$san_log" bash "$root/scripts/run-sanitizers.sh" all || san_status=$?
fi

# skipped_tests <log>...: the tests ctest lists as "(Skipped)" under "The following tests did not run".
skipped_tests() {
  cat "$@" 2>/dev/null | sed -n -E 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\)[[:space:]]*$/\1/p'
}
in_ci() { [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; }

echo
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
reruns=0
for f in "${rerun_logs[@]}"; do
  [[ -s "$f" ]] && reruns=$((reruns + $(wc -l <"$f")))
done
echo "==================== mpi launcher reruns: $reruns ===================="
if ((reruns)); then
  echo "WARNING: $reruns mpi job(s) ran twice because mpirun itself crashed or hung (a launcher fault"
  echo "that a rerun absorbed; see tests/support/launcher_soak.sh to measure it):"
  for f in "${rerun_logs[@]}"; do [[ -s "$f" ]] && sed "s|^|  $(basename "$(dirname "$f")"): |" "$f"; done
fi
[[ "$status" -ne 0 ]] && exit "$status"
[[ "$skip_status" -ne 0 ]] && exit "$skip_status"
[[ "$cfg_status" -ne 0 ]] && exit "$cfg_status"
exit "$san_status"
