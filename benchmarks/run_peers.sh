#!/usr/bin/env bash
# The main job against its peers (docs/performance.md): the fashion_mnist example on gloo (idist::Parallel,
# --nproc-per-node) and on mpi (mpirun), PyTorch's own DDP in Python on gloo (benchmarks/peers/
# ddp_fashion_mnist.py, Debian's python3-torch) and the hand-written LibTorch + MPI loop (peer_mpi_loop),
# 2 ranks x 1 intra-op thread each, taking turns for ROUNDS rounds (who goes first rotates). Then, unless
# MLP=0, the 32x512 MLP step: idist_bench_training's auto_model (default buckets) on mpi and gloo against the
# two peers' MLP mode, alternating the same way. Builds nothing; prints the medians and the ratios, and
# writes them under OUT_DIR (peers_runs.jsonl, peers_main_job.csv / .md, peers_mlp.csv / .md, logs/).
#
#   BUILD_DIR=build benchmarks/run_peers.sh              # 3 rounds of 1 full epoch each
#   ROUNDS=1 LIMIT=2048 MLP_STEPS=3 benchmarks/run_peers.sh   # a smoke run
#
# Environment: BUILD_DIR (./build), OUT_DIR (./bench-results), ROUNDS (3), LIMIT (0: all 60 000 images),
# EPOCHS (1), MLP (1), MLP_STEPS (20), MLP_WARMUP (3), PEER_PYTHON (/usr/bin/python3), RUN_TIMEOUT (seconds
# per program run, 1200), STRICT (1: exit 3 when the programs' final weights differ within a round).
# The digests agree today: with 2 ranks every program sums the same two gradients and divides by 2 exactly.
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" peer_mpi_loop run_peers

rounds=${ROUNDS:-3}
limit=${LIMIT:-0}
epochs=${EPOCHS:-1}
python=${PEER_PYTHON:-/usr/bin/python3}
run_timeout=${RUN_TIMEOUT:-1200}
example=$build/examples/fashion_mnist/fashion_mnist
trainer=$build/benchmarks/idist_bench_training
ddp=$root/benchmarks/peers/ddp_fashion_mnist.py
summarize=$root/benchmarks/peers/summarize.py
[ -x "$example" ] || { echo "run_peers: $example not found; build the target fashion_mnist" >&2; exit 1; }
"$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "run_peers: $python has no torch with gloo (Debian: apt install python3-torch)" >&2; exit 1; }
[[ $rounds =~ ^[1-9][0-9]*$ && $rounds -le 50 ]] || { echo "run_peers: ROUNDS=$rounds, expected 1..50" >&2; exit 1; }

runs=$out/peers_runs.jsonl
logs=$out/peers_logs
rm -f "$runs"
mkdir -p "$logs"
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

job=(--epochs "$epochs" --limit "$limit")
mlp=(--warmup "${MLP_WARMUP:-3}" --steps "${MLP_STEPS:-20}")
scratch=$(mktemp -d)  # the training benchmark's own tables
trap 'rm -rf "$scratch"' EXIT

# command_of <program>: sets argv to the program's command. Each prints one JSON line on stdout (rank 0),
# except the training benchmark (mlp_idist_*), whose CSV summarize.py turns into one.
command_of() {
  case $1 in
    example_gloo) argv=("$example" --backend gloo --nproc-per-node "$np" --master-port "$(free_port)" "${job[@]}") ;;
    example_mpi) argv=(mpirun "${mpiflags[@]}" -np "$np" "$example" --backend mpi "${job[@]}") ;;
    ddp_gloo) argv=("$python" "$ddp" --nproc "$np" --threads 1 "${job[@]}") ;;
    mpi_loop) argv=(mpirun "${mpiflags[@]}" -np "$np" "$bin" --threads 1 "${job[@]}") ;;
    # auto_model with the training benchmark's default bucket cap (25 MiB, DDP's), one configuration.
    mlp_idist_gloo) argv=("$trainer" --backend gloo --nproc "$np" --port "$(free_port)" --models mlp32x512
      --configs auto_model:25 --rounds 1 --seed 0 "${mlp[@]}" --threads 1 --out-dir "$scratch" --label peers) ;;
    mlp_idist_mpi) argv=(mpirun "${mpiflags[@]}" -np "$np" "$trainer" --backend mpi --models mlp32x512
      --configs auto_model:25 --rounds 1 --seed 0 "${mlp[@]}" --threads 1 --out-dir "$scratch" --label peers) ;;
    mlp_ddp_gloo) argv=("$python" "$ddp" --mode mlp --nproc "$np" --threads 1 "${mlp[@]}") ;;
    mlp_mpi_loop) argv=(mpirun "${mpiflags[@]}" -np "$np" "$bin" --mode mlp --threads 1 "${mlp[@]}") ;;
    *) echo "run_peers: unknown program $1" >&2; return 1 ;;
  esac
}

# run_rounds <program>...: every program once per round, the first one rotating; appends each JSON line
# (with the round and the program's name) to $runs.
run_rounds() {
  local programs=("$@") n=$# r i p log line
  for ((r = 1; r <= rounds; ++r)); do
    for ((i = 0; i < n; ++i)); do
      p=${programs[$(((r - 1 + i) % n))]}
      log=$logs/${p}_round$r
      echo "# round $r/$rounds: $p (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      command_of "$p"
      rm -f "$scratch"/*.csv
      if ! timeout --kill-after=30 "$run_timeout" "${argv[@]}" > "$log.out" 2> "$log.err"; then
        echo "run_peers: $p failed in round $r (or ran past RUN_TIMEOUT=$run_timeout s):" >&2
        tail -n 20 "$log.err" >&2
        exit 1
      fi
      if [[ $p == mlp_idist_* ]]; then
        line=$("$python" "$summarize" --training-csv "$scratch/training_peers_mlp32x512.csv")
      else
        line=$(grep '^{' "$log.out" | tail -n 1) || { echo "run_peers: $p printed no JSON line" >&2; exit 1; }
      fi
      "$python" "$summarize" --tag "$line" "$r" "$p" >> "$runs"
    done
  done
}

echo "# $(date -u '+%F %T UTC') on $(hostname): $(nproc --all) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee "$out/peers_env.txt"
run_rounds example_gloo ddp_gloo example_mpi mpi_loop
if [ "${MLP:-1}" != 0 ]; then
  if [ -x "$trainer" ]; then
    run_rounds mlp_idist_gloo mlp_ddp_gloo mlp_idist_mpi mlp_mpi_loop
  else
    echo "run_peers: $trainer not found; the MLP step is left out (build idist_bench_training)" >&2
  fi
fi
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/peers_env.txt"
strict=(); [ "${STRICT:-0}" = 1 ] && strict=(--strict)
"$python" "$summarize" --runs "$runs" --out-dir "$out" "${strict[@]}"
