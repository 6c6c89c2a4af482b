#!/usr/bin/env bash
# Runs the collectives benchmark on every compiled CPU backend (mpi under mpirun, gloo through
# idist::spawn), 2 ranks by default, then draws the plots. Extra arguments go to the benchmark
# (e.g. --large for 256 MiB, --iters-scale 0.1 for a quick look).
#
#   benchmarks/run_collectives.sh                   # build dir ./build, results in ./bench-results
#   BUILD_DIR=build-bench NP=2 benchmarks/run_collectives.sh --large
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${OUT_DIR:-$root/bench-results}
np=${NP:-2}
bin=$build/benchmarks/idist_bench_collectives
mpiflags=(--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none)
[ -x "$bin" ] || { echo "run_collectives: $bin not found; build the target idist_bench_collectives" >&2; exit 1; }
mkdir -p "$out"
export OMP_NUM_THREADS=1

backends=$("$bin" --list-backends)
echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/collectives_env.txt"
for b in $backends; do
  case $b in
    mpi)
      mpirun "${mpiflags[@]}" -np "$np" "$bin" --backend mpi --out-dir "$out" "$@" | tee "$out/collectives_mpi.txt"
      # Again with MPI's blocking calls under the watchdog (InitOptions::mpi_blocking_collectives).
      mpirun "${mpiflags[@]}" -np "$np" "$bin" --backend mpi --mpi-blocking --out-dir "$out" "$@" |
        tee "$out/collectives_mpi_blocking.txt" ;;
    gloo) "$bin" --backend gloo --nproc "$np" --out-dir "$out" "$@" | tee "$out/collectives_gloo.txt" ;;
  esac
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/collectives_env.txt"
"$root/benchmarks/plot.sh" "$out" "${IMG_DIR:-$root/docs/img}"
