#!/usr/bin/env bash
# idist against PyTorch's DDP in Python across 2 emulated hosts (scripts/cluster.sh, tbf-shaped links),
# one rank per host, launched as users launch them: each host's process gets torchrun's variables
# (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR = host 1's name, MASTER_PORT), mpi through mpirun --host.
# Per RATE and per BATCH (samples per rank), the 32x512 MLP step of benchmarks/training:
#   mlp_idist_gloo / mlp_idist_mpi: idist_bench_training's auto_model (CONFIG, default "auto_model":
#     default options, the bucket cap tuned during the warm-up; "auto_model:25" is DDP's fixed 25 MiB cap,
#     which needs no long warm-up);
#   mlp_ddp_gloo: benchmarks/peers/ddp_fashion_mnist.py --mode mlp, DDP's defaults;
# then, at CNN_RATE, the main job: the fashion_mnist example on gloo against the DDP script's CNN mode
# (1 epoch, global batch 64). The programs take turns for ROUNDS rounds (who goes first rotates); the
# summary gives medians over rounds and idist's speed against DDP's per point (> 1: idist faster).
# As root; tears the cluster down on exit. Builds nothing.
#
#   BUILD_DIR=build benchmarks/run_peers_cluster.sh
#   RATES=1gbit BATCHES=16 ROUNDS=1 STEPS=3 CNN_LIMIT=2048 benchmarks/run_peers_cluster.sh   # a smoke run
#
# Environment: BUILD_DIR (./build), OUT_DIR (./bench-results; results in <out>/peers_cluster/), RATES
# ("1gbit 10gbit"), BATCHES ("16 512 2048"), ROUNDS (3), STEPS (10 timed steps), WARMUP (40 untimed steps:
# enough for the bucket tuner), CONFIG (auto_model), CNN_RATE (1gbit; "none" skips the main job), CNN_LIMIT (0: all 60 000
# images), PEER_PYTHON (/usr/bin/python3), RUN_TIMEOUT (seconds per program run, 900), PIN (0; 1 pins each
# rank to one core, as idist::spawn pins its workers: host K's rank to core K-1).
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training run_peers_cluster
export IDIST_CLUSTER=${IDIST_CLUSTER:-idcp}
cluster="$root/scripts/cluster.sh"
python=${PEER_PYTHON:-/usr/bin/python3}
rates=${RATES:-1gbit 10gbit}
batches=${BATCHES:-16 512 2048}
rounds=${ROUNDS:-3}
steps=${STEPS:-10}
warmup=${WARMUP:-40}
config=${CONFIG:-auto_model}
cnn_rate=${CNN_RATE:-1gbit}
run_timeout=${RUN_TIMEOUT:-900}
pin=${PIN:-0}
example=$build/examples/fashion_mnist/fashion_mnist
summarize=$root/benchmarks/peers/summarize.py
ddp_check run_peers_cluster
[[ $rounds =~ ^[1-9][0-9]*$ && $rounds -le 20 ]] || { echo "run_peers_cluster: ROUNDS=$rounds, expected 1..20" >&2; exit 1; }
[[ $pin == 0 || $pin == 1 ]] || { echo "run_peers_cluster: PIN=$pin, expected 0 or 1" >&2; exit 1; }
if [[ $cnn_rate != none && ! -x $example ]]; then
  echo "run_peers_cluster: $example not found; build the target fashion_mnist (or CNN_RATE=none)" >&2
  exit 1
fi

dir=$out/peers_cluster
runs=$dir/runs.jsonl
logs=$dir/logs
scratch=$(mktemp -d)
mkdir -p "$logs"
rm -f "$runs"
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

