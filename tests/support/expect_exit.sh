#!/usr/bin/env bash
# A test whose command must END in a given way: the exit status AND its output are checked, and no
# rank may report a failed test. For jobs that end on purpose with a non-zero status (idist's abort of
# a broken mpi backend, the watchdog), where ctest's PASS_REGULAR_EXPRESSION alone would ignore the
# exit status and its FAIL_REGULAR_EXPRESSION sees only what it is told to look for.
#
#   expect_exit.sh <status> <extended regex> <command...>
# Passes (exit 0) when the command exits with <status>, some line of its output (stdout and stderr)
# matches the regex, and no line reports a failure: "FAILED" (gtest's "[  FAILED  ]" on rank 0, a
# test program's own "FAILED: ..."), the "[rank N] FAILURE" of the other ranks
# (tests/support/rank_report.cpp), or a process killed by a signal (Open MPI's "Signal: ..." lines). Prints the output, then what was wrong.
set -u
if [ $# -lt 3 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 <expected exit status> <regex> <command...>" >&2
  exit 2
fi
expected=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
bad=0
if [ "$rc" -ne "$expected" ]; then
  echo "expect_exit: exit status $rc, expected $expected"
  bad=1
fi
if ! grep -Eq -- "$pattern" <<<"$out"; then
  echo "expect_exit: no line of the output matches /$pattern/"
  bad=1
fi
failures=$(grep -E 'FAILED|^\[rank [0-9]+\] FAILURE|Signal: |exited on signal' <<<"$out")
if [ -n "$failures" ]; then
  echo "expect_exit: the output reports failures:"
  printf '%s\n' "$failures" | head -20
  bad=1
fi
exit $bad
