#!/usr/bin/env bash
# The flight recorder and idist_trace on a real desynchronised job (3 ranks, INFO):
#   diverge: every rank dumps; idist_trace names seq 4 of group world and both calls;
#   missing: the timed-out ranks name the rank that never arrived (gloo, through the store), and
#            idist_trace names it as the rank that left no dump.
#   trace_tool.sh <idist_trace_scenario> <idist_trace> <gloo|mpi> [mpirun and its flags...]
set -u
scenario=$1 tool=$2 backend=$3
shift 3
fail() { echo "FAIL: $*"; exit 1; }
launcher=("$@")
export IDIST_DISTRIBUTED_DEBUG=INFO OMP_NUM_THREADS=1
# How each job must end: on mpi the timed-out ranks leave the backend broken and finalize() ends the
# job (exit 1); on gloo every rank reports its error and finalizes (exit 0). A rank killed by a
# signal, or a job past its bound (124), fails.
[ "$backend" = mpi ] && want_rc=1 || want_rc=0
check_rc() {  # check_rc <scenario> <exit status>
  [ "$2" -eq "$want_rc" ] || { echo "$out" | tail -20; fail "$1: the job exited with $2, expected $want_rc"; }
}
dir=$(mktemp -d /tmp/idist-trace-XXXXXX)
trap 'rm -rf "$dir"' EXIT

if [ "$backend" = mpi ]; then
  out=$(IDIST_TEST_BACKEND=mpi IDIST_TRACE_DIR=$dir/diverge timeout 120 "${launcher[@]}" -np 3 "$scenario" diverge 2000 2>&1)
else
  out=$(IDIST_TEST_BACKEND=gloo IDIST_TEST_SPAWN=3 IDIST_TRACE_DIR=$dir/diverge timeout 120 "$scenario" diverge 2000 2>&1)
fi
job_rc=$?
echo "$out" | grep "^rank"
check_rc diverge $job_rc
for r in 0 1 2; do [ -f "$dir/diverge/idist_trace_rank$r.json" ] || fail "diverge: rank $r wrote no dump"; done
report=$("$tool" "$dir/diverge"); rc=$?
echo "$report"
[ $rc -eq 1 ] || fail "idist_trace exit status $rc, expected 1"
grep -q "group world: the ranks diverge at seq 4: ranks 0, 1: all_reduce float32\[4\] SUM seq 4 \[timed_out\]; rank 2: broadcast float32\[4\] src 0 seq 4 \[timed_out\]" <<<"$report" ||
  fail "idist_trace did not name the divergence at seq 4"

if [ "$backend" = mpi ]; then
  out=$(IDIST_TEST_BACKEND=mpi IDIST_TRACE_DIR=$dir/missing timeout 120 "${launcher[@]}" -np 3 "$scenario" missing 2000 2>&1)
else
  out=$(IDIST_TEST_BACKEND=gloo IDIST_TEST_SPAWN=3 IDIST_TRACE_DIR=$dir/missing timeout 120 "$scenario" missing 2000 2>&1)
fi
job_rc=$?
echo "$out" | grep "^rank"
check_rc missing $job_rc
if [ "$backend" = gloo ]; then
  n=$(grep -c "^rank [01]: raised: .*ranks that have not reached it: rank 2 (last started seq 3)" <<<"$out")
  [ "$n" -eq 2 ] || fail "missing: $n of 2 timed-out ranks named rank 2 at seq 3"
else
  n=$(grep -c "^rank [01]: raised: .*rank [01] was at seq 4 of group world" <<<"$out")
  [ "$n" -eq 2 ] || fail "missing: $n of 2 timed-out ranks gave their sequence number"
fi
report=$("$tool" "$dir/missing"); rc=$?
echo "$report"
[ $rc -eq 1 ] || fail "idist_trace exit status $rc, expected 1"
grep -q "rank 2 of the world of 3 left no dump" <<<"$report" || fail "idist_trace did not name rank 2"
echo "flight recorder and idist_trace: OK ($backend)"
