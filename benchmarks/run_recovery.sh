#!/usr/bin/env bash
# Recovery times after a fault under torchrun (docs/fault-tolerance.md, "Recovery times"), measured on the
# emulated cluster (scripts/cluster.sh: 2 hosts x 2 workers, c10d rendezvous, the example's CNN with gloo) by the
# scenarios of tests/cluster/torchrun_elastic.sh, which also check that each resumed run ends with the weights of
# a fault-free run. Every round runs each scenario once; each reports (IDIST_ELASTIC_TIMINGS):
#   survivors gone     fault -> the surviving workers have noticed the lost peer and exited      target <= 2 s
#   restart            the survivors gone -> torchrun's restarted workers started (re-rendezvous)  no target
#   first step         a restarted worker's start -> its first training step (slowest worker)     target <= 5 s
#   fault -> step      fault -> rank 0's first step after the restart                             no target
# Prints the median over the rounds of each against its target (benchmarks/recovery/verdict.py) and exits 1 when a
# median misses one (2 when a scenario failed or could not run). Run as root (network namespaces), on a machine as quiet as you can get.
#
#   sudo BUILD_DIR=build benchmarks/run_recovery.sh                     # 3 rounds of the worker kill
#   sudo ROUNDS=5 SCENARIOS="worker kill" BUILD_DIR=build benchmarks/run_recovery.sh
#
# Environment: BUILD_DIR (./build, with the example built), ROUNDS (3), SCENARIOS ("worker"; any of worker, kill,
# partition, rejoin), OUT_DIR (a fresh temporary folder; keeps recovery_runs.jsonl and each scenario's log).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build}" && pwd)
rounds=${ROUNDS:-3}
scenarios=${SCENARIOS:-worker}
out=${OUT_DIR:-$(mktemp -d /tmp/idist-recovery-XXXXXX)}
readonly survivors_target=2 first_step_target=5

[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "run_recovery: ROUNDS in 1..20, got '$rounds'" >&2; exit 2; }
for s in $scenarios; do
  case $s in
    worker | kill | partition | rejoin) ;;
    *) echo "run_recovery: unknown scenario '$s' (expected worker, kill, partition, rejoin)" >&2; exit 2 ;;
  esac
done
[ -x "$build/examples/fashion_mnist/fashion_mnist" ] ||
  { echo "run_recovery: $build/examples/fashion_mnist/fashion_mnist not found; build the target fashion_mnist" >&2; exit 2; }
mkdir -p "$out"
runs=$out/recovery_runs.jsonl
rm -f "$runs"

echo "command: ROUNDS=$rounds SCENARIOS=\"$scenarios\" benchmarks/run_recovery.sh"
echo "date: $(date -u +%FT%TZ); commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "host: $(uname -srm), $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

for ((r = 1; r <= rounds; ++r)); do
  for s in $scenarios; do
    log=$out/$s.round$r.log
    rc=0
    # A cluster name of our own (hosts idrc1, idrc2), so that a test run elsewhere on the machine is not disturbed.
    IDIST_SOURCE_DIR=$root IDIST_BUILD_DIR=$build IDIST_CLUSTER=idrc IDIST_ELASTIC_TIMINGS=$runs \
      timeout --kill-after=10 600 bash "$root/tests/cluster/torchrun_elastic.sh" "$s" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "run_recovery: round $r, scenario $s: exit status $rc (77: cannot run here); last lines of $log:" >&2
      tail -n 20 "$log" >&2
      exit 2
    fi
    echo "round $r: $(grep -h '^elastic-timing:' "$log" | tail -n 1)"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 "$root/benchmarks/recovery/verdict.py" "$runs" --survivors-target "$survivors_target" \
  --first-step-target "$first_step_target"
