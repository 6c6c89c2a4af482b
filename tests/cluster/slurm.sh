#!/usr/bin/env bash
# A real SLURM cluster (munge, slurmctld, one slurmd per emulated host; scripts/slurm-cluster.sh) on 2
# hosts x 2 tasks. The commands a user types work unchanged:
#   srun --nodes=2 --ntasks-per-node=2 fashion_mnist --backend gloo
#   srun --mpi=pmix --nodes=2 --ntasks-per-node=2 fashion_mnist --backend mpi
#   sbatch (#SBATCH --nodes=2, --ntasks-per-node=2, --output) running srun, its output file checked;
# the layout test checks every rank's place under both; and a job whose host-2 tasks are killed
# mid-training fails promptly on the surviving ranks and is marked FAILED by SLURM.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

example="$IDIST_BUILD_DIR/examples/fashion_mnist/fashion_mnist"
layout="$IDIST_BUILD_DIR/tests/cluster/idist_cluster_layout_test"
SLURM="$IDIST_SOURCE_DIR/scripts/slurm-cluster.sh"
extra_cleanup() { "$SLURM" down >/dev/null 2>&1 || true; }

cluster_up 2
rc=0
"$SLURM" up >"$LOGS/slurm-up.out" 2>"$LOGS/slurm-up.err" || rc=$?
[ "$rc" -ne 77 ] || skip_test "$(tail -n 1 "$LOGS/slurm-up.err")"
[ "$rc" -eq 0 ] || { cat "$LOGS/slurm-up.err"; echo "slurm-cluster.sh up failed ($rc)"; exit 1; }
eval "$(cat "$LOGS/slurm-up.out")"  # export SLURM_CONF=...
export OMP_NUM_THREADS=1 IDIST_TEST_EXPECT_NNODES=2 IDIST_TEST_EXPECT_NPROC=2 IDIST_TEST_HOST_PREFIX="$IDIST_CLUSTER"

# in_slurm NAME LIMIT_S CMD...: CMD (srun, sbatch, ...) on host 1, the login node, bounded in time.
in_slurm() {
  local name="$1" limit="$2"
  shift 2
  start_on 1 "$LOGS/$name" "$limit" "$@"
  wait_all "$name" "$LAST_PID"
}

# expect_json NAME FILE: the example's JSON line shows a world of 4 that learned something.
expect_json() {
  local line
  line="$(grep -h '"world_size": 4' "$2" || true)"
  if [ -n "$line" ] && awk -v l="$line" 'BEGIN { match(l, /"test_accuracy": [0-9.]+/); exit !(substr(l, RSTART + 17) + 0 > 0.5) }'; then
    log "$1: $line"
  else
    log "FAILED: $1: no JSON line with world_size 4 and accuracy > 0.5 in $2"
    tail -n 20 "$2"
    failures=$((failures + 1))
  fi
}

train_args=(--limit 2000 --epochs 1 --timeout 60)
in_slurm srun_layout_gloo 180 env IDIST_TEST_BACKEND=gloo srun --nodes=2 --ntasks-per-node=2 "$layout"
in_slurm srun_layout_mpi 180 env IDIST_TEST_BACKEND=mpi srun --mpi=pmix --nodes=2 --ntasks-per-node=2 "$layout"
in_slurm srun_gloo 300 srun --nodes=2 --ntasks-per-node=2 "$example" --backend gloo "${train_args[@]}"
expect_json srun_gloo "$LOGS/srun_gloo"
in_slurm srun_mpi 300 srun --mpi=pmix --nodes=2 --ntasks-per-node=2 "$example" --backend mpi "${train_args[@]}"
expect_json srun_mpi "$LOGS/srun_mpi"

# submit NAME SCRIPT_BODY...: writes an sbatch script, submits it from host 1, prints the job id.
submit() {
  local name="$1"
  shift
  {
    echo "#!/bin/bash"
    echo "#SBATCH --job-name=$name"
    echo "#SBATCH --nodes=2"
    echo "#SBATCH --ntasks-per-node=2"
    echo "#SBATCH --output=$LOGS/$name.out"
    printf '%s\n' "$@"
  } >"$LOGS/$name.sbatch"
  "$CLUSTER" run 1 sbatch --parsable "$LOGS/$name.sbatch" | cut -d';' -f1
}

job=$(submit sbatch_gloo "srun $example --backend gloo ${train_args[*]}")
state=$("$SLURM" wait-job "$job" 300 || true)
log "sbatch_gloo: job $job ended $state"
[ "$state" = COMPLETED ] || { log "FAILED: sbatch job $job: $state"; failures=$((failures + 1)); }
expect_json sbatch_gloo "$LOGS/sbatch_gloo.out"

# Host 2's tasks are killed mid-training: ranks 0 and 1 (host 1) must leave with an error naming the
# operation and host 2 within timeout + 5 s, and SLURM must mark the job FAILED.
job=$(submit sbatch_killed "srun --kill-on-bad-exit=0 $example --backend gloo --epochs 3 --timeout 10")
started=0
for _ in $(seq 1 240); do
  if grep -q "step" "$LOGS/sbatch_killed.out" 2>/dev/null; then started=1; break; fi
  sleep 0.5
done
if [ "$started" -eq 1 ]; then
  # The job's own processes on host 2, as SLURM lists them there (never the daemons).
  pids=$("$CLUSTER" run 2 scontrol listpids "$job" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }')
  victims=()
  for pid in $pids; do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = fashion_mnist ] && victims+=("$pid")
  done
  log "killing the job's tasks on host 2: ${victims[*]:-none found}"
  t_fault=$(now)
  [ "${#victims[@]}" -gt 0 ] && kill -KILL "${victims[@]}"
  state=$("$SLURM" wait-job "$job" 60 || true)
  took=$(calc "$(now) - $t_fault")
  log "sbatch_killed: job $job ended $state $(printf %.1f "$took") s after the kill"
  if [ "$state" != FAILED ] || [ "$(calc "$took > 10 + $(scaled 5)")" -eq 1 ] || [ "${#victims[@]}" -ne 2 ] ||
     ! grep -qE "(all_reduce|broadcast|all_gather|barrier).*host $(host_name 2)" "$LOGS/sbatch_killed.out"; then
    log "FAILED: sbatch_killed (state $state, ${#victims[@]} tasks killed, $took s)"
    tail -n 20 "$LOGS/sbatch_killed.out"
    failures=$((failures + 1))
  else
    grep -m2 "error" "$LOGS/sbatch_killed.out" | cut -c1-300
  fi
else
  log "FAILED: sbatch_killed: training did not start"; tail -n 20 "$LOGS/sbatch_killed.out"
  failures=$((failures + 1))
fi
finish
