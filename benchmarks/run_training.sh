#!/usr/bin/env bash
# Runs the training benchmark: one process without idist (serial), then 2 ranks on every compiled
# CPU backend (mpi under mpirun, gloo through idist::spawn) with every configuration interleaved,
# then one short process per configuration for its peak resident memory, then draws the plots.
# Extra arguments go to the timed runs (e.g. --models mlp200x64 --rounds 2).
#
#   benchmarks/run_training.sh                      # build dir ./build, results in ./bench-results
#   BUILD_DIR=build-bench benchmarks/run_training.sh
#   PARTS=memory benchmarks/run_training.sh         # only the memory runs ("timed memory" by default)
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training run_training

backends=$("$bin" --list-backends)
parts=${PARTS:-timed memory}
if [[ " $parts " == *" timed "* ]]; then
  echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee "$out/training_env.txt"
  for b in serial $backends; do
    launch "$b" --out-dir "$out" "$@" | tee "$out/training_$b.txt"
  done
fi
[[ " $parts " == *" memory "* ]] || { "$root/benchmarks/plot.sh" "$out" "${IMG_DIR:-$root/docs/img}"; exit 0; }

# Peak resident memory: one process per (backend, model, configuration), a few steps each.
rm -f "$out/training_memory.csv"
scratch=$(mktemp -d)  # the memory runs' own tables are not kept
trap 'rm -rf "$scratch"' EXIT
for m in cnn mlp32x512 mlp200x64; do
  launch serial --models "$m" --configs local --warmup 1 --rounds 1 --steps 2 --out-dir "$scratch" \
    --memory-csv "$out/training_memory.csv" > /dev/null
  for b in $backends; do
    for c in status_quo_idist status_quo_raw no_sync auto_model:25 auto_model_copy:25; do
      launch "$b" --models "$m" --configs "$c" --warmup 1 --rounds 1 --steps 2 --out-dir "$scratch" \
        --memory-csv "$out/training_memory.csv" > /dev/null
    done
  done
done
column -s, -t < "$out/training_memory.csv" | tee "$out/training_memory.txt"
echo "# load after the memory runs: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/training_env.txt"
"$root/benchmarks/plot.sh" "$out" "${IMG_DIR:-$root/docs/img}"