# run_program <program> <batch> <log>: one run; prints its JSON line.
run_program() {
  local p=$1 batch=$2 log=$3
  local mlp=(--warmup "$warmup" --steps "$steps")
  local trainer_args=(--models mlp32x512 --configs "$config" --rounds 1 --seed 0 --threads 1 --batch "$batch"
                      "${mlp[@]}" --out-dir "$scratch" --label peers)
  rm -f "$scratch"/*.csv
  case $p in
    mlp_idist_gloo) pair "$log" "$bin" --backend gloo "${trainer_args[@]}" ;;
    mlp_idist_mpi)
      # shellcheck disable=SC2046
      timeout --kill-after=30 "$run_timeout" "$cluster" run 1 mpirun "${mpiflags[@]}" \
        $("$root/scripts/cluster-agent.sh" --mpirun-flags) --host "$h1:1,$h2:1" -np 2 -x OMP_NUM_THREADS \
        "${mpi_pin[@]}" "$bin" --backend mpi "${trainer_args[@]}" > "$log.out" 2> "$log.err" ;;
    mlp_ddp_gloo) ddp_pair "$log" --mode mlp --mlp-batch "$batch" "${mlp[@]}" ;;
    example_gloo) pair "$log" "$example" --backend gloo --epochs 1 --limit "${CNN_LIMIT:-0}" ;;
    ddp_gloo) ddp_pair "$log" --epochs 1 --limit "${CNN_LIMIT:-0}" ;;
    *) echo "run_peers_cluster: unknown program $p" >&2; return 1 ;;
  esac || { echo "run_peers_cluster: $p failed (or ran past RUN_TIMEOUT=$run_timeout s):" >&2
            tail -n 20 "$log.err"* >&2; return 1; }
  if [[ $p == mlp_idist_* ]]; then
    "$python" "$summarize" --training-csv "$scratch/training_peers_mlp32x512.csv"
  else
    grep '^{' "$log.out" | tail -n 1 || { echo "run_peers_cluster: $p printed no JSON line" >&2; return 1; }
  fi
}

# rounds_of <rate> <batch> <program>...: every program once per round, the first one rotating; each JSON
# line goes to $runs with the point (rate, batch), the round and the program.
rounds_of() {
  local rate=$1 batch=$2 r i p line
  shift 2
  local programs=("$@") n=$#
  for ((r = 1; r <= rounds; ++r)); do
    for ((i = 0; i < n; ++i)); do
      p=${programs[$(((r - 1 + i) % n))]}
      echo "# $rate batch $batch round $r/$rounds: $p (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      line=$(run_program "$p" "$batch" "$logs/${rate}_b${batch}_${p}_r$r")
      "$python" -c 'import json, sys
d = json.loads(sys.argv[1]); d.update(rate=sys.argv[2], batch=int(sys.argv[3]), round=int(sys.argv[4]), program=sys.argv[5])
print(json.dumps(d))' "$line" "$rate" "$batch" "$r" "$p" >> "$runs"
    done
  done
}

# PIN=1 under mpirun: rank K to core K (Open MPI's --bind-to core would bind both hosts' ranks to core 0,
# each host counting its cores from 0).
mpi_pin=()
# shellcheck disable=SC2016
[ "$pin" = 1 ] && mpi_pin=(--bind-to none sh -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$@"' pin)
backends=$("$bin" --list-backends)
mlp_programs=(mlp_ddp_gloo)
[[ " $backends " == *" gloo "* ]] && mlp_programs+=(mlp_idist_gloo)
[[ " $backends " == *" mpi "* ]] && mlp_programs+=(mlp_idist_mpi)
echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; 2 emulated hosts, 1 rank each; pin=$pin;" \
  "idist config $config, warm-up $warmup, $steps timed steps, $rounds rounds;" \
  "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$dir/env.txt"
for rate in $rates; do
  cluster_up_pair "$rate"
  for batch in $batches; do
    rounds_of "$rate" "$batch" "${mlp_programs[@]}"
  done
  if [[ $rate == "$cnn_rate" ]]; then
    rounds_of "$rate" 32 ddp_gloo example_gloo
  fi
  "$cluster" down
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$dir/env.txt"

# Medians over rounds per point and program; idist's speed against DDP's (DDP time / idist time for the
# MLP step, images/s ratio for the main job).
"$python" - "$runs" <<'EOF' | tee "$dir/summary.txt"
import json, statistics, sys
from collections import defaultdict
runs = [json.loads(l) for l in open(sys.argv[1])]
ms, ips = defaultdict(list), defaultdict(list)
for r in runs:
    key = (r["rate"], r["batch"], r["program"])
    if "p50_ms" in r:
        ms[key].append(r["p50_ms"])
    if "images_per_s" in r:
        ips[key].append(r["images_per_s"])
print("# p50 step (ms), medians over rounds; x_ddp = DDP's step / idist's step (> 1: idist faster)")
print(f"{'rate':7} {'batch':>5} {'ddp_gloo_ms':>12} {'idist_gloo_ms':>14} {'x_ddp':>7} {'idist_mpi_ms':>13} {'x_ddp':>7} {'rounds':>6}")
for rate, batch in sorted({(k[0], k[1]) for k in ms}, key=lambda p: (p[0], p[1])):
    ddp = ms.get((rate, batch, "mlp_ddp_gloo"))
    if not ddp:
        continue
    d = statistics.median(ddp)
    row = f"{rate:7} {batch:5d} {d:12.2f}"
    for prog in ("mlp_idist_gloo", "mlp_idist_mpi"):
        v = ms.get((rate, batch, prog))
        row += f" {statistics.median(v):13.2f} {d / statistics.median(v):7.3f}" if v else f" {'-':>13} {'-':>7}"
    print(row + f" {len(ddp):6d}")
for (rate, batch, prog), v in sorted(ips.items()):
    if prog == "example_gloo" and (rate, batch, "ddp_gloo") in ips:
        d = statistics.median(ips[(rate, batch, "ddp_gloo")])
        print(f"# main job at {rate} (global batch 64, 1 epoch): example on gloo {statistics.median(v):.0f} images/s, "
              f"DDP {d:.0f} images/s, x_ddp {statistics.median(v) / d:.3f} ({len(v)} rounds)")
EOF
