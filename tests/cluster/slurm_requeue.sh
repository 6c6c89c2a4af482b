#!/usr/bin/env bash
# SLURM requeue on node loss (the real SLURM cluster of scripts/slurm-cluster.sh on 2 emulated hosts): an
# `sbatch --requeue` job of 1 node x 2 tasks runs the example with --auto-resume on host 2 (host 1 drained
# until the job runs). After a mid-epoch checkpoint, host 2 is lost: every process in its namespace (slurmd,
# slurmstepd, the tasks) is SIGKILLed and the node is set DOWN, as a health check or an administrator does
# (SLURM itself would notice after SlurmdTimeout). SLURM requeues the job; it runs again on host 1 and
# resumes from the newest checkpoint. Checks: the job ends COMPLETED after one restart, its second attempt
# ran on host 1 and resumed from the checkpoint the first attempt wrote last, and it finished training with
# the weights of a fault-free job (no requeue) of the same size that starts from a copy of that checkpoint.
# Prints "requeue-timing: ..." (fault -> requeued attempt started -> its first step).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# digest_of, keep_checkpoint, check_resumed, check_reference, same_digest: the resumed state against a fault-free reference.
source "$(dirname "${BASH_SOURCE[0]}")/digest.sh"

example="$IDIST_BUILD_DIR/examples/fashion_mnist/fashion_mnist"
SLURM="$IDIST_SOURCE_DIR/scripts/slurm-cluster.sh"

[ -x "$example" ] || skip_test "the example is not built (LibTorch layer off)"
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip_test "dataset-fashion-mnist is not installed"

extra_cleanup() { "$SLURM" down >/dev/null 2>&1 || true; }

cluster_up 2
rc=0
# SLURM holds a requeued job for the job credential's lifetime (120 s by default): 20 s keeps the test short.
IDIST_SLURM_CRED_EXPIRE=20 "$SLURM" up >"$LOGS/slurm-up.out" 2>"$LOGS/slurm-up.err" || rc=$?
[ "$rc" -eq 77 ] && skip_test "$(tail -n 1 "$LOGS/slurm-up.err")"
[ "$rc" -eq 0 ] || { cat "$LOGS/slurm-up.err"; echo "slurm-cluster.sh up failed ($rc)"; exit 1; }
eval "$(cat "$LOGS/slurm-up.out")"  # export SLURM_CONF=...
export OMP_NUM_THREADS=1
h1=$(host_name 1)
h2=$(host_name 2)

