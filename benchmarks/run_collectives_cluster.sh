#!/usr/bin/env bash
# Collectives across 2 emulated hosts (scripts/cluster.sh, tbf on both directions of each link), one
# rank per host: gloo launched with torchrun's variables, mpi by mpirun --host (Open MPI's TCP
# transport). idist_bench_collectives times idist's call and the backend's own (Gloo's algorithm on a
# second context; MPI's blocking and non-blocking calls), and this script adds each size's fraction of
# the line rate (wire time of the bytes each rank sends / p50). With PIN="0 1" it runs unpinned, then
# with host K's rank on core K-1, as idist::spawn pins its workers. SKEW_US makes rank 0 arrive that
# late at every timed call. As root; tears the cluster down on exit.
#
#   BUILD_DIR=build benchmarks/run_collectives_cluster.sh
#
# Environment: BUILD_DIR (./build), OUT_DIR (./bench-results; results in <out>/collectives_cluster/),
# BACKEND (gloo or mpi), SKEW_US (0), RATE (1gbit; tbf's syntax, Mbit or Gbit), PIN ("0 1"), OPS ("all_gather all_to_all reduce_scatter
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
backend=${BACKEND:-gloo}
[[ $backend == gloo || $backend == mpi ]] || { echo "run_collectives_cluster: BACKEND=$backend, expected gloo or mpi" >&2; exit 1; }
run_timeout=${RUN_TIMEOUT:-600}
[[ $rate =~ ^([0-9]+)(mbit|gbit)$ ]] || { echo "run_collectives_cluster: RATE=$rate, expected e.g. 1gbit or 100mbit" >&2; exit 1; }
unit=1000000
[ "${BASH_REMATCH[2]}" = gbit ] && unit=1000000000
bits_per_s=$((BASH_REMATCH[1] * unit))
dir=$out/collectives_cluster
mkdir -p "$dir"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
cluster_up_pair "$rate"
goodput=$(tcp_goodput "$cluster")
# shellcheck disable=SC2206
args=(--backend "$backend" --ops $ops --min-bytes "${MIN_BYTES:-16777216}" --max-bytes "${MAX_BYTES:-33554432}"
  --iters-large "$iters" --warmup-large 1 --timeout 120 --skew-us "${SKEW_US:-0}")
[ "$backend" = gloo ] && args+=(--nproc 0)
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
  if [ "$backend" = mpi ]; then
    mpi_pin=()
    # shellcheck disable=SC2016
    [ "$pin" = 1 ] && mpi_pin=(sh -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$@"' pin)
    # shellcheck disable=SC2046
    timeout "$run_timeout" "$cluster" run 1 mpirun "${mpiflags[@]}" $("$root/scripts/cluster-agent.sh" --mpirun-flags) \
      --host "$h1:1,$h2:1" -np 2 "${mpi_pin[@]}" "$bin" "${args[@]}" > "$dir/pin$pin.txt" 2>&1
    continue
  fi
  host 2 > "$dir/pin$pin.rank1.txt" 2>&1 &
  rank1=$!
  host 1 > "$dir/pin$pin.txt" 2>&1
  wait "$rank1"
done
# Bytes each rank sends, 2 ranks: all_gather of S (the gathered output), all_to_all and reduce_scatter of
# S (each rank's input): S/2; all_reduce (ring: reduce-scatter then all-gather): S; broadcast: S, one way.
{
  echo "# $backend, $rate, 2 emulated hosts, 1 rank each, rank 0 ${SKEW_US:-0} us late; p50 in microseconds;"
  echo "# line = wire time of the bytes sent / p50;"
  echo "# idist_tcp = idist_line / $goodput, the fraction of the rate TCP's payload can use (bench_env.sh)"
  echo "# raw: Gloo's algorithm (gloo) or MPI's blocking call (mpi); raw_nb (mpi): MPI's non-blocking call + wait"
  printf '%-5s %-15s %10s %12s %12s %12s %9s %9s %9s %9s\n' pin op size_B idist_p50 raw_p50 raw_nb_p50 idist_line \
    raw_line raw_nb_line idist_tcp
  for pin in $pins; do
    awk -v pin="$pin" -v bps="$bits_per_s" -v goodput="$goodput" '
      /^## / { op = $2 }
      $1 ~ /^[0-9]+$/ && NF > 12 {
        sent = (op == "all_reduce" || op == "broadcast") ? $1 : $1 / 2
        wire = sent * 8 / bps * 1e6
        nb = NF > 16 ? sprintf("%12.0f", $14) : sprintf("%12s", "-")
        nb_line = NF > 16 ? sprintf("%9.2f", wire / $14) : sprintf("%9s", "-")
        printf "%-5s %-15s %10d %12.0f %12.0f %s %9.2f %9.2f %s %9.2f\n", pin, op, $1, $5, $12, nb, wire / $5,
               wire / $12, nb_line, wire / $5 / goodput
      }' "$dir/pin$pin.txt"
  done
} | tee "$dir/summary.txt"
