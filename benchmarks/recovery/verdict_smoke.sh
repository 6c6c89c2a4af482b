#!/usr/bin/env bash
# ctest bench_recovery_verdict_smoke: run_recovery.sh's verdict (verdict.py) judges the MEDIAN of the rounds
# against each target and exits non-zero on a miss. The timings are written here around the targets (2 s, 5 s):
# a run whose medians sit exactly on the targets, with an outlier far above, passes; a run whose survivors'
# median is just above 2 s fails and names that measure; a line without the numbers is refused.
set -euo pipefail
verdict="$(dirname "${BASH_SOURCE[0]}")/verdict.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
bad() { echo "FAILED: $*"; failed=1; }

# line SCENARIO GONE RESTART FIRST_STEP FAULT_TO_STEP
line() {
  printf '{"scenario": "%s", "fault_to_workers_gone_s": %s, "workers_gone_to_restart_s": %s, ' "$1" "$2" "$3"
  printf '"restart_to_first_step_max_s": %s, "fault_to_first_step_s": %s, "date": "x"}\n' "$4" "$5"
}
# run NAME EXPECTED_STATUS: the verdict on $dir/NAME.jsonl; its output in $dir/NAME.out.
run() {
  local rc=0
  python3 "$verdict" "$dir/$1.jsonl" --survivors-target 2 --first-step-target 5 >"$dir/$1.out" 2>&1 || rc=$?
  cat "$dir/$1.out"
  [ "$rc" -eq "$2" ] || bad "$1: exit status $rc, expected $2"
}

{ line worker 0.5 1 1 3; line worker 2.0 1 5.0 3; line worker 9.0 1 9.0 3; line kill 1 15 2 17; } >"$dir/met.jsonl"
run met 0
grep -qx '| worker | survivors gone | 0.50, 2.00, 9.00 | 2.00 | 2 | met |' "$dir/met.out" || bad "met: no median of 2.00 met"
grep -qx '| worker | first step | 1.00, 5.00, 9.00 | 5.00 | 5 | met |' "$dir/met.out" || bad "met: no median of 5.00 met"
grep -q '| kill | restart | 15.00 | 15.00 | - | - |' "$dir/met.out" || bad "met: the restart (no target) not shown"
grep -qx 'run_recovery: every target met' "$dir/met.out" || bad "met: no final verdict"

{ line worker 2.1 1 1 3; line worker 0.1 1 1 3; line worker 2.5 1 1 3; } >"$dir/missed.jsonl"
run missed 1
grep -qx '| worker | survivors gone | 2.10, 0.10, 2.50 | 2.10 | 2 | MISSED |' "$dir/missed.out" || bad "missed: no MISSED line"
grep -qx '| worker | first step | 1.00, 1.00, 1.00 | 1.00 | 5 | met |' "$dir/missed.out" || bad "missed: first step not met"
grep -qx 'run_recovery: 1 target(s) missed' "$dir/missed.out" || bad "missed: no count of misses"

echo '{"scenario": "worker", "fault_to_workers_gone_s": 1}' >"$dir/partial.jsonl"
run partial 2
grep -q 'missing: workers_gone_to_restart_s' "$dir/partial.out" || bad "partial: the missing number is not named"
: >"$dir/empty.jsonl"
run empty 2

[ "$failed" -eq 0 ] && echo "verdict_smoke: all checks passed"
exit "$failed"
