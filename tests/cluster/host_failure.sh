#!/usr/bin/env bash
# A host lost mid-training, on 2 emulated hosts x 2 ranks (gloo, torchrun-style variables, the
# Fashion-MNIST example with --timeout 10):
#   1. host 2's link goes down;
#   2. host 2's processes are SIGKILLed.
# Every surviving rank must exit non-zero within timeout + 5 s of the fault, with an idist error naming
# the operation and the lost peer's host; nothing may be left running on either host.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

example="$IDIST_BUILD_DIR/examples/fashion_mnist/fashion_mnist"
[ -x "$example" ] || skip_test "the example is not built (LibTorch layer off)"
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip_test "dataset-fashion-mnist is not installed"
readonly timeout_s=10 budget_s=$((10 + $(scaled 5)))

cluster_up 2
h1="$(host_name 1)"
h2="$(host_name 2)"

# start_training NAME: 4 ranks, 2 per host; fills RANK_PIDS (index = rank).
start_training() {
  local name="$1" port
  port="$(free_port)"
  RANK_PIDS=()
  for rank in 0 1 2 3; do
    start_on $((rank / 2 + 1)) "$LOGS/$name.rank$rank" 300 env OMP_NUM_THREADS=1 RANK=$rank \
      LOCAL_RANK=$((rank % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR="$h1" MASTER_PORT="$port" \
      "$example" --backend gloo --timeout "$timeout_s" --epochs 3
    RANK_PIDS+=("$LAST_PID")
  done
  # Training is under way once rank 0 printed a progress line (bounded wait).
  for _ in $(seq 1 240); do
    grep -q "step" "$LOGS/$name.rank0" 2>/dev/null && return 0
    sleep 0.5
  done
  log "FAILED: $name: training did not start within 120 s"; tail -n 20 "$LOGS/$name".*
  return 1
}

# check_survivors NAME FAULT_TIME LOST_HOST RANKS...: each rank (logs $LOGS/NAME.rankN) exits non-zero
# within the budget, with an error naming an operation and the peer it lost by rank and host; at least
# one of them names LOST_HOST. (A survivor may first lose a peer of its own host that already left on
# the same fault: that peer is the one it lost, and is named as such.)
check_survivors() {
  local name="$1" t_fault="$2" lost_host="$3" rank ok=1 named_lost_host=0
  shift 3
  rm -f "$LOGS/$name.times"
  for rank in "$@"; do
    local pid="${RANK_PIDS[$rank]}" rc=0
    wait "$pid" || rc=$?
    local took
    took=$(calc "$(now) - $t_fault")
    local f="$LOGS/$name.rank$rank"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -ge 128 ]; then
      log "FAILED: $name: rank $rank exit status $rc (expected an idist error)"; ok=0
    elif grep -qE "(all_reduce|broadcast|all_gather|barrier) on rank .*(lost peer|unreachable).*rank [0-9]+ \(host [^ ,]+, " "$f"; then
      log "$name: rank $rank exited $rc at $(printf %.1f "$took") s after the fault (measured once all earlier ranks were reaped)"
      grep -qE "(lost peer|unreachable).*host $lost_host" "$f" && named_lost_host=1
    else
      log "FAILED: $name: rank $rank's error does not name the operation and a lost peer by rank and host"; ok=0
    fi
    echo "$name rank $rank: $(grep -m1 "error" "$f" | cut -c1-400)"
    echo "$took" >>"$LOGS/$name.times"
  done
  [ "$named_lost_host" -eq 1 ] || { log "FAILED: $name: no survivor names host $lost_host"; ok=0; }
  local worst
  worst=$(sort -g "$LOGS/$name.times" | tail -n 1)
  if [ "$(calc "$worst > $budget_s")" -eq 1 ]; then
    log "FAILED: $name: slowest exit $worst s after the fault, budget $budget_s s"; ok=0
  else
    log "$name: slowest surviving rank exited $(printf %.1f "$worst") s after the fault (budget $budget_s s)"
  fi
  [ "$ok" -eq 1 ] || { failures=$((failures + 1)); tail -n 15 "$LOGS/$name".rank*; }
}

# Nothing of ours may remain in either host once the ranks are gone.
check_nothing_left() {
  local name="$1" k left
  for k in 1 2; do
    left="$("$CLUSTER" pids "$k" 2>/dev/null | wc -w)"
    if [ "$left" -ne 0 ]; then
      log "FAILED: $name: $left process(es) left on host $k"; failures=$((failures + 1))
    fi
  done
}

# 1. Host 2's link goes down: host 1's ranks lose ranks 2 and 3 and vice versa.
if start_training link_down; then
  "$CLUSTER" link 2 down
  t_fault=$(now)
  check_survivors link_down "$t_fault" "$h2" 0 1
  check_survivors link_down "$t_fault" "$h1" 2 3
  "$CLUSTER" link 2 up
  check_nothing_left link_down
else
  failures=$((failures + 1))
fi

# 2. Host 2's processes die (SIGKILL): host 1's ranks see their connections reset.
if start_training killed; then
  # Every process inside host 2's namespace was started by this test.
  kill -KILL $("$CLUSTER" pids 2) 2>/dev/null || true
  t_fault=$(now)
  check_survivors killed "$t_fault" "$h2" 0 1
  wait "${RANK_PIDS[2]}" "${RANK_PIDS[3]}" 2>/dev/null || true
  check_nothing_left killed
else
  failures=$((failures + 1))
fi
finish
