#!/usr/bin/env bash
# Elastic training under the real torchrun (Debian's /usr/bin/torchrun, torch 1.13) on 2 emulated hosts x 2
# workers, the Fashion-MNIST example with gloo, one scenario per call:
#   torchrun_elastic.sh static     static rendezvous (--nnodes 2 --node_rank K --master_addr host1): trains, exit 0
#   torchrun_elastic.sh kill       c10d rendezvous, --nnodes 1:2: host 2's agent and workers SIGKILLed after a
#                                  mid-epoch checkpoint; host 1 finishes alone (world 2) from that checkpoint and
#                                  ends with the weights of a fault-free world-2 run from a copy of that checkpoint
#   torchrun_elastic.sh partition  the same with host 2's link taken down instead
#   torchrun_elastic.sh worker     one worker of host 2 killed, both hosts alive: every worker restarts at world 4
#                                  from the checkpoint of the kill and ends with an uninterrupted run's weights digest
#   torchrun_elastic.sh rejoin     as kill, then host 2 starts again and joins: training continues at world 4 and
#                                  ends with the weights of a fault-free world-4 run from the checkpoint it resumed
# Each host has its own checkpoint directory (the hosts share this machine's file system, so a shared one would
# hide a rank that reads another host's files). Every scenario checks exit codes, the world size the job resumed
# at and the checkpoint it resumed from, and prints its recovery timings ("elastic-timing: ..."; appended as JSON
# lines to $IDIST_ELASTIC_TIMINGS when set): fault -> surviving workers gone, -> restarted workers started
# (torchrun's part), -> their first step, from the scripts' clock and the example's --print-timing lines.
# torchrun's c10d settings: --monitor_interval 1 and --rdzv_conf last_call_timeout=3,join_timeout=60 (a last call
# shorter than torchrun's 1 s state poll lets a rejoining agent miss the round; see docs/fault-tolerance.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# digest_of, keep_checkpoint, check_reference, same_digest: the resumed state against a fault-free reference.
source "$(dirname "${BASH_SOURCE[0]}")/digest.sh"

scenario=${1:?usage: torchrun_elastic.sh static|kill|partition|worker|rejoin}
example="$IDIST_BUILD_DIR/examples/fashion_mnist/fashion_mnist"
torchrun=${IDIST_TEST_TORCHRUN:-/usr/bin/torchrun}

[ -x "$example" ] || skip_test "the example is not built (LibTorch layer off)"
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip_test "dataset-fashion-mnist is not installed"
[ -x "$torchrun" ] || skip_test "$torchrun is missing (install python3-torch: scripts/install-deps.sh)"

# 400 steps per epoch (global batch 64), a checkpoint every 50 steps (7 mid-epoch ones per epoch), 2 epochs.
readonly train_args=(--backend gloo --limit 25600 --epochs 2 --checkpoint-every-steps 50 --auto-resume
  --print-timing --log-every 1 --timeout 60 --seed 3)
readonly fault_after=100  # the checkpoint (global step) after which the fault comes: mid-epoch 1
readonly rdzv_conf=last_call_timeout=3,join_timeout=60

extra_cleanup() {
  # Whatever still runs inside our emulated hosts was started by this test (a stopped worker included).
  local k p
  for k in 1 2; do
    for p in $("$CLUSTER" pids "$k" 2>/dev/null || true); do kill -CONT "$p" 2>/dev/null || true; done
    for p in $("$CLUSTER" pids "$k" 2>/dev/null || true); do kill -KILL "$p" 2>/dev/null || true; done
  done
  "$CLUSTER" link 2 up 2>/dev/null || true
}

cluster_up 2
h1="$(host_name 1)"

