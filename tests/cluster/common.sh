# Shared by the emulated-cluster test drivers (sourced). Brings a cluster up under $IDIST_CLUSTER,
# tears it down on exit (also on failure), and runs processes on its hosts with bounded lifetimes.
# Only processes this script started are ever signalled, by their recorded ids.

: "${IDIST_SOURCE_DIR:?set by ctest}" "${IDIST_BUILD_DIR:?set by ctest}" "${IDIST_CLUSTER:?set by ctest}"
export IDIST_CLUSTER
CLUSTER="$IDIST_SOURCE_DIR/scripts/cluster.sh"
# skip_test REASON: Skipped (77) with the reason, or a failure under CI=true (tests/support/skip.sh).
source "$IDIST_SOURCE_DIR/tests/support/skip.sh"
# scaled N: an upper bound on a duration times IDIST_TEST_TIME_SCALE (tests/support/time_scale.sh).
source "$IDIST_SOURCE_DIR/tests/support/time_scale.sh"
LOGS="$(mktemp -d "/tmp/idist-$IDIST_CLUSTER-XXXXXX")"
STARTED_PIDS=()
failures=0

now() { date +%s.%N; }
# calc EXPR: floating-point arithmetic and comparisons (awk: no bc on a minimal Debian).
calc() { awk "BEGIN { print ($1) }"; }

log() { printf '[%s %s] %s\n' "$(date +%T)" "$(basename "$0" .sh)" "$*"; }

cleanup() {
  local rc=$?
  for pid in "${STARTED_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${STARTED_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if declare -F extra_cleanup >/dev/null; then extra_cleanup || true; fi
  "$CLUSTER" down >/dev/null 2>&1 || true
  exit "$rc"
}

# cluster_up N [--rate R]: skip_test with cluster.sh's reason when it cannot run here (Skipped, or a
# failure under CI=true).
cluster_up() {
  local rc=0
  trap cleanup EXIT
  trap 'exit 143' TERM INT
  "$CLUSTER" down >/dev/null 2>&1 || true  # leftovers of an earlier run killed mid-way
  "$CLUSTER" up "$@" 2>"$LOGS/up.err" || rc=$?
  [ "$rc" -ne 77 ] || skip_test "$(cat "$LOGS/up.err")"
  [ "$rc" -eq 0 ] || { cat "$LOGS/up.err"; echo "cluster.sh up failed ($rc)"; exit 1; }
}

host_name() { "$CLUSTER" hostname "$1"; }

# start_on HOST LOG LIMIT_S CMD...: runs CMD on emulated host HOST in the background, killed after
# LIMIT_S seconds; its pid is appended to STARTED_PIDS and stored in $LAST_PID.
start_on() {
  local host="$1" logfile="$2" limit="$3"
  shift 3
  timeout --kill-after=5 "$limit" "$CLUSTER" run "$host" "$@" >"$logfile" 2>&1 &
  LAST_PID=$!
  STARTED_PIDS+=("$LAST_PID")
}

# wait_all NAME PIDS...: waits for every pid; on any non-zero status, or a failed test reported by any
# rank in the logs of NAME (rank 0's "[  FAILED  ]", the other ranks' "[rank N] FAILURE"), prints
# those logs and counts a failure.
wait_all() {
  local name="$1" bad=0 pid reported=0
  shift
  for pid in "$@"; do wait "$pid" || bad=$((bad + 1)); done
  grep -Eqs '\[  FAILED  \]|^\[rank [0-9]+\] FAILURE' "$LOGS/$name".* && reported=1
  if [ "$bad" -ne 0 ] || [ "$reported" -ne 0 ]; then
    log "FAILED: $name ($bad process(es) exited non-zero; a rank reported a failed test: $([ $reported = 1 ] && echo yes || echo no)); logs:"
    for f in "$LOGS/$name".*; do echo "----- $f"; tail -n 60 "$f"; done
    failures=$((failures + 1))
  else
    log "passed: $name"
  fi
  return 0
}

# expect_suites NAME SUITE...: the logs of NAME show tests of every gtest SUITE (a name prefix, e.g.
# "RootedTyped/") passed and none of them skipped, so that a filter or a world-size gate cannot drop
# them from the cross-host run unnoticed; else prints which and counts a failure. (Failed tests are
# wait_all's.) Colour codes, which mpirun's pseudo-terminals keep, are removed first.
expect_suites() {
  local name="$1" suite missing=() text
  shift
  text="$(cat "$LOGS/$name".* 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' || true)"
  for suite in "$@"; do
    if ! grep -Fq "[       OK ] $suite" <<<"$text" || grep -Fq "[  SKIPPED ] $suite" <<<"$text"; then
      missing+=("$suite")
    fi
  done
  if [ "${#missing[@]}" -ne 0 ]; then
    log "FAILED: $name: no passed test, or a skipped one, in ${missing[*]}"
    failures=$((failures + 1))
  else
    log "passed: $name ran $(grep -Fc "[       OK ]" <<<"$text") tests, among them those of $*"
  fi
}

# The conformance suites of the collectives ignite does not have (tests/conformance: rooted_test,
# blocks_test, point_to_point_test), which the drivers require of every cross-host conformance run.
BEYOND_IGNITE_SUITES=(RootedTyped/ RootedErrors. BlocksTyped/ BlocksErrors. PointToPointTyped/ PointToPointErrors.)

# A port for the rendezvous: each emulated host has its own port space, so only this test uses it.
free_port() { echo $((20000 + RANDOM % 20000)); }

finish() {
  if [ "$failures" -ne 0 ]; then
    log "$failures check(s) failed (logs in $LOGS)"
    exit 1
  fi
  log "all checks passed"
  rm -rf "$LOGS"
  exit 0
}
