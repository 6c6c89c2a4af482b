#!/usr/bin/env bash
# The example's slowdown with periodic checkpoints: fashion_mnist without checkpoints against
# --checkpoint-dir DIR --checkpoint-every-steps 100, alternating, RUNS times each, on NP ranks of mpi
# (one intra-op thread per rank). Prints each run's train_seconds (training only: the epoch-end
# evaluation is not counted, the mid-epoch saves are) and wall seconds, then the medians and the
# slowdown. The issue's target: at most 5 %.
#
#   benchmarks/checkpoint/run_example_overhead.sh [RUNS] [fashion_mnist args...]
#   RUNS=5 NP=2 BUILD_DIR=build CKPT_DIR=/tmp/x benchmarks/checkpoint/run_example_overhead.sh 5 --epochs 1
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
bin=$build/examples/fashion_mnist/fashion_mnist
np=${NP:-2}
runs=${1:-5}
shift || true
ckpt_dir=${CKPT_DIR:-$(mktemp -d /tmp/idist-ckpt-overhead-XXXXXX)}
[ -x "$bin" ] || { echo "run_example_overhead.sh: $bin not found; build the target fashion_mnist" >&2; exit 1; }
export OMP_NUM_THREADS=1
trap 'rm -rf "$ckpt_dir"' EXIT

# one <label> <args...>: one run; prints "<label> <train_seconds> <wall_seconds>".
one() {
  local label=$1
  shift
  local start end json err
  err=$(mktemp)
  start=$(date +%s.%N)
  json=$(mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np "$np" \
    "$bin" --backend mpi "$@" 2>"$err" | grep '^{' | tail -n 1) || true
  end=$(date +%s.%N)
  if [ -z "$json" ]; then
    echo "run_example_overhead.sh: the $label run failed:" >&2
    tail -n 20 "$err" >&2
    rm -f "$err"
    exit 1
  fi
  rm -f "$err"
  local train
  train=$(sed -E 's/.*"train_seconds": ([0-9.]+).*/\1/' <<<"$json")
  echo "$label $train $(echo "$end - $start" | bc -l)"
}

results=$(mktemp)
for ((i = 1; i <= runs; i++)); do
  one plain "$@" | tee -a "$results"
  rm -rf "$ckpt_dir"
  one checkpoint "$@" --checkpoint-dir "$ckpt_dir" --checkpoint-every-steps 100 | tee -a "$results"
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for col in 2 3; do
  name=$([ "$col" = 2 ] && echo train_seconds || echo wall_seconds)
  plain=$(awk -v c="$col" '$1 == "plain" {print $c}' "$results" | median)
  ckpt=$(awk -v c="$col" '$1 == "checkpoint" {print $c}' "$results" | median)
  echo "$name median: plain $plain, --checkpoint-every-steps 100 $ckpt, slowdown $(echo "($ckpt / $plain - 1) * 100" | bc -l | xargs printf '%.1f') %"
done
rm -f "$results"