fail() {
  log "FAILED: $*"
  local f
  for f in "$LOGS"/*.out; do
    [ -f "$f" ] && { echo "----- $f (last 40 lines)"; tail -n 40 "$f"; }
  done
  exit 1
}
in_slurm() { timeout 20 "$CLUSTER" run 1 "$@"; }
job_field() { in_slurm scontrol -o show job "$1" | grep -o " $2=[^ ]*" | cut -d= -f2; }

# wait_until LIMIT_S CMD...: polls CMD every 0.2 s for at most LIMIT_S seconds.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# write_job NAME CKPT_DIR --requeue|--no-requeue: $LOGS/NAME.sbatch, output in $LOGS/NAME.out. 800 steps (2
# epochs of 400 at world 2, global batch 64), a checkpoint every 50 steps.
write_job() {
  cat >"$LOGS/$1.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=$1
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH $3
#SBATCH --open-mode=append
#SBATCH --output=$LOGS/$1.out
echo "attempt \${SLURM_RESTART_COUNT:-0} on \$(hostname) at \$(date +%s.%N)"
srun --kill-on-bad-exit=1 $example --backend gloo --limit 25600 --epochs 2 --timeout 30 --seed 3 \\
  --checkpoint-dir $2 --checkpoint-every-steps 50 --auto-resume --print-timing
EOF
}
ckpt="$LOGS/ckpt"
mkdir -p "$ckpt"
write_job requeue "$ckpt" --requeue

in_slurm scontrol update NodeName="$h1" State=DRAIN Reason=requeue-test >/dev/null
job=$(in_slurm sbatch --parsable "$LOGS/requeue.sbatch" | cut -d';' -f1)
[[ $job =~ ^[0-9]+$ ]] || fail "sbatch gave no job id: $job"
running_on_2() { [ "$(job_field "$job" JobState)" = RUNNING ] && [ "$(job_field "$job" NodeList)" = "$h2" ]; }
wait_until 60 running_on_2 || fail "job $job did not start on $h2 within 60 s"
in_slurm scontrol update NodeName="$h1" State=RESUME >/dev/null
wait_until 120 test -e "$ckpt/checkpoint_100.pt" || fail "job $job wrote no checkpoint_100.pt within 120 s"

# Host 2 is lost: everything in its namespace is this test's (slurmd and the job's processes).
victims=$("$CLUSTER" pids 2)
t_fault=$(now)
# shellcheck disable=SC2086
kill -KILL $victims
in_slurm scontrol update NodeName="$h2" State=DOWN Reason=lost >/dev/null
at_fault=$(find "$ckpt" -name 'checkpoint_*.pt' -printf '%f\n' | sed 's/checkpoint_\([0-9]*\)\.pt/\1/' | sort -n | tail -n 1)
log "host 2 lost at checkpoint $at_fault (killed: $(wc -w <<<"$victims") processes); node set DOWN"
keep_checkpoint "$ckpt" "$at_fault" "$LOGS/reference-ckpt"

# The job's way back, for the log: each change of its state, reason and eligible time.
last=""
for _ in $(seq 1 600); do
  cur=$(in_slurm scontrol -o show job "$job" | grep -o " \(JobState\|Reason\|EligibleTime\|NodeList\)=[^ ]*" | tr -d '\n')
  [ "$cur" != "$last" ] && log "job $job after $(printf %.1f "$(calc "$(now) - $t_fault")") s:$cur"
  last=$cur
  [[ $cur == *"JobState=RUNNING"*"NodeList=$h1"* || $cur == *"JobState=COMPLETED"* || $cur == *"JobState=FAILED"* ]] && break
  sleep 0.5
done
state=$("$SLURM" wait-job "$job" 180 || true)
log "job $job ended $state, $(calc "$(now) - $t_fault") s after the fault"
[ "$state" = COMPLETED ] || fail "job $job ended $state, expected COMPLETED after a requeue"
restarts=$(job_field "$job" Restarts)
[ "$restarts" = 1 ] || fail "job $job: Restarts=$restarts, expected 1"
grep -q "^attempt 1 on $h1 " "$LOGS/requeue.out" || fail "the requeued attempt did not run on $h1"
check_resumed "the requeued job" "$LOGS/requeue.out" "$ckpt" "$at_fault" 2
[ -e "$ckpt/checkpoint_800.pt" ] || fail "the requeued attempt did not reach step 800 (no checkpoint_800.pt)"

t_attempt=$(grep "^attempt 1 on" "$LOGS/requeue.out" | awk '{ print $NF }')
t_first=$(grep "fashion_mnist: timing: rank 0:" "$LOGS/requeue.out" | awk '{ print $NF }' |
  awk -v t="$t_fault" '$1 > t' | head -n 1)
[ -n "$t_first" ] || fail "no --print-timing line of the requeued attempt"
echo "requeue-timing: fault_to_requeued_start_s=$(calc "$t_attempt - $t_fault") fault_to_first_step_s=$(calc "$t_first - $t_fault")"
log "requeued job $job resumed from checkpoint_$at_fault.pt on $h1 and completed"

# The fault-free reference: the same job without requeue, from the kept copy of checkpoint_<at_fault>.pt, on
# host 1 (host 2 is DOWN) with the same 2 tasks.
write_job reference "$LOGS/reference-ckpt" --no-requeue
ref=$(in_slurm sbatch --parsable "$LOGS/reference.sbatch" | cut -d';' -f1)
[[ $ref =~ ^[0-9]+$ ]] || fail "sbatch gave no job id for the reference: $ref"
state=$("$SLURM" wait-job "$ref" 180 || true)
[ "$state" = COMPLETED ] || fail "the reference job $ref ended $state, expected COMPLETED"
check_reference "$LOGS/reference.out" "$LOGS/reference-ckpt" "$at_fault" 2
same_digest requeue "$LOGS/requeue.out" "$LOGS/reference.out" "$at_fault"
finish
