#!/usr/bin/env bash
# gloo on 2 emulated hosts x 2 ranks, without GLOO_SOCKET_IFNAME (each host's own name resolves to
# 127.0.1.1 there, as on Debian): ignite's multi-node Parallel form and torchrun-style variables. Every
# rank checks its rank, local rank, node rank, nnodes, nproc_per_node and hostname (cluster_layout_test),
# then the conformance suite runs across the hosts (with reduce, gather, scatter, reduce_scatter(_v),
# all_to_all(_v) and send / recv, required to have run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
unset GLOO_SOCKET_IFNAME

cluster_up 2
master="$(host_name 1)"
common_env=(IDIST_TEST_BACKEND=gloo OMP_NUM_THREADS=1 IDIST_TEST_EXPECT_NNODES=2 IDIST_TEST_EXPECT_NPROC=2
            IDIST_TEST_HOST_PREFIX="$IDIST_CLUSTER")

# ignite's Parallel(backend, nproc_per_node=2, nnodes=2, node_rank=k, master_addr=<host 1>, master_port).
parallel_run() {
  local name="$1" bin="$2" port pids=()
  port="$(free_port)"
  local t0
  t0=$(now)
  for node in 0 1; do
    start_on $((node + 1)) "$LOGS/$name.node$node" 240 env "${common_env[@]}" IDIST_TEST_NNODES=2 \
      IDIST_TEST_NODE_RANK=$node IDIST_TEST_NPROC_PER_NODE=2 IDIST_TEST_MASTER_ADDR="$master" \
      IDIST_TEST_MASTER_PORT="$port" "$bin"
    pids+=("$LAST_PID")
  done
  wait_all "$name" "${pids[@]}"
  log "$name: $(calc "$(now) - $t0") s from launch to the last exit (world formation, tests, finalize)"
}

# torchrun-style variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=<host 1's name>.
torchrun_run() {
  local name="$1" bin="$2" port pids=()
  port="$(free_port)"
  for node in 0 1; do
    for local_rank in 0 1; do
      start_on $((node + 1)) "$LOGS/$name.rank$((node * 2 + local_rank))" 240 env "${common_env[@]}" \
        RANK=$((node * 2 + local_rank)) LOCAL_RANK=$local_rank WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
        MASTER_ADDR="$master" MASTER_PORT="$port" "$bin"
      pids+=("$LAST_PID")
    done
  done
  wait_all "$name" "${pids[@]}"
}

layout="$IDIST_BUILD_DIR/tests/cluster/idist_cluster_layout_test"
conformance="$IDIST_BUILD_DIR/tests/conformance/idist_conformance"

parallel_run parallel_layout "$layout"
grep -h "network interface" "$LOGS"/parallel_layout.* || { log "FAILED: show_config printed no network interface"; failures=$((failures + 1)); }
torchrun_run torchrun_layout "$layout"
parallel_run parallel_conformance "$conformance"
expect_suites parallel_conformance "${BEYOND_IGNITE_SUITES[@]}"
torchrun_run torchrun_conformance "$conformance"
expect_suites torchrun_conformance "${BEYOND_IGNITE_SUITES[@]}"

# A wrong GLOO_SOCKET_IFNAME=lo across hosts: refused within seconds on every rank, naming the ranks
# that advertise the loopback, instead of a wait to the timeout.
port="$(free_port)"
pids=()
t0=$SECONDS
for node in 0 1; do
  start_on $((node + 1)) "$LOGS/loopback.node$node" 60 env "${common_env[@]}" GLOO_SOCKET_IFNAME=lo \
    IDIST_TEST_NNODES=2 IDIST_TEST_NODE_RANK=$node IDIST_TEST_NPROC_PER_NODE=1 IDIST_TEST_MASTER_ADDR="$master" \
    IDIST_TEST_MASTER_PORT="$port" "$layout"
  pids+=("$LAST_PID")
done
loopback_failed=0
for pid in "${pids[@]}"; do wait "$pid" || loopback_failed=$((loopback_failed + 1)); done
elapsed=$((SECONDS - t0))
if [ "$loopback_failed" -eq 2 ] && [ "$elapsed" -lt "$(scaled 30)" ] &&
   grep -q "listen on a loopback address" "$LOGS/loopback.node0" &&
   grep -q "listen on a loopback address" "$LOGS/loopback.node1"; then
  log "passed: loopback refused on both nodes in ${elapsed} s"
else
  log "FAILED: GLOO_SOCKET_IFNAME=lo across hosts (failed processes: $loopback_failed, ${elapsed} s)"
  tail -n 20 "$LOGS"/loopback.*
  failures=$((failures + 1))
fi
finish
