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
# Then the cross-host bound (BOUND=0: skipped; SWEEP=0 skips the sweep above): on BOUND_RATE, the
# 32x512 MLP at BOUND_BATCHES samples per rank, auto_model with default options (the bucket cap
# tuned during the warm-up) against max(no_sync, wire time of the gradients at the link rate), and
# auto_model with the fp16 hook against max(no_sync, wire time / 2). Wire time: the gradient bytes
# at the rate (a 2-rank all-reduce sends and receives each rank's gradients' size once). Results:
# <out>/bound_<rate>/batch<B>/ and <out>/bound_summary.txt (ratios; the issue's limit is 1.15), with the
# synchronous floor forward + max(backward + optimizer step, wire) from no_sync's timed phases, also with
# the wire time at TCP's goodput on the shaped link (tcp_goodput in bench_env.sh).
# At every bound point PyTorch's DDP in Python runs the same MLP step too (benchmarks/peers/
# ddp_fashion_mnist.py, gloo, DDP's defaults, one process per host started like idist's gloo ranks,
# BOUND_DDP_STEPS timed steps, default 12, after 10 untimed); bound_summary.txt gives its p50 and
# x_ddp = DDP's step / auto_model's (> 1: idist faster). BOUND_DDP=0 skips it.
# PIN=1 pins each rank to one core (host K's rank to core K-1, as idist::spawn pins its workers); by
# default (0) the ranks float over both cores. RUN_TIMEOUT: seconds per benchmark run (3600).
# IDIST_CLUSTER_BURST (bytes) reaches scripts/cluster.sh: tbf's bucket on every link, instead of 1 ms of the rate.
# As root; tears the cluster down on exit.
#
#   RATES="1gbit 10gbit" MODELS=mlp32x512 BUILD_DIR=build benchmarks/run_training_cluster.sh [args...]
#   SWEEP=0 BOUND_BATCHES=16 benchmarks/run_training_cluster.sh --rounds 1 --steps 2   # a quick look
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
zero_configs=${ZERO_CONFIGS-auto_model_adam:5,zero:5,zero2:5}
[ -n "$zero_configs" ] && configs="$configs,$zero_configs"
# mpi runs once per entry: auto = idist's default across hosts (the progress thread on), 0 = without it
# (buckets all-reduced inside the gradient hooks; files labelled mpi-nothread), 1 = forced on.
mpi_progress=${MPI_PROGRESS:-auto 0}
pin=${PIN:-0}
[[ $pin == 0 || $pin == 1 ]] || { echo "run_training_cluster: PIN=$pin, expected 0 or 1" >&2; exit 1; }
# Under mpirun, rank K to core K (Open MPI's --bind-to core would bind both hosts' ranks to core 0).
mpi_pin=()
# shellcheck disable=SC2016
[ "$pin" = 1 ] && mpi_pin=(--bind-to none sh -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$@"' pin)
# Seconds each benchmark run may take (a hung rank ends there, the run fails).
run_timeout=${RUN_TIMEOUT:-3600}
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

sweep=${SWEEP:-1}
bound=${BOUND:-1}
bound_rate=${BOUND_RATE:-1gbit}
bound_batches=${BOUND_BATCHES:-16 512 2048}
# Enough untimed steps for auto_model to finish tuning its bucket cap (at most 31 backwards); a
# --warmup among the arguments replaces it.
bound_warmup=${BOUND_WARMUP:-40}
# The bound needs no_sync, auto_model and auto_model+fp16; fixed caps (auto_model:<MiB>) may be added to
# compare the tuned cap with them.
bound_configs=${BOUND_CONFIGS:-no_sync,auto_model,auto_model+fp16}
bound_ddp=${BOUND_DDP:-1}
bound_ddp_steps=${BOUND_DDP_STEPS:-12}
[[ $bound_ddp == 0 || $bound_ddp == 1 ]] || { echo "run_training_cluster: BOUND_DDP=$bound_ddp, expected 0 or 1" >&2; exit 1; }
[[ $bound_ddp_steps =~ ^[1-9][0-9]{0,3}$ ]] ||
  { echo "run_training_cluster: BOUND_DDP_STEPS=$bound_ddp_steps, expected 1..9999" >&2; exit 1; }
[[ $bound == 0 || $bound_ddp == 0 ]] || ddp_check run_training_cluster

# run_backends DIR CONFIGS MODELS ARGS...: the benchmark on the cluster that is up, for each backend.
run_backends() {
  local dir=$1 configs=$2 models=$3 b p label
  shift 3
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
          timeout --kill-after=30 "$run_timeout" "$cluster" run 1 env IDIST_MPI_PROGRESS_THREAD="$p" mpirun "${mpiflags[@]}" \
            $("$root/scripts/cluster-agent.sh" --mpirun-flags) --host "$h1:1,$h2:1" -np 2 -x OMP_NUM_THREADS \
            -x IDIST_MPI_PROGRESS_THREAD ${IDIST_MPI_PROGRESS_CHUNK_BYTES:+-x IDIST_MPI_PROGRESS_CHUNK_BYTES} \
            ${IDIST_MPI_PROGRESS_INTERVAL_US:+-x IDIST_MPI_PROGRESS_INTERVAL_US} \
            "${mpi_pin[@]}" "$bin" "${args[@]}" --label "$label" | tee "$dir/training_$label.txt"
        done
        ;;
      gloo)
        pair "$dir/training_gloo" "$bin" "${args[@]}" ||
          { echo "run_training_cluster: gloo failed (or ran past RUN_TIMEOUT=$run_timeout s):" >&2
            cat "$dir/training_gloo.err" "$dir/training_gloo.err1" >&2; exit 1; }
        cat "$dir/training_gloo.out"
        ;;
      *) continue ;;
    esac
  done
}

echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; 2 emulated hosts, 1 rank each" |
  tee "$out/cluster_env.txt"
if [ "$sweep" = 1 ]; then
  for rate in $rates; do
    cluster_up_pair "$rate"
    run_backends "$out/cluster_$rate" "$configs" "$models" "$@"
    "$cluster" down
  done
fi

if [ "$bound" = 1 ]; then
  cluster_up_pair "$bound_rate"
  bound_args=("$@")
  case " $* " in
    *" --warmup "* | *" --warmup="*) ;;  # the caller's warm-up (it must cover the tuning)
    *) bound_args+=(--warmup "$bound_warmup") ;;
  esac
  for batch in $bound_batches; do
    rm -f "$out/bound_$bound_rate/batch$batch"/ddp.*  # an earlier run's DDP must not reach this summary
    run_backends "$out/bound_$bound_rate/batch$batch" "$bound_configs" mlp32x512 \
      --batch "$batch" "${bound_args[@]}"
    if [ "$bound_ddp" = 1 ]; then
      ddp_pair "$out/bound_$bound_rate/batch$batch/ddp" --mode mlp --mlp-batch "$batch" --warmup 10 \
        --steps "$bound_ddp_steps" ||
        { echo "run_training_cluster: PyTorch's DDP failed (or ran past RUN_TIMEOUT=$run_timeout s):" >&2
          cat "$out/bound_$bound_rate/batch$batch"/ddp.err* >&2; exit 1; }
    fi
  done
  goodput=$(tcp_goodput "$cluster")
  "$cluster" down
  # Link rate in bit/s from the cluster's RATE notation (100mbit, 1gbit, ...).
  rate_bits=$(awk -v r="$bound_rate" 'BEGIN { n = r + 0; u = r; sub(/^[0-9]+/, "", u)
    m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; print n * m }')
  {
    echo "# the cross-host bound at $bound_rate: p50 step (ms) against max(no_sync, wire) (default options) and"
    echo "# max(no_sync, wire / 2) (fp16 hook); wire = gradient bytes * 8 / rate; the limit is 1.15 (1.00 ideal)."
    echo "# floor: the synchronous floor forward + max(backward + step, wire) from no_sync's phases; x_floor ="
    echo "# auto_ms / floor_ms (target 1.10). tcp_ms: the wire time at TCP's goodput, $goodput of the rate (tbf"
    echo "# counts each frame's headers: bench_env.sh's tcp_goodput); floor_tcp and x_floor_tcp use it."
    echo "# ddp_ms: PyTorch's DDP (gloo, its defaults) on the same hosts; x_ddp = ddp_ms / auto_ms (> 1: idist faster)."
    echo "# best_cap: the fastest fixed cap among BOUND_CONFIGS' auto_model:<MiB>; x_best = auto_ms / its p50 (the tuner's miss)."
    printf "%-13s %6s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %11s %9s %7s %8s %7s\n" backend batch no_sync \
      wire_ms auto_ms x_bound fp16_ms x_bound16 fwd_ms bwd_ms step_ms floor_ms x_floor tcp_ms floor_tcp x_floor_tcp ddp_ms \
      x_ddp best_cap x_best
    for batch in $bound_batches; do
      ddp_ms=""
      [ ! -e "$out/bound_$bound_rate/batch$batch/ddp.out" ] ||
        ddp_ms=$(sed -n 's/.*"p50_ms": *\([0-9.]*\).*/\1/p' "$out/bound_$bound_rate/batch$batch/ddp.out" | tail -n 1)
      for f in "$out/bound_$bound_rate/batch$batch"/training_*_mlp32x512.csv; do
        [ -e "$f" ] || continue
        b=$(basename "$f" _mlp32x512.csv); b=${b#training_}
        awk -F, -v b="$b" -v batch="$batch" -v bits="$rate_bits" -v goodput="$goodput" -v ddp="${ddp_ms:-0}" '
          NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
          { p[$(c["config"])] = $(c["p50_ms"]); g = $(c["grad_MiB"])
            if ($(c["config"]) ~ /^auto_model:[0-9]+$/ && (best == "" || $(c["p50_ms"]) < best)) {
              best = $(c["p50_ms"]); cap = $(c["config"]); sub(/^auto_model:/, "", cap) }
            if ($(c["config"]) == "no_sync" && ("forward_p50_ms" in c)) {
              fw = $(c["forward_p50_ms"]); bw = $(c["backward_p50_ms"]); st = $(c["step_p50_ms"]) } }
          END { ns = p["no_sync"]; wire = g * 1048576 * 8 / bits * 1000
                lim = ns > wire ? ns : wire; lim16 = ns > wire / 2 ? ns : wire / 2
                floor = fw + (bw + st > wire ? bw + st : wire)
                tcp = wire / goodput; floor_tcp = fw + (bw + st > tcp ? bw + st : tcp)
                printf "%-13s %6s %9.2f %9.2f %9.2f %9.3f %9.2f %9.3f %9.2f %9.2f %9.2f %9.2f %9.3f %9.2f %9.2f %11.3f %9s %7s %8s %7s\n",
                       b, batch, ns, wire, p["auto_model"], (lim > 0 ? p["auto_model"] / lim : 0), p["auto_model+fp16"],
                       (lim16 > 0 ? p["auto_model+fp16"] / lim16 : 0), fw, bw, st, floor,
                       (floor > 0 ? p["auto_model"] / floor : 0), tcp, floor_tcp,
                       (floor_tcp > 0 ? p["auto_model"] / floor_tcp : 0),
                       (ddp > 0 ? sprintf("%.2f", ddp) : "-"),
                       (ddp > 0 && p["auto_model"] > 0 ? sprintf("%.3f", ddp / p["auto_model"]) : "-"),
                       (best > 0 ? cap : "-"), (best > 0 ? sprintf("%.3f", p["auto_model"] / best) : "-") }' "$f"
      done
    done
  } | tee "$out/bound_summary.txt"
fi

[ "$sweep" = 1 ] || exit 0
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
                za = (cfg[i] ~ /^zero(_staged|2)?(_overlap|_interleaved)?:/ && adam[cap] > 0) ? sprintf("%.3f", p[i] / adam[cap]) : "-"
                printf "%-7s %-5s %-10s %-18s %9.1f %9.1f %10.3f %10s %11s\n", rate, b, m, cfg[i], p[i], p[i] - ns,
                       (ns > 0 ? p[i] / ns : 0), (sq > 0 ? sprintf("%.3f", p[i] / sq) : "-"), za } }' "$f"
    done
  done
} | tee "$out/cluster_summary.txt"
"$root/benchmarks/plot_cluster.sh" "$out" "${IMG_DIR:-$root/docs/img}" "${models%%,*}"
