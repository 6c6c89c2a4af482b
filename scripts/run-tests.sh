#!/usr/bin/env bash
# README command 2: the test suite. Installs the dependencies, configures with Ninja in build/,
# builds everything and runs ctest. Exits non-zero when a test fails.
# Extra arguments go to ctest, e.g.  scripts/run-tests.sh -R conformance
# Environment: BUILD_DIR (default build/), JOBS (build parallelism, default nproc).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DIDIST_BUILD_TESTS=ON
cmake --build "$build" -j"$jobs"

log="$build/ctest.log"
set +e
# Multi-rank tests already use every core: one test at a time.
(cd "$build" && ctest --output-on-failure "$@") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

echo
echo "==================== ctest summary ===================="
sed -n -e '/tests passed, /,$p' "$log"
echo "(full log: $log)"
exit "$status"
