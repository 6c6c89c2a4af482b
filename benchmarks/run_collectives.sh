#!/usr/bin/env bash
# Runs the collectives benchmark on every compiled CPU backend (mpi under mpirun, gloo through
# idist::spawn), 2 ranks by default, then draws the plots. Extra arguments go to the benchmark
# (e.g. --large for 256 MiB, --iters-scale 0.1 for a quick look).
#
#   benchmarks/run_collectives.sh                   # build dir ./build, results in ./bench-results
#   BUILD_DIR=build-bench NP=2 benchmarks/run_collectives.sh --large
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_collectives run_collectives

backends=$("$bin" --list-backends)
echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/collectives_env.txt"
for b in $backends; do
  case $b in
    mpi)
      launch mpi --out-dir "$out" "$@" | tee "$out/collectives_mpi.txt"
      # Again with the polled non-blocking calls (InitOptions::mpi_blocking_collectives = false).
      launch mpi --mpi-polled --out-dir "$out" "$@" | tee "$out/collectives_mpi_polled.txt" ;;
    gloo) launch gloo --out-dir "$out" "$@" | tee "$out/collectives_gloo.txt" ;;
  esac
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/collectives_env.txt"
"$root/benchmarks/plot.sh" "$out" "${IMG_DIR:-$root/docs/img}"
