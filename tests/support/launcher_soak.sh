#!/usr/bin/env bash
# Runs one mpi job N times without any rerun and counts how often mpirun itself misbehaved (crashed
# by a signal, or hung after every rank had ended) apart from the job's own outcome: the measurement
# behind "no launcher rerun is needed". Run it under the test lock; every job is bounded (30 s).
#
#   launcher_soak.sh <runs (1-100)> <rank binary> <command...>
#   e.g. flock /tmp/idist-test.lock tests/support/launcher_soak.sh 30 build/tests/debug/idist_mismatch_case \
#          env IDIST_TEST_BACKEND=mpi mpirun --allow-run-as-root --oversubscribe -np 3 \
#          build/tests/debug/idist_mismatch_case length 2000
# Prints one line per run (exit status, launcher fault if any) and a summary; exits 1 when the
# launcher misbehaved at least once.
set -u
. "$(dirname "$0")/mpi_launcher.sh"
runs=$1 bin=$2
shift 2
[[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] && [ "$runs" -le 100 ] || {
  echo "runs should be 1-100, got '$runs'" >&2
  exit 2
}
crashed=0 hung=0 overran=0
keep=$(mktemp -d /tmp/idist-launcher-soak-XXXXXX)  # the output of every run with a launcher fault
declare -A statuses=()
for ((i = 1; i <= runs; i++)); do
  run_job 30 "$bin" "$@"
  fault=""
  if launcher_crashed "$rc" "$out" "$bin"; then
    fault="mpirun crashed"
    crashed=$((crashed + 1))
  elif [ "$launcher_hung" = 1 ]; then
    fault="mpirun hung after its ranks ended"
    hung=$((hung + 1))
  elif [ "$rc" -gt 128 ] && [ "$job_overran" = 0 ] && ! grep -q "exited on signal" <<<"$out"; then
    # mpirun (exec'd by setsid, so this is its own status) died by a signal; no rank did.
    fault="mpirun died by signal $((rc - 128))"
    crashed=$((crashed + 1))
  elif [ "$job_overran" = 1 ]; then
    fault="the job overran"
    overran=$((overran + 1))
  fi
  statuses[$rc]=$((${statuses[$rc]:-0} + 1))
  echo "run $i: exit $rc${fault:+ ($fault)}"
  if [ -n "$fault" ]; then
    printf '%s\n' "$out" >"$keep/run$i.log"
    echo "$out" | grep -E "ORTE_ERROR_LOG|Signal|^idist:" | head -5 | cut -c1-300
  fi
done
summary=""
for s in "${!statuses[@]}"; do summary+=" exit $s: ${statuses[$s]};"; done
echo "launcher soak: $runs runs;$summary mpirun crashed $crashed, hung $hung, other overruns $overran (outputs in $keep)"
[ $((crashed + hung)) -eq 0 ]
