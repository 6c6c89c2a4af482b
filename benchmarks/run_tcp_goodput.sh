#!/usr/bin/env bash
# TCP's payload rate across 2 emulated hosts (scripts/cluster.sh) with tbf-shaped links, measured by one
# stream each way (benchmarks/tcp_stream.py), against bench_env.sh's tcp_goodput: the fraction of the
# rate left after the frame headers that tbf counts. The cross-host benchmarks' wire times use it.
# As root; tears the cluster down on exit. Builds nothing.
#
#   RATE=1gbit BYTES=268435456 benchmarks/run_tcp_goodput.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench_env.sh
. "$root/benchmarks/bench_env.sh" "" run_tcp_goodput
export IDIST_CLUSTER=${IDIST_CLUSTER:-idtg}
cluster="$root/scripts/cluster.sh"
rate=${RATE:-1gbit}
bytes=${BYTES:-268435456}
[[ $bytes =~ ^[1-9][0-9]*$ && $bytes -le 4294967296 ]] || { echo "run_tcp_goodput: BYTES=$bytes, expected 1..4 GiB" >&2; exit 1; }
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
cluster_up_pair "$rate" >/dev/null
goodput=$(tcp_goodput "$cluster")
echo "# $rate, MTU $("$cluster" run 1 cat /sys/class/net/eth0/mtu): expected payload rate $goodput of the rate"
for dir in "1 2" "2 1"; do
  read -r from to <<< "$dir"
  addr=$("$cluster" addr "$to")
  port=$((20000 + RANDOM % 20000))
  timeout 120 "$cluster" run "$to" python3 "$root/benchmarks/tcp_stream.py" recv "$addr" "$port" "$bytes" > "$out/tcp_goodput.$to" &
  receiver=$!
  sleep 1
  timeout 120 "$cluster" run "$from" python3 "$root/benchmarks/tcp_stream.py" send "$addr" "$port" "$bytes"
  wait "$receiver"
  echo "host $from -> host $to: $(cat "$out/tcp_goodput.$to")"
done
