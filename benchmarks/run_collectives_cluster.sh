#!/usr/bin/env bash
# Gloo collectives across 2 emulated hosts (scripts/cluster.sh, tbf on both directions of each link),
# one rank per host launched with torchrun's variables: idist_bench_collectives times idist's call and
# Gloo's own algorithm on a second context, and this script adds each size's fraction of the line
# rate (wire time of the bytes each rank sends / p50). With PIN="0 1" it runs unpinned, then with host
# K's rank on core K-1, as idist::spawn pins its workers. As root; tears the cluster down on exit.
#
#   BUILD_DIR=build benchmarks/run_collectives_cluster.sh
#
# Environment: BUILD_DIR (./build), OUT_DIR (./bench-results; results in <out>/collectives_cluster/),
# RATE (1gbit; tbf's syntax, Mbit or Gbit), PIN ("0 1"), OPS ("all_gather all_to_all reduce_scatter
# all_reduce broadcast"), MIN_BYTES (16777216), MAX_BYTES (33554432), ITERS (7 timed iterations),
# RUN_TIMEOUT (seconds per run, 600).
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_collectives run_collectives_cluster
export IDIST_CLUSTER=${IDIST_CLUSTER:-idcc}
cluster="$root/scripts/cluster.sh"
rate=${RATE:-1gbit}
pins=${PIN:-0 1}
ops=${OPS:-all_gather all_to_all reduce_scatter all_reduce broadcast}
iters=${ITERS:-7}
run_timeout=${RUN_TIMEOUT:-600}
[[ $rate =~ ^([0-9]+)(mbit|gbit)$ ]] || { echo "run_collectives_cluster: RATE=$rate, expected e.g. 1gbit or 100mbit" >&2; exit 1; }
unit=1000000
[ "${BASH_REMATCH[2]}" = gbit ] && unit=1000000000
bits_per_s=$((BASH_REMATCH[1] * unit))
dir=$out/collectives_cluster
mkdir -p "$dir"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
"$cluster" down >/dev/null 2>&1 || true
"$cluster" up 2 --rate "$rate"
h1=$("$cluster" hostname 1)
goodput=$(tcp_goodput "$cluster")
# shellcheck disable=SC2206
args=(--backend gloo --nproc 0 --ops $ops --min-bytes "${MIN_BYTES:-16777216}" --max-bytes "${MAX_BYTES:-33554432}"
  --iters-large "$iters" --warmup-large 1 --timeout 120)
for pin in $pins; do
  [[ $pin == 0 || $pin == 1 ]] || { echo "run_collectives_cluster: PIN has $pin, expected 0 or 1" >&2; exit 1; }
  port=$((20000 + RANDOM % 20000))
  host() { # host K: the benchmark as rank K-1, pinned to core K-1 with PIN=1
    local k=$1
    shift
    local p=()
    [ "$pin" = 1 ] && p=(taskset -c $((k - 1)))
    timeout "$run_timeout" "$cluster" run "$k" "${p[@]}" env RANK=$((k - 1)) LOCAL_RANK=0 WORLD_SIZE=2 \
      LOCAL_WORLD_SIZE=1 MASTER_ADDR="$h1" MASTER_PORT="$port" "$bin" "${args[@]}" "$@"
  }
  host 2 > "$dir/pin$pin.rank1.txt" 2>&1 &
  rank1=$!
  host 1 > "$dir/pin$pin.txt" 2>&1
  wait "$rank1"
done
# Bytes each rank sends, 2 ranks: all_gather of S (the gathered output), all_to_all and reduce_scatter of
# S (each rank's input): S/2; all_reduce (ring: reduce-scatter then all-gather): S; broadcast: S, one way.
{
  echo "# $rate, 2 emulated hosts, 1 rank each; p50 in microseconds; line = wire time of the bytes sent / p50;"
  echo "# idist_tcp = idist_line / $goodput, the fraction of the rate TCP's payload can use (bench_env.sh)"
  printf '%-5s %-15s %10s %12s %12s %9s %9s %9s\n' pin op size_B idist_p50 raw_p50 idist_line raw_line idist_tcp
  for pin in $pins; do
    awk -v pin="$pin" -v bps="$bits_per_s" -v goodput="$goodput" '
      /^## / { op = $2 }
      $1 ~ /^[0-9]+$/ && NF > 12 {
        sent = (op == "all_reduce" || op == "broadcast") ? $1 : $1 / 2
        wire = sent * 8 / bps * 1e6
        printf "%-5s %-15s %10d %12.0f %12.0f %9.2f %9.2f %9.2f\n", pin, op, $1, $5, $12, wire / $5, wire / $12,
               wire / $5 / goodput
      }' "$dir/pin$pin.txt"
  done
} | tee "$dir/summary.txt"