fail() {
  log "FAILED: $scenario: $*"
  local f
  for f in "$LOGS"/*.host*; do
    [ -f "$f" ] || continue
    echo "----- $f (last 40 lines)"
    tail -n 40 "$f"
  done
  exit 1
}

# start_agent NAME K static|c10d|alone PORT: torchrun on host K (output in $LOGS/NAME.hostK, checkpoints in
# $LOGS/NAME.ckptK); its pid in AGENT[K]. alone: c10d with host 1 as the only node and no restart (a reference).
declare -A AGENT
start_agent() {
  local name=$1 k=$2 mode=$3 port=$4 rdzv
  case $mode in
    static) rdzv=(--nnodes 2 --node_rank $((k - 1)) --master_addr "$h1" --master_port "$port") ;;
    c10d) rdzv=(--rdzv_backend c10d --rdzv_endpoint "$h1:$port" --rdzv_id "$name" --nnodes 1:2 --max_restarts 3
      --rdzv_conf "$rdzv_conf") ;;
    alone) rdzv=(--rdzv_backend c10d --rdzv_endpoint "$h1:$port" --rdzv_id "$name" --nnodes 1 --max_restarts 0) ;;
  esac
  mkdir -p "$LOGS/$name.ckpt$k"
  start_on "$k" "$LOGS/$name.host$k" 300 env OMP_NUM_THREADS=1 "$torchrun" -r 1 -t 1 --log_dir "$LOGS/$name.torchrun$k" \
    --nproc_per_node 2 --monitor_interval 1 "${rdzv[@]}" --no_python "$example" "${train_args[@]}" \
    --checkpoint-dir "$LOGS/$name.ckpt$k"
  AGENT[$k]=$LAST_PID
}

# wait_until LIMIT_S CMD...: polls CMD every 50 ms for at most LIMIT_S seconds.
wait_until() {
  local deadline
  deadline=$(awk -v t="$(now)" -v d="$1" 'BEGIN { printf "%.3f", t + d }')
  shift
  until "$@"; do
    [ "$(calc "$(now) > $deadline")" -eq 0 ] || return 1
    sleep 0.05
  done
}
count_lines() { grep -c -- "$2" "$1" 2>/dev/null || true; }
has_at_least() { [ "$(count_lines "$1" "$2")" -ge "$3" ]; }

# The example's workers running on host K.
workers_on() {
  local p
  for p in $("$CLUSTER" pids "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = fashion_mnist ] && echo "$p"
  done
  return 0
}
none_alive() {
  local p
  for p in "$@"; do [ -e "/proc/$p" ] && return 1; done
  return 0
}

# The largest iteration of DIR/checkpoint_<iteration>.pt, 0 when none.
newest_checkpoint() {
  local f n best=0
  for f in "$1"/checkpoint_*.pt; do
    [ -e "$f" ] || continue
    n=${f##*_}
    n=${n%.pt}
    [ "$n" -gt "$best" ] && best=$n
  done
  echo "$best"
}

expect_exit() {  # expect_exit WHAT PID CODE
  local rc=0
  wait "$2" || rc=$?
  [ "$rc" -eq "$3" ] || fail "$1 exited with $rc, expected $3"
  log "$1 exited with $rc"
}

# start_c10d NAME: both agents (host 2 first: it waits for host 1's rendezvous store) on a fresh port (in PORT);
# the first round must gather both hosts (a world of 4).
start_c10d() {
  PORT="$(free_port)"
  start_agent "$1" 2 c10d "$PORT"
  start_agent "$1" 1 c10d "$PORT"
  wait_until 120 has_at_least "$LOGS/$1.host1" "16 per rank x 4 ranks" 1 ||
    fail "$1: the first rendezvous did not form a world of 4 within 120 s"
}

# check_resume NAME ITERATION WORLD [NTH]: host 1's rank 0 resumed (its NTH resume, default the last) from its
# own checkpoint_<ITERATION>.pt at WORLD ranks; without NTH (the job has ended), it also ended at WORLD ranks.
check_resume() {
  local name=$1 iteration=$2 world=$3 nth=${4:-} log="$LOGS/$1.host1" line json
  line=$( (grep "fashion_mnist: resuming from" "$log" || true) | { if [ -n "$nth" ]; then sed -n "${nth}p"; else tail -n 1; fi; })
  [ -n "$line" ] || fail "$name: host 1 never resumed from a checkpoint"
  [[ $line == *"resuming from $LOGS/$name.ckpt1/checkpoint_$iteration.pt "* ]] ||
    fail "$name: expected a resume from $LOGS/$name.ckpt1/checkpoint_$iteration.pt, got: $line"
  grep -A6 -F -- "$line" "$log" | grep -q "($((64 / world)) per rank x $world ranks)" ||
    fail "$name: the resumed run is not at world size $world"
  if [ -z "$nth" ]; then  # the job has ended: its summary line
    json=$(grep '"world_size"' "$log" | tail -n 1 || true)
    [[ $json == *"\"world_size\": $world,"* && $json == *"\"resumed_iteration\": $iteration,"* ]] ||
      fail "$name: the job did not end at world size $world resumed from $iteration: $json"
  fi
  log "$name: resumed from checkpoint_$iteration.pt at world size $world: ${line#*: }"
}

# reference NAME ITERATION WORLD: the fault-free run from $LOGS/NAME.kept (the kept checkpoint_<ITERATION>.pt, the
# one NAME resumed from last) at WORLD ranks (2: host 1 alone; 4: both hosts) must end with NAME's weights digest.
reference() {
  local name=$1 iteration=$2 world=$3 ref=$1-reference
  mkdir -p "$LOGS/$ref.ckpt1"
  cp "$LOGS/$name.kept/checkpoint_$iteration.pt" "$LOGS/$ref.ckpt1/"
  if [ "$world" -eq 2 ]; then
    start_agent "$ref" 1 alone "$(free_port)"
  else
    start_c10d "$ref"
    expect_exit "host 2's torchrun ($ref)" "${AGENT[2]}" 0
  fi
  expect_exit "host 1's torchrun ($ref)" "${AGENT[1]}" 0
  check_reference "$LOGS/$ref.host1" "$LOGS/$ref.ckpt1" "$iteration" "$world"
  same_digest "$name" "$LOGS/$name.host1" "$LOGS/$ref.host1" "$iteration"
}

# timings NAME T_FAULT T_GONE AFTER...: the restarted attempt's --print-timing lines (first_step after T_FAULT)
# in the given logs give: its workers' start (earliest), their first step (rank 0's), and the slowest
# start-to-first-step of a worker. Prints and records them.
timings() {
  local name=$1 t_fault=$2 t_gone=$3
  shift 3
  local lines
  lines=$(cat "$@" | grep -h "fashion_mnist: timing: rank" |
    awk -v t="$t_fault" '{ if ($NF + 0 > t) print }' || true)
  [ -n "$lines" ] || fail "$name: no timing line of a restarted worker"
  local start first slowest
  start=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "start") print $(i + 1) }' <<<"$lines" | sort -g | head -n 1)
  first=$(grep "timing: rank 0:" <<<"$lines" | head -n 1 | awk '{ print $NF }')
  slowest=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "step") print $(i + 1) }' <<<"$lines" | sort -g | tail -n 1)
  [ -n "$first" ] || first=$(awk '{ print $NF }' <<<"$lines" | sort -g | head -n 1)
  local r=(
    "scenario=$name"
    "fault_to_workers_gone_s=$(calc "$t_gone - $t_fault")"
    "workers_gone_to_restart_s=$(calc "$start - $t_gone")"
    "restart_to_first_step_max_s=$slowest"
    "fault_to_first_step_s=$(calc "$first - $t_fault")"
  )
  echo "elastic-timing: ${r[*]}"
  if [ -n "${IDIST_ELASTIC_TIMINGS:-}" ]; then
    printf '{"scenario": "%s", "fault_to_workers_gone_s": %.3f, "workers_gone_to_restart_s": %.3f, ' \
      "$name" "$(calc "$t_gone - $t_fault")" "$(calc "$start - $t_gone")" >>"$IDIST_ELASTIC_TIMINGS"
    printf '"restart_to_first_step_max_s": %.3f, "fault_to_first_step_s": %.3f, "date": "%s"}\n' \
      "$slowest" "$(calc "$first - $t_fault")" "$(date -u +%FT%TZ)" >>"$IDIST_ELASTIC_TIMINGS"
  fi
  [ "$(calc "$t_gone - $t_fault > 2")" -eq 0 ] ||
    log "NOTE: $name: the surviving workers took $(calc "$t_gone - $t_fault") s to exit (target 2 s; benchmarks/run_recovery.sh judges the median)"
  [ "$(calc "$slowest > 5")" -eq 0 ] ||
    log "NOTE: $name: a restarted worker took $slowest s to its first step (target 5 s; benchmarks/run_recovery.sh judges the median)"
}

# lose_host_2 NAME kill|link: the fault after checkpoint $fault_after; sets T_FAULT, T_GONE, AT_FAULT (the
# newest checkpoint once host 1's workers are gone: the one the job must resume from).
lose_host_2() {
  local name=$1 how=$2 survivors
  wait_until 120 test -e "$LOGS/$name.ckpt1/checkpoint_$fault_after.pt" ||
    fail "$name: no checkpoint_$fault_after.pt within 120 s"
  survivors=$(workers_on 1)
  [ "$(wc -w <<<"$survivors")" -eq 2 ] || fail "$name: expected 2 workers on host 1, found: $survivors"
  if [ "$how" = kill ]; then
    # Every process in host 2's namespace is this test's: its torchrun agent and its workers.
    local victims
    victims=$("$CLUSTER" pids 2)
    T_FAULT=$(now)
    # shellcheck disable=SC2086
    kill -KILL $victims
  else
    "$CLUSTER" link 2 down
    T_FAULT=$(now)  # the link went down during the command: its end is the closer bound
  fi
  # shellcheck disable=SC2086
  wait_until 60 none_alive $survivors || fail "$name: host 1's workers still run 60 s after the fault"
  T_GONE=$(now)
  AT_FAULT=$(newest_checkpoint "$LOGS/$name.ckpt1")
  log "$name: host 2 lost ($how) at checkpoint $AT_FAULT; host 1's workers gone $(calc "$T_GONE - $T_FAULT") s later"
}

run_static() {
  local port
  port="$(free_port)"
  start_agent static 2 static "$port"
  start_agent static 1 static "$port"
  expect_exit "host 2's torchrun" "${AGENT[2]}" 0
  expect_exit "host 1's torchrun" "${AGENT[1]}" 0
  grep -q '"world_size": 4,' "$LOGS/static.host1" || fail "static: no JSON line with world_size 4"
  [ "$(newest_checkpoint "$LOGS/static.ckpt1")" -eq 800 ] || fail "static: host 1 has no checkpoint_800.pt"
  # Rank 0 (host 1) writes; host 2's directory stays empty.
  [ "$(newest_checkpoint "$LOGS/static.ckpt2")" -eq 0 ] || fail "static: host 2's directory holds checkpoints"
  log "static: $(grep '"world_size"' "$LOGS/static.host1" | cut -c1-160)"
}

run_lost_host() {  # kill | partition
  local name=$1 how="kill"
  [ "$name" = partition ] && how="link"
  start_c10d "$name"
  lose_host_2 "$name" "$how"
  keep_checkpoint "$LOGS/$name.ckpt1" "$AT_FAULT" "$LOGS/$name.kept"
  expect_exit "host 1's torchrun" "${AGENT[1]}" 0
  if [ "$how" = kill ]; then
    expect_exit "host 2's torchrun (SIGKILLed)" "${AGENT[2]}" 137
  else
    # Host 2, cut off, cannot reach the rendezvous: its agent is stopped here, then the link comes back.
    # shellcheck disable=SC2046
    kill -KILL $("$CLUSTER" pids 2) 2>/dev/null || true
    wait "${AGENT[2]}" 2>/dev/null || true
    "$CLUSTER" link 2 up
  fi
  check_resume "$name" "$AT_FAULT" 2
  timings "$name" "$T_FAULT" "$T_GONE" "$LOGS/$name.host1"
  reference "$name" "$AT_FAULT" 2
}

run_worker() {
  # The uninterrupted run of the same options first: its digest is the target.
  start_c10d reference
  expect_exit "host 2's torchrun (reference)" "${AGENT[2]}" 0
  expect_exit "host 1's torchrun (reference)" "${AGENT[1]}" 0
  local want
  want=$(digest_of "$LOGS/reference.host1")
  [ -n "$want" ] || fail "worker: the reference run printed no weights_digest"
  start_c10d worker
  wait_until 120 test -e "$LOGS/worker.ckpt1/checkpoint_$fault_after.pt" ||
    fail "worker: no checkpoint_$fault_after.pt within 120 s"
  # Stop one worker of host 2 at once, so that no later checkpoint can start (every save needs it); a save
  # already agreed on finishes within the second; then kill it. The job must resume from the newest file.
  local victim others
  victim=$(workers_on 2 | sort -n | tail -n 1)
  kill -STOP "$victim"
  sleep 1
  AT_FAULT=$(newest_checkpoint "$LOGS/worker.ckpt1")
  others=$( (workers_on 1; workers_on 2) | grep -vx "$victim" | tr '\n' ' ')
  [ "$(wc -w <<<"$others")" -eq 3 ] || fail "worker: expected 3 other workers, found: $others"
  T_FAULT=$(now)
  kill -KILL "$victim"
  # shellcheck disable=SC2086
  wait_until 60 none_alive $others || fail "worker: the other workers still run 60 s after the kill"
  T_GONE=$(now)
  log "worker: killed worker pid $victim of host 2 at checkpoint $AT_FAULT; the others gone $(calc "$T_GONE - $T_FAULT") s later"
  expect_exit "host 2's torchrun" "${AGENT[2]}" 0
  expect_exit "host 1's torchrun" "${AGENT[1]}" 0
  check_resume worker "$AT_FAULT" 4
  local got
  got=$(digest_of "$LOGS/worker.host1")
  [ "$got" = "$want" ] || fail "worker: weights_digest $got differs from the uninterrupted run's $want"
  log "worker: weights_digest $got equals the uninterrupted run's"
  timings worker "$T_FAULT" "$T_GONE" "$LOGS/worker.host1" "$LOGS/worker.host2"
}

run_rejoin() {
  start_c10d rejoin
  lose_host_2 rejoin kill
  expect_exit "host 2's torchrun (SIGKILLed)" "${AGENT[2]}" 137
  # Host 1 alone at world 2: once its first step is done, host 2 comes back.
  wait_until 120 has_at_least "$LOGS/rejoin.host1" "32 per rank x 2 ranks" 1 ||
    fail "rejoin: host 1 did not resume at world 2 within 120 s"
  wait_until 30 has_at_least "$LOGS/rejoin.host1" "timing: rank 0:" 2 ||
    fail "rejoin: host 1's resumed run made no step within 30 s"
  check_resume rejoin "$AT_FAULT" 2 1
  local alone scale_down=$AT_FAULT
  alone=$(workers_on 1)
  mv "$LOGS/rejoin.host2" "$LOGS/rejoin.host2-killed"
  T_FAULT=$(now)
  start_agent rejoin 2 c10d "$PORT"
  # Host 1's agent sees a node waiting and restarts its workers into a round with both hosts.
  # shellcheck disable=SC2086
  wait_until 60 none_alive $alone || fail "rejoin: host 1's world-2 workers still run 60 s after host 2 came back"
  T_GONE=$(now)
  AT_FAULT=$(newest_checkpoint "$LOGS/rejoin.ckpt1")
  log "rejoin: host 2 back; host 1's world-2 workers stopped $(calc "$T_GONE - $T_FAULT") s later, at checkpoint $AT_FAULT"
  [ "$AT_FAULT" -ge "$scale_down" ] || fail "rejoin: the newest checkpoint $AT_FAULT is older than $scale_down"
  keep_checkpoint "$LOGS/rejoin.ckpt1" "$AT_FAULT" "$LOGS/rejoin.kept"
  expect_exit "host 2's new torchrun" "${AGENT[2]}" 0
  expect_exit "host 1's torchrun" "${AGENT[1]}" 0
  check_resume rejoin "$AT_FAULT" 4
  timings rejoin "$T_FAULT" "$T_GONE" "$LOGS/rejoin.host1" "$LOGS/rejoin.host2"
  reference rejoin "$AT_FAULT" 4
}

case $scenario in
  static) run_static ;;
  kill | partition) run_lost_host "$scenario" ;;
  worker) run_worker ;;
  rejoin) run_rejoin ;;
  *) echo "unknown scenario '$scenario'"; exit 2 ;;
esac
finish
