#!/usr/bin/env bash
# Runs every case of the mismatch matrix (idist_mismatch_case) once, each in a fresh world, and checks
# that no rank died by a signal and that every rank reported (returned or raised an idist::Error), or,
# on mpi outside DETAIL, that idist aborted the job with its message (a broken backend, the watchdog).
# With IDIST_DISTRIBUTED_DEBUG=DETAIL every rank must raise DesyncError naming the last rank; on gloo
# with OFF some rank must raise; on mpi with OFF, where MPI cannot see some mismatches (same-size
# buffers, another reduce op or root: docs/debugging.md), a job in which every rank returned must show
# the mismatch in its data: some rank got another result than the agreed collective would have given.
#
# MISMATCH_CASES=all adds the cases of the collectives ignite does not have (reduce, gather, scatter,
# reduce_scatter(_v), all_to_all(_v), each against another collective and with another count on the
# last rank; mismatch_beyond_ignite.cpp) to the default ones. DETAIL exchanges all_to_all_v's per-pair
# counts before the call (the fingerprints hold only each rank's total). On gloo without DETAIL,
# all_to_all_v_counts is left out: a rank sent more than it posted is aborted by Gloo's transport thread
# (gloo::EnforceNotMet, as under ProcessGroupGloo), which idist cannot catch (docs/debugging.md).
#
#   mismatch_matrix.sh <idist_mismatch_case> <gloo|mpi> <ranks> [mpirun and its flags...]
set -u
. "$(dirname "$0")/../support/mpi_launcher.sh"
. "$(dirname "$0")/../support/time_scale.sh"  # the jobs' budget scales with IDIST_TEST_TIME_SCALE
bin=$1 backend=$2 np=$3
shift 3
cases="length dtype same_bytes reduce_op broadcast_root all_reduce_vs_broadcast all_gather_vs_all_reduce"
beyond_ignite="reduce_vs_all_reduce reduce_count gather_vs_all_gather gather_count scatter_vs_gather scatter_count
  reduce_scatter_vs_all_reduce reduce_scatter_count reduce_scatter_v_vs_reduce_scatter reduce_scatter_v_counts
  all_to_all_vs_all_gather all_to_all_count all_to_all_v_vs_all_to_all all_to_all_v_counts"
case "${MISMATCH_CASES:-default}" in
  default) ;;
  all) cases="$cases $beyond_ignite" ;;
  *) echo "MISMATCH_CASES must be default or all, not '$MISMATCH_CASES'" >&2; exit 2 ;;
esac
timeout_ms=2000
failed=0
for c in $cases; do
  if [ "$backend" = gloo ] && [ "${IDIST_DISTRIBUTED_DEBUG:-OFF}" != DETAIL ] && [ "$c" = all_to_all_v_counts ]; then
    echo "case $c: left out on gloo without DETAIL (Gloo aborts the receiving process)"
    continue
  fi
  if [ "$backend" = mpi ]; then
    run_job_retried "$(scaled 30)" "$bin" "case $c" env IDIST_TEST_BACKEND=mpi "$@" -np "$np" "$bin" "$c" "$timeout_ms"
  else
    run_job "$(scaled 30)" "$bin" env IDIST_TEST_BACKEND=gloo IDIST_TEST_SPAWN=$np "$bin" "$c" "$timeout_ms"
  fi
  echo "case $c: exit $rc after $SECONDS s of the script"
  mode=${IDIST_DISTRIBUTED_DEBUG:-OFF}
  reports=$(grep -c "^case $c rank [0-9]*: \(returned\|raised\)" <<<"$out")
  echo "$out" | grep "^case $c rank" | cut -c1-400
  # mpi without DETAIL: a rank whose collective failed or timed out leaves the backend broken, and
  # the job ends by finalize()'s abort (exit 1) or the blocking calls' watchdog (exit 124), each with
  # its message; never by a signal.
  if [ "$backend" = mpi ] && [ "$job_overran" = 0 ] && [ "$mode" != DETAIL ] &&
     { [ $rc -eq 1 ] || [ $rc -eq 124 ]; } &&
     grep -Eq "idist: (finalize\(\) on rank [0-9]+: the mpi backend is unusable|rank [0-9]+: .* has run for at least)" <<<"$out"; then
    echo "case $c: the job was aborted with idist's message (exit $rc)"
    continue
  fi
  if [ "$job_overran" = 1 ] || [ $rc -ne 0 ] || [ "$reports" -ne "$np" ]; then
    echo "FAIL $c: exit status $rc, $reports of $np ranks reported"
    echo "$out" | tail -20
    failed=1
    continue
  fi
  # gloo's tags keep mismatched ranks apart: no case passes silently on every rank (a rank whose own
  # part was complete, e.g. a receiver of the root it agreed on, may return).
  if [ "$backend" = gloo ] && [ "$mode" = OFF ]; then
    raised=$(grep -c "^case $c rank [0-9]*: raised \(TimeoutError\|BackendError\)" <<<"$out")
    if [ "$raised" -eq 0 ]; then
      echo "FAIL $c: the mismatch passed silently on every rank"
      failed=1
    fi
  fi
  # mpi without DETAIL, every rank returned: a case that ran the same collective everywhere would pass
  # here too, so the mismatch must show in some rank's buffer (every rank contributes rank + 1).
  if [ "$backend" = mpi ] && [ "$mode" != DETAIL ]; then
    noticed=$(grep -c "^case $c rank [0-9]*: \(raised\|returned another result\)" <<<"$out")
    if [ "$noticed" -eq 0 ]; then
      echo "FAIL $c: the mismatch went unnoticed: every rank returned the agreed collective's result"
      failed=1
    fi
  fi
  if [ "$mode" = DETAIL ]; then
    named=$(grep -c "^case $c rank [0-9]*: raised DesyncError: .*rank $((np - 1)): " <<<"$out")
    if [ "$named" -ne "$np" ]; then
      echo "FAIL $c: $named of $np ranks raised DesyncError naming rank $((np - 1))"
      failed=1
    fi
  fi
done
[ $failed -eq 0 ] && echo "mismatch matrix ($backend, $np ranks, IDIST_DISTRIBUTED_DEBUG=${IDIST_DISTRIBUTED_DEBUG:-OFF}): no rank died by a signal"
exit $failed
