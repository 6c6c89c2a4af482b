#!/usr/bin/env bash
# What moving bytes over the emulated link costs the ranks' compute: no_sync (no communication of
# idist's) on gloo across 2 emulated hosts (scripts/cluster.sh), one rank per host pinned to core K-1,
# run alternately quiet and while bulk TCP streams (benchmarks/tcp_stream.py) cross the link both ways,
# each host's sender and receiver on its rank's core, as Gloo's transport threads are. The slowdown per
# MiB moved is the CPU the emulated network path takes from the ranks, which real hosts spend in their
# NICs and on other cores (docs/performance.md, "Where the 1.068x at batch 2048 goes").
# As root; tears the cluster down on exit. Results: <out>/contention_<rate>_b<batch>/ and a summary.
#
#   RATE=1gbit BATCH=2048 BUILD_DIR=build benchmarks/run_network_contention.sh
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training run_network_contention
export IDIST_CLUSTER=${IDIST_CLUSTER:-idnc}
cluster="$root/scripts/cluster.sh"
rate=${RATE:-1gbit}
batch=${BATCH:-2048}
seconds=${STREAM_SECONDS:-150}  # each stream's length: longer than one benchmark run
pin=1            # host K's rank and stream ends on core K-1 (bench_env.sh's host_prefix and pair)
run_timeout=600  # seconds per benchmark run
[[ $seconds =~ ^[1-9][0-9]*$ && $seconds -le 600 ]] || { echo "run_network_contention: STREAM_SECONDS=$seconds, expected 1..600" >&2; exit 1; }
dir="$out/contention_${rate}_b$batch"
mkdir -p "$dir"
streams=()
stop_streams() {
  local p
  for p in "${streams[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${streams[@]}"; do wait "$p" 2>/dev/null || true; done
  streams=()
}
trap 'stop_streams; "$cluster" down >/dev/null 2>&1 || true' EXIT
cluster_up_pair "$rate" >/dev/null

# bench <label>: no_sync on both hosts, pinned (bench_env.sh's pair).
bench() {
  pair "$dir/$1" "$bin" --backend gloo --models mlp32x512 --configs no_sync --batch "$batch" --warmup 2 --rounds 3 \
    --steps 4 --out-dir "$dir" --label "$1"
}

# streams_on <label>: one stream each way for $seconds, host K's ends on core K-1.
streams_on() {
  local to addr port
  for to in 1 2; do
    addr=$("$cluster" addr "$to")
    port=$((20000 + RANDOM % 20000))
    host_prefix "$to"
    timeout $((seconds + 60)) "${hp[@]}" python3 "$root/benchmarks/tcp_stream.py" \
      recv "$addr" "$port" $((1 << 40)) "$seconds" > "$dir/$1.stream_to_$to.txt" 2>&1 &
    streams+=($!)
    sleep 1
    host_prefix $((3 - to))
    timeout $((seconds + 60)) "${hp[@]}" python3 "$root/benchmarks/tcp_stream.py" \
      send "$addr" "$port" $((1 << 40)) "$seconds" &
    streams+=($!)
  done
  sleep 2
}

for round in 1 2; do
  bench "quiet$round"
  streams_on "traffic$round"
  bench "traffic$round"
  for p in "${streams[@]}"; do wait "$p" || true; done  # the streams end after $seconds
  streams=()
done

# The summary: each run's p50 step, the streams' rates, and the cost per MiB (the step's growth over the
# MiB each stream carried during one traffic step).
python3 - "$dir" "$rate" "$batch" <<'PY' | tee "$dir/summary.txt"
import csv, glob, os, re, sys
d, rate, batch = sys.argv[1:4]
rows = {r: next(csv.DictReader(open(f"{d}/training_{r}_mlp32x512.csv"))) for r in ("quiet1", "traffic1", "quiet2", "traffic2")}
print(f"# {rate}, batch {batch} per rank: no_sync's p50 step (ms) quiet and with streams both ways")
for r, row in rows.items():
    print(f"{r:<9} p50 {float(row['p50_ms']):8.1f}  forward {float(row['forward_p50_ms']):7.1f}  "
          f"backward {float(row['backward_p50_ms']):7.1f}")
rates = []
for f in sorted(glob.glob(f"{d}/traffic*.stream_to_*.txt")):
    text = open(f).read().strip()
    print(f"# {os.path.basename(f)}: {text}")
    rates += [float(m) for m in re.findall(r"([0-9.]+) Gbit/s", text)]
p50 = lambda r: float(rows[r]["p50_ms"])
quiet, traffic = (p50("quiet1") + p50("quiet2")) / 2, (p50("traffic1") + p50("traffic2")) / 2
if rates:
    mib = sum(rates) / len(rates) * 1e9 / 8 * traffic / 1e3 / 2**20
    print(f"quiet {quiet:.1f} ms, traffic {traffic:.1f} ms, streams {min(rates):.3f}-{max(rates):.3f} Gbit/s "
          f"({mib:.0f} MiB each way per step): {(traffic - quiet) / mib:.2f} ms per MiB each way")
PY
