#!/usr/bin/env bash
# Failure safety of the mpi backend with real processes (2 ranks): after a timeout or an MPI error
# the backend is broken, the next collective raises at once naming the first failure, and the job
# ends with a message and a chosen exit status (1: finalize() aborted; 124: the watchdog) instead of
# a segfault in MPI_Finalize (139) or a hang.
#
#   failure_cases.sh <idist_mpi_failure_case> <mpirun and its flags...>
set -u
. "$(dirname "$0")/../support/mpi_launcher.sh"
. "$(dirname "$0")/../support/time_scale.sh"  # upper bounds on durations scale with IDIST_TEST_TIME_SCALE
bin=$1
shift
failed=0
timeout_ms=1000

# run <name> <env...>: runs one scenario, leaves its output in $out and its status in $rc.
run() {
  local scenario=$1
  shift
  run_job_retried "$(scaled 30)" "$bin" "$scenario" env "$@" "${mpirun[@]}" -np 2 "$bin" "$scenario" "$timeout_ms"
  [ "$job_overran" = 0 ] || rc=142  # past the bound: no expected status matches
}
fail() {
  echo "FAIL $*"
  echo "$out" | grep -v "^\s*$" | tail -25
  failed=1
}
expect() {  # expect <case> <regex>: the output matches the extended regex
  grep -Eq -- "$2" <<<"$out" || fail "$1: no line matches /$2/"
}
# expect_ms <case> <regex with one ([0-9]+) group: a duration in ms> <at least> <below>: a line matches and
# the duration lies in [at least, below), "below" scaled (a slow run is later, never earlier).
expect_ms() {
  local line pattern=$2 n below
  below=$(scaled "$4")
  line=$(grep -E -m1 -- "$pattern" <<<"$out") || { fail "$1: no line matches /$pattern/"; return; }
  [[ "$pattern" == ^* ]] || pattern=".*$pattern"
  n=$(sed -nE "s/${pattern}.*/\1/p" <<<"$line")
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt "$3" ] || [ "$n" -ge "$below" ]; then
    fail "$1: ${n:-no number} ms, expected at least $3 and below $below ms: $line"
  fi
}
mpirun=("$@")

# 1. Counts 4 vs 8 floats, polled mode: a rank fails (truncation) or times out; its next collective
#    raises at once naming that first failure; finalize() aborts with the message (exit 1).
run count_mismatch IDIST_MPI_BLOCKING=0
echo "count_mismatch polled: exit $rc"; echo "$out" | grep "^rank" | cut -c1-300
[ "$rc" -eq 1 ] || fail "count_mismatch polled: exit status $rc, expected 1 (finalize() aborts)"
expect "count_mismatch polled" "^rank [01]: first: raised (BackendError|TimeoutError)"
expect_ms "count_mismatch polled" "^rank [01]: second: raised BackendError after ([0-9]+) ms: all_reduce on rank [01]: the mpi backend is unusable since an earlier failure: " 0 100
expect "count_mismatch polled" "idist: finalize\(\) on rank [01]: the mpi backend is unusable since an earlier failure: MPI_Iallreduce"

# 2. The same in blocking mode (the default): MPI_Allreduce fails on the rank receiving too much; the
#    other may return a partial result (MPI cannot tell), then hangs in its next collective. The failed
#    rank's next collective raises at once and its finalize() aborts the job after half the timeout
#    (exit 1), before the hung rank's watchdog, which fires only at the full timeout (124 would mean the
#    abort came late or not at all). A 2 s timeout, scaled, keeps that half-timeout margin wide.
timeout_ms=$(scaled 2000)
run count_mismatch
timeout_ms=1000
echo "count_mismatch blocking: exit $rc"; echo "$out" | grep "^rank" | cut -c1-300
[ "$rc" -eq 1 ] || fail "count_mismatch blocking: exit status $rc, expected 1 (finalize() aborts before the watchdog)"
expect "count_mismatch blocking" "^rank [01]: first: raised BackendError after [0-9]+ ms: MPI_Allreduce failed on rank [01]"
expect "count_mismatch blocking" "idist: finalize\(\) on rank [01]: the mpi backend is unusable since an earlier failure: MPI_Allreduce"

# 3. A peer that never arrives, polled mode: TimeoutError within the timeout (+1 s), the next
#    collective raises at once, finalize() aborts (exit 1) while rank 1 still sleeps.
run never_arrives IDIST_MPI_BLOCKING=0
echo "never_arrives polled: exit $rc"; echo "$out" | grep "^rank" | cut -c1-300
[ "$rc" -eq 1 ] || fail "never_arrives polled: exit status $rc, expected 1"
expect_ms "never_arrives polled" "^rank 0: first: raised TimeoutError after ([0-9]+) ms: all_reduce on rank 0 did not complete within 1000 ms" 900 2000
expect_ms "never_arrives polled" "^rank 0: second: raised BackendError after ([0-9]+) ms: .*unusable since an earlier failure: MPI_Iallreduce on rank 0 timed out" 0 100
expect "never_arrives polled" "idist: finalize\(\) on rank 0: the mpi backend is unusable since an earlier failure: MPI_Iallreduce on rank 0 timed out"
grep -q "rank 1: finalizing" <<<"$out" && fail "never_arrives polled: rank 1 outlived rank 0's abort"

# 4. The same in blocking mode: the watchdog aborts the job naming the collective, rank, group and
#    elapsed time (exit 124).
run never_arrives
echo "never_arrives blocking: exit $rc"; echo "$out" | grep "^idist" | cut -c1-300
[ "$rc" -eq 124 ] || fail "never_arrives blocking: exit status $rc, expected 124 (watchdog)"
expect_ms "never_arrives blocking" "idist: rank 0: all_reduce on group world \(ranks 0-1\) has run for at least ([0-9]+) ms, past the timeout of 1000 ms" 900 2000

# 5. A non-blocking collective driven by the progress thread: the same guarantees (exit 1).
run never_arrives_async IDIST_MPI_PROGRESS_THREAD=1
echo "never_arrives_async progress thread: exit $rc"; echo "$out" | grep "^rank" | cut -c1-300
[ "$rc" -eq 1 ] || fail "never_arrives_async: exit status $rc, expected 1"
expect_ms "never_arrives_async" "^rank 0: first: raised TimeoutError after ([0-9]+) ms" 900 2000
expect_ms "never_arrives_async" "^rank 0: second: raised BackendError after ([0-9]+) ms: .*MPI_Iallreduce on rank 0 timed out" 0 100
expect "never_arrives_async" "idist: finalize\(\) on rank 0: the mpi backend is unusable"

[ $failed -eq 0 ] && echo "mpi failure cases: every job ended with a message and exit 1 or 124, none by a signal"
exit $failed
