#!/usr/bin/env bash
# The training benchmark across 2 emulated hosts (scripts/cluster.sh) whose links are shaped with tbf:
# one rank per host, one LibTorch thread per rank, for each RATE and each backend:
#   mpi:  mpirun on host 1 with --host <h1>,<h2> and the cluster's launcher agent (Open MPI's TCP BTL);
#   gloo: one process per host with torchrun-style variables, MASTER_ADDR = host 1's name.
# Configurations: the per-parameter status quo, no_sync (no communication: the floor) and auto_model
# over a bucket sweep (SGD), then ZeroRedundancyOptimizer against auto_model + Adam (ZERO_CONFIGS;
# empty: none). Results: <out>/cluster_<rate>/training_<backend>_<model>.{csv,md} and
# <out>/cluster_summary.txt (each configuration / no_sync and / status quo; zero / auto_model_adam
# with the same bucket cap).
# As root; tears the cluster down on exit.
#
#   RATES="1gbit 10gbit" MODELS=mlp32x512 BUILD_DIR=build benchmarks/run_training_cluster.sh [args...]
# Extra arguments go to the benchmark (e.g. --rounds 2 --steps 3).
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training run_training_cluster
export IDIST_CLUSTER=${IDIST_CLUSTER:-idcb}
cluster="$root/scripts/cluster.sh"
rates=${RATES:-1gbit 10gbit}
models=${MODELS:-mlp32x512}
backends=${BACKENDS:-$("$bin" --list-backends)}
configs=${CONFIGS:-status_quo_idist,no_sync,auto_model:1,auto_model:5,auto_model:25}
zero_configs=${ZERO_CONFIGS-auto_model_adam:5,zero:5}
[ -n "$zero_configs" ] && configs="$configs,$zero_configs"
# mpi runs once per entry: auto = idist's default across hosts (the progress thread on), 0 = without it
# (buckets all-reduced inside the gradient hooks; files labelled mpi-nothread), 1 = forced on.
mpi_progress=${MPI_PROGRESS:-auto 0}
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; 2 emulated hosts, 1 rank each" |
  tee "$out/cluster_env.txt"
for rate in $rates; do
  "$cluster" down >/dev/null 2>&1 || true
  "$cluster" up 2 --rate "$rate"
  h1=$("$cluster" hostname 1)
  h2=$("$cluster" hostname 2)
  dir="$out/cluster_$rate"
  mkdir -p "$dir"
  for b in $backends; do
    args=(--backend "$b" --models "$models" --configs "$configs" --out-dir "$dir" "$@")
    case $b in
      mpi)
        for p in $mpi_progress; do
          label=mpi
          [ "$p" = auto ] || label=mpi-thread$p
          [ "$p" = 0 ] && label=mpi-nothread
          # shellcheck disable=SC2046
          "$cluster" run 1 env IDIST_MPI_PROGRESS_THREAD="$p" mpirun "${mpiflags[@]}" \
            $("$root/scripts/cluster-agent.sh" --mpirun-flags) --host "$h1:1,$h2:1" -np 2 -x OMP_NUM_THREADS \
            -x IDIST_MPI_PROGRESS_THREAD ${IDIST_MPI_PROGRESS_CHUNK_BYTES:+-x IDIST_MPI_PROGRESS_CHUNK_BYTES} \
            ${IDIST_MPI_PROGRESS_INTERVAL_US:+-x IDIST_MPI_PROGRESS_INTERVAL_US} \
            "$bin" "${args[@]}" --label "$label" | tee "$dir/training_$label.txt"
        done
        ;;
      gloo)
        port=$((20000 + RANDOM % 20000))
        "$cluster" run 2 env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$h1" \
          MASTER_PORT="$port" "$bin" "${args[@]}" > "$dir/training_gloo.rank1.txt" 2>&1 &
        rank1=$!
        "$cluster" run 1 env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$h1" \
          MASTER_PORT="$port" "$bin" "${args[@]}" | tee "$dir/training_gloo.txt"
        wait "$rank1"
        ;;
      *) continue ;;
    esac
  done
  "$cluster" down
done

# Per rate, backend and model: each configuration's p50 against no_sync and against the status quo.
{
  echo "# ratios of p50 step times (ms); exposed = config - no_sync; x_auto_adam = zero:N / auto_model_adam:N"
  printf "%-7s %-5s %-10s %-18s %9s %9s %10s %10s %11s\n" rate backend model config p50_ms exposed_ms x_no_sync \
    x_status_quo x_auto_adam
  for rate in $rates; do
    for f in "$out/cluster_$rate"/training_*_*.csv; do
      [ -e "$f" ] || continue
      b=$(basename "$f" .csv); b=${b#training_}; b=${b%%_*}
      awk -F, -v rate="$rate" -v b="$b" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { n++; cfg[n] = $(c["config"]); p[n] = $(c["p50_ms"]); m = $(c["model"]) }
        END { for (i = 1; i <= n; i++) { if (cfg[i] == "no_sync") ns = p[i]; if (cfg[i] == "status_quo_idist") sq = p[i]
                                         if (cfg[i] ~ /^auto_model_adam:/) { cap = cfg[i]; sub(/^[^:]*:/, "", cap); adam[cap] = p[i] } }
              for (i = 1; i <= n; i++) {
                cap = cfg[i]; sub(/^[^:]*:/, "", cap)
                za = (cfg[i] ~ /^zero(_staged)?:/ && adam[cap] > 0) ? sprintf("%.3f", p[i] / adam[cap]) : "-"
                printf "%-7s %-5s %-10s %-18s %9.1f %9.1f %10.3f %10s %11s\n", rate, b, m, cfg[i], p[i], p[i] - ns,
                       (ns > 0 ? p[i] / ns : 0), (sq > 0 ? sprintf("%.3f", p[i] / sq) : "-"), za } }' "$f"
    done
  done
} | tee "$out/cluster_summary.txt"
"$root/benchmarks/plot_cluster.sh" "$out" "${IMG_DIR:-$root/docs/img}" "${models%%,*}"
