#!/usr/bin/env bash
# Where a gloo rank's threads block across 2 emulated hosts (scripts/cluster.sh), one rank per host,
# pinned: rank 0's futex calls under perf trace, by thread and by kind. FUTEX_WAIT is glibc's slow
# path of a contended mutex (Gloo's pair and buffer locks, idist's own); FUTEX_WAIT_BITSET is a
# condition variable or a timed wait (a thread idle until work or a peer's bytes arrive); FUTEX_WAKE
# hands a lock or a signal on. Two runs of auto_model at a fixed bucket cap differ only in their timed
# steps (STEPS_A, STEPS_B); their difference divided by the extra steps is what one training step
# costs, free of start-up and warm-up. Thread names: the process's own name for the training thread
# (the lowest tid) and Gloo's transport loop, idist-gloo for a group's lane, idist-peerwatch.
# As root; tears the cluster down on exit. Results: <out>/lock_waits_<rate>_b<batch>/summary.txt.
#
#   RATE=1gbit BATCH=512 CAP=1 BUILD_DIR=build benchmarks/run_lock_waits.sh
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training run_lock_waits
export IDIST_CLUSTER=${IDIST_CLUSTER:-idlw}
cluster="$root/scripts/cluster.sh"
rate=${RATE:-1gbit}
batch=${BATCH:-512}
cap=${CAP:-1}
steps_a=${STEPS_A:-4}
steps_b=${STEPS_B:-24}
pin=1            # host K's rank on core K-1 (bench_env.sh's host_prefix and pair)
run_timeout=900  # seconds per run
command -v perf >/dev/null || { echo "run_lock_waits: perf not found (Debian: apt install linux-perf)" >&2; exit 1; }
[[ $steps_a =~ ^[1-9][0-9]{0,2}$ && $steps_b =~ ^[1-9][0-9]{0,2}$ && $steps_b -gt $steps_a ]] ||
  { echo "run_lock_waits: STEPS_A=$steps_a, STEPS_B=$steps_b: expected 1 <= STEPS_A < STEPS_B <= 999" >&2; exit 1; }
dir="$out/lock_waits_${rate}_b$batch"
mkdir -p "$dir"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
cluster_up_pair "$rate" >/dev/null

# traced <steps>: auto_model:<cap> with <steps> timed steps; rank 0 under perf trace (all its threads).
traced() {
  # shellcheck disable=SC2016
  pair "$dir/run$1" sh -c 'if [ "$RANK" = 0 ]; then exec perf trace -e futex -o "$0" -- "$@"; else exec "$@"; fi' \
    "$dir/futex$1.txt" "$bin" --backend gloo --models mlp32x512 --configs "auto_model:$cap" --batch "$batch" \
    --warmup 5 --rounds 1 --steps "$1" --out-dir "$dir" --label "steps$1" ||
    { echo "run_lock_waits: the run with $1 steps failed:" >&2; cat "$dir/run$1.err"* >&2; exit 1; }
}
traced "$steps_a"
traced "$steps_b"

python3 - "$dir/futex$steps_a.txt" "$dir/futex$steps_b.txt" "$((steps_b - steps_a))" "$rate" "$batch" "$cap" <<'EOF' |
import re, sys
from collections import defaultdict
# A call that blocks is printed twice: "( ): comm/tid futex(... op: OP ...) ..." when it starts, then
# "(N ms): comm/tid ... [continued]: futex()" when it returns.
start = re.compile(r"\(\s*([0-9.]*)\s*(?:ms)?\): (.+)/(\d+) futex\(.*op: ([A-Z_]+)")
resumed = re.compile(r"\(\s*([0-9.]+) ms\): (.+)/(\d+)\s+\.\.\. \[continued\]: futex\(")

def tally(path):
    """{(thread, kind): [calls, ms]}; the training thread is the lowest tid."""
    rows, names, pending = [], {}, {}
    for l in open(path):
        m = start.search(l)
        if m:
            comm, tid, op = m[2], int(m[3]), m[4]
            names[tid] = comm
            if m[1]:
                rows.append((tid, op, float(m[1])))
            else:
                pending[tid] = op
            continue
        m = resumed.search(l)
        if m and int(m[3]) in pending:
            rows.append((int(m[3]), pending.pop(int(m[3])), float(m[1])))
    main = min(names) if names else 0
    # The other threads with the process's name (Gloo's transport loop, the store's) count as "unnamed".
    label = {}
    for tid in sorted(names):
        comm = names[tid]
        label[tid] = "training" if tid == main else (comm if comm.startswith("idist-") else "unnamed")
    out = defaultdict(lambda: [0, 0.0])
    for tid, op, ms in rows:
        key = (label[tid], op)
        out[key][0] += 1
        out[key][1] += ms
    return out

a, b = tally(sys.argv[1]), tally(sys.argv[2])
extra = int(sys.argv[3])
print(f"# rank 0's futex calls per training step ({sys.argv[4]}, batch {sys.argv[5]}, auto_model:{sys.argv[6]}, gloo):"
      f" (run with more steps - run with fewer) / {extra}")
print(f"{'thread':16} {'op':12} {'calls/step':>11} {'ms/step':>9}")
for key in sorted(set(a) | set(b)):
    calls = (b[key][0] - a[key][0]) / extra
    ms = (b[key][1] - a[key][1]) / extra
    print(f"{key[0]:16} {key[1]:12} {calls:11.1f} {ms:9.3f}")
EOF
  tee "$dir/summary.txt"
