#!/usr/bin/env bash
# Fuzzing of the rendezvous stores' parsers (docs/testing.md, "Store under load and fuzzing"): builds the
# libFuzzer targets of tests/fuzz with clang (ASan + UBSan) in their own folder, then runs each for a
# bounded time from its seed corpus (tests/fuzz/corpus/<target>, only read) and reports the executions.
#   fuzz_tcp_store_server  the frames a client sends to idist's TCPStore server
#   fuzz_c10d_replies      the replies idist's c10d TCPStore client reads from a server
#   fuzz_file_store        FileStore's files (values, counters) and key names
# A crash, a sanitizer report, a leak or an input running past 10 s (-timeout=10) fails the run; the
# input is kept under the work folder's artifacts/ (add it to the corpus with a regression test).
#
#   scripts/run-fuzz.sh                          # 60 s per target, as many at once as JOBS (nproc)
#   scripts/run-fuzz.sh --build-only             # build the targets, run nothing
#   FUZZ_SECONDS=600 scripts/run-fuzz.sh fuzz_c10d_replies
#
# Environment: FUZZ_SECONDS (60 per target), FUZZ_BUILD_DIR (build-fuzz/), FUZZ_WORK_DIR (build-fuzz/work:
# grown corpora, artifacts, logs), FUZZ_STATS (a file to which one line per target is appended:
# target seconds executions exit_status), CC / CXX (clang / clang++). Arguments: targets (default all).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
work="${FUZZ_WORK_DIR:-$build/work}"
seconds="${FUZZ_SECONDS:-60}"
[[ "$seconds" =~ ^[1-9][0-9]*$ && "$seconds" -le 86400 ]] ||
  { echo "run-fuzz: FUZZ_SECONDS should be 1..86400, got '$seconds'" >&2; exit 2; }
build_only=0
[[ "${1:-}" == --build-only ]] && { build_only=1; shift; }
targets=("$@")
((${#targets[@]})) || targets=(fuzz_tcp_store_server fuzz_c10d_replies fuzz_file_store)

CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$root/tests/fuzz" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Through the shared build lock where there is one (a machine of several builders).
lock=(); [[ -e /tmp/idist-build.lock ]] && lock=(flock /tmp/idist-build.lock)
"${lock[@]}" cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]}"
((build_only)) && exit 0

# fuzz <target>: one bounded run; its summary line goes to <work>/<target>.result, then its status.
fuzz() {
  local t=$1 rc=0 execs
  local corpus="$work/corpus/${t#fuzz_}" artifacts="$work/artifacts/${t#fuzz_}/" log="$work/$t.log"
  mkdir -p "$corpus" "$artifacts" "$work/tmp"
  # New inputs go to the work corpus (first directory); the repository's seeds are only read.
  # The outer timeout is a net for a hang libFuzzer itself would miss.
  TMPDIR="$work/tmp" ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1" \
    timeout $((seconds + 120)) "$build/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "$root/tests/fuzz/corpus/${t#fuzz_}" \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n -E 's/^stat::number_of_executed_units: *([0-9]+)$/\1/p' "$log" | tail -1)
  echo "$t: ${execs:-?} executions in ${seconds} s, exit status $rc (log: $log)" >"$work/$t.result"
  [[ -n "${FUZZ_STATS:-}" ]] && echo "$t $seconds ${execs:-0} $rc" >>"$FUZZ_STATS"
  return "$rc"
}

# Each libFuzzer run is one process on one core: the targets run side by side, as many at once as
# there are build jobs, each for its full time.
slots="${JOBS:-$(nproc)}"
mkdir -p "$work"
rm -f "$work"/*.result
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= slots)); do wait -n || true; done
  fuzz "$t" &
done
wait || true
status=0
for t in "${targets[@]}"; do
  cat "$work/$t.result" 2>/dev/null || echo "$t: no result (see $work/$t.log)"
  if ! grep -q 'exit status 0 ' "$work/$t.result" 2>/dev/null; then
    status=1
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$work/$t.log" | head -20 || true
  fi
done
rm -rf "$work/tmp"
exit "$status"
