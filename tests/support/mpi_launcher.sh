# Sourced by the mpi failure scripts. They end jobs on purpose (idist's broken-backend exit, the
# watchdog), and Open MPI 4.1's mpirun crashed (a segfault in PMIx_server_finalize) or hung (a deadlock
# there, its exited ranks left unreaped) while it tore such a job down whenever a rank was inside
# MPI_Finalize at that moment. idist's finalize() no longer enters MPI_Finalize before every rank has
# reached it (src/mpi/exit_timer.hpp), so a launcher fault is now unexpected: run_job bounds every
# job, and a job whose only fault is the launcher's (it crashed, or it was still running when every
# rank process had gone) FAILS the test, with the job's whole output and the reason, and is logged to
# $IDIST_TEST_RERUN_LOG (scripts/run-tests.sh prints and counts them). Only outside CI, with
# IDIST_TEST_RERUN=1, does such a job run once more (logged the same way); a second launcher fault
# fails like any other. tests/support/launcher_soak.sh counts launcher faults over N runs of one job.

# launcher_crashed <rc> <output> <rank binary>: true when the job ended by a signal whose backtrace
# runs through mpiexec/orterun and no rank process (the binary) printed a backtrace. A frame names
# the program with its path or, as mpirun's own frames do, without ("[host:pid] [ 6] mpirun(+0x13ea)").
launcher_crashed() {
  local rc=$1 output=$2 binary
  binary=$(basename "$3")
  [ "$rc" -gt 128 ] || return 1
  grep -Eq '^\[[^]]*\] \[ *[0-9]+\] ([^ ]*/)?(mpiexec|mpirun|orterun)\(' <<<"$output" || return 1
  ! grep -Eq "^\[[^]]*\] \[ *[0-9]+\] ([^ ]*/)?${binary}\(" <<<"$output"
}

# live_ranks <session id> <process name>: how many processes of that name in the session are still
# running; zombies (exited, not yet reaped by a launcher that stopped answering) do not count.
live_ranks() {
  ps -s "$1" -o stat=,comm= | awk -v c="$2" '$1 !~ /^Z/ && $2 == c' | wc -l
}

# run_job <limit s> <rank binary> <command...>: runs the job in a session of its own, its output in
# $out, its exit status in $rc. Past <limit> seconds the session gets SIGTERM, 3 s later SIGKILL,
# and $job_overran is 1. $launcher_hung is 1 when the launcher was the only one left running: no
# rank process (of <binary>) alive, or every one exited for 10 s while the launcher went on (it
# then stops at once). Processes of the session that outlive the launcher are killed (they are
# this job's ranks), so no orphan holds a port or a pipe into the next job.
run_job() {
  local limit=$1 binary=$2
  shift 2
  local log comm tenths=0 sid seen=0 gone_since=-1 live
  log=$(mktemp)
  comm=$(basename "$binary" | cut -c1-15)  # what ps shows of a process name
  job_overran=0 launcher_hung=0
  # Not a process-group leader, so setsid execs in place: the session id is $!.
  setsid "$@" >"$log" 2>&1 </dev/null &
  sid=$!
  while kill -0 "$sid" 2>/dev/null; do
    if [ $((tenths % 10)) -eq 0 ]; then
      live=$(live_ranks "$sid" "$comm")
      # A zombie of the rank binary also shows that the ranks were started.
      ps -s "$sid" -o comm= | grep -qxF "$comm" && seen=1
      if [ "$live" -gt 0 ]; then
        gone_since=-1
      elif [ $seen = 1 ] && [ $gone_since -lt 0 ]; then
        gone_since=$tenths
      fi
    fi
    local stuck=0
    [ $gone_since -ge 0 ] && [ $((tenths - gone_since)) -ge 100 ] && stuck=1
    if [ $stuck = 1 ] || [ $tenths -ge $((limit * 10)) ]; then
      job_overran=1
      live=$(live_ranks "$sid" "$comm")
      [ "$live" -eq 0 ] && launcher_hung=1
      echo "the job ran $((tenths / 10)) s (limit ${limit} s; ranks still running: $live); killing its session $sid"
      pkill -TERM -s "$sid" 2>/dev/null
      sleep 3
      pkill -KILL -s "$sid" 2>/dev/null
      break
    fi
    sleep 0.1
    tenths=$((tenths + 1))
  done
  wait "$sid"
  rc=$?
  pkill -KILL -s "$sid" 2>/dev/null
  out=$(cat "$log")
  rm -f "$log"
}

# log_launcher_fault <name> <reason> <action>: one line in $IDIST_TEST_RERUN_LOG (when set) naming the
# test, the case, the reason, what was done (rerun / failed) and the last lines of the job's output.
log_launcher_fault() {
  local line
  line="$(date -u +%FT%TZ) test=${IDIST_TEST_NAME:-?} case=$1 reason=$2 action=$3 tail: $(tail -n 6 <<<"$out" | cut -c1-200 | tr '\n' '|')"
  echo "LAUNCHER FAULT: $line"
  if [ -n "${IDIST_TEST_RERUN_LOG:-}" ]; then
    printf '%s\n' "$line" >>"$IDIST_TEST_RERUN_LOG"
  fi
}

# rerun_allowed: IDIST_TEST_RERUN=1 and not under CI (CI=true or CI=1).
rerun_allowed() {
  [ "${IDIST_TEST_RERUN:-0}" = 1 ] && [ "${CI:-}" != true ] && [ "${CI:-}" != 1 ]
}

# launcher_exit_status: the status a job whose launcher failed leaves in $rc; no case expects it.
launcher_exit_status=250

# run_job_retried <limit s> <rank binary> <name> <command...>: run_job; when the launcher alone crashed
# or hung, the job's whole output is printed with the reason and logged (log_launcher_fault), and $rc
# becomes $launcher_exit_status, failing the case, unless rerun_allowed: then it runs once more, and
# a second launcher fault fails the same way.
run_job_retried() {
  local limit=$1 binary=$2 name=$3 reason attempt
  shift 3
  for attempt in 1 2; do
    run_job "$limit" "$binary" "$@"
    if launcher_crashed "$rc" "$out" "$binary"; then
      reason="mpiexec crashed (exit $rc) while ending the job"
    elif [ "$launcher_hung" = 1 ]; then
      reason="mpiexec hung after every rank had ended"
    else
      return 0
    fi
    if [ "$attempt" = 1 ] && rerun_allowed; then
      echo "$name: $reason; running it once more (IDIST_TEST_RERUN=1)"
      log_launcher_fault "$name" "$reason" rerun
      continue
    fi
    echo "$name: $reason: the test fails (a launcher fault is never rerun under CI; IDIST_TEST_RERUN=1 reruns"
    echo "it once elsewhere). The job's output:"
    sed 's/^/  | /' <<<"$out"
    log_launcher_fault "$name" "$reason" failed
    rc=$launcher_exit_status
    return 0
  done
}
