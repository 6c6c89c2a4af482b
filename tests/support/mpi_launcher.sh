# Sourced by the mpi failure scripts. They end jobs on purpose (MPI_Abort, the watchdog's exit), and
# Open MPI 4.1's mpiexec (ORTE/PMIx) sometimes fails while it tears such a job down: it segfaulted
# once in CI ("ORTE_ERROR_LOG: Out of resource in file .../show_help.c", a backtrace through
# PMIx_server_finalize and mpiexec) and hung once (a 300 s ctest timeout). Reproduced here: with
# two ranks aborting at about the same time, mpirun logged "ORTE_ERROR_LOG: Data unpack would read
# past end of buffer in file .../show_help.c" and stopped, its exited ranks left unreaped. That is
# the launcher, not a rank: run_job bounds every job, and a job whose only fault is the launcher's
# (it crashed, or it was still running when every rank process had gone) runs again, at most three
# times in all; a third launcher fault fails like any other.

# launcher_crashed <rc> <output> <rank binary>: true when the job ended by a signal whose backtrace
# runs through mpiexec/orterun and no rank process (the binary) printed a backtrace.
launcher_crashed() {
  local rc=$1 output=$2 binary
  binary=$(basename "$3")
  [ "$rc" -gt 128 ] || return 1
  grep -Eq '^\[[^]]*\] \[ *[0-9]+\] [^ ]*/(mpiexec|mpirun|orterun)\(' <<<"$output" || return 1
  ! grep -Eq "^\[[^]]*\] \[ *[0-9]+\] [^ ]*/${binary}\(" <<<"$output"
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

# run_job_retried <limit s> <rank binary> <name> <command...>: run_job, again (at most twice more)
# while the launcher crashed or hung by itself. Twice in a row was seen once in a CI run under load
# (2026-11-26: a segfault while ending the job, then a hang after every rank had ended).
run_job_retried() {
  local limit=$1 binary=$2 name=$3 attempt
  shift 3
  for attempt in 1 2 3; do
    run_job "$limit" "$binary" "$@"
    if launcher_crashed "$rc" "$out" "$binary"; then
      echo "$name: mpiexec itself crashed (exit $rc) while ending the job (attempt $attempt of 3)"
    elif [ "$launcher_hung" = 1 ]; then
      echo "$name: mpiexec itself hung after every rank had ended (attempt $attempt of 3)"
      echo "$out" | grep -E "ORTE_ERROR_LOG|MPI_ABORT was invoked|^idist:" | head -5
    else
      return 0
    fi
  done
}
