# Sourced by the mpi failure scripts. They end jobs on purpose (MPI_Abort, the watchdog's exit), and
# Open MPI 4.1's mpiexec (ORTE/PMIx) sometimes fails while it tears such a job down: it segfaulted
# once in CI ("ORTE_ERROR_LOG: Out of resource in file .../show_help.c", a backtrace through
# PMIx_server_finalize and mpiexec) and hung once (a 300 s ctest timeout). Neither reproduced in local
# reruns. That is the launcher, not a rank: run_job bounds every job, and a job whose only fault is
# the launcher's (it crashed, or it was still running when every rank process had gone) runs once
# more; a second launcher fault fails like any other.

# launcher_crashed <rc> <output> <rank binary>: true when the job ended by a signal whose backtrace
# runs through mpiexec/orterun and no rank process (the binary) printed a backtrace.
launcher_crashed() {
  local rc=$1 output=$2 binary
  binary=$(basename "$3")
  [ "$rc" -gt 128 ] || return 1
  grep -Eq '^\[[^]]*\] \[ *[0-9]+\] [^ ]*/(mpiexec|mpirun|orterun)\(' <<<"$output" || return 1
  ! grep -Eq "^\[[^]]*\] \[ *[0-9]+\] [^ ]*/${binary}\(" <<<"$output"
}

# run_job <limit s> <rank binary> <command...>: runs the job in a session of its own, its output in
# $out, its exit status in $rc. Past <limit> seconds the session gets SIGTERM, 3 s later SIGKILL,
# and $job_overran is 1 ($launcher_hung also 1 when no process of <binary> was left: only the
# launcher was stuck). Processes of the session that outlive the launcher are killed (they are this
# job's ranks), so no orphan holds a port or a pipe into the next job.
run_job() {
  local limit=$1 binary=$2
  shift 2
  local log comm tenths=0 sid
  log=$(mktemp)
  comm=$(basename "$binary" | cut -c1-15)  # what ps shows of a process name
  job_overran=0 launcher_hung=0
  # Not a process-group leader, so setsid execs in place: the session id is $!.
  setsid "$@" >"$log" 2>&1 </dev/null &
  sid=$!
  while kill -0 "$sid" 2>/dev/null; do
    if [ $tenths -ge $((limit * 10)) ]; then
      job_overran=1
      ps -s "$sid" -o comm= | grep -qxF "$comm" || launcher_hung=1
      echo "the job ran past ${limit} s (ranks left: $(ps -s "$sid" -o comm= | grep -cxF "$comm")); killing its session $sid"
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

# run_job_retried <limit s> <rank binary> <name> <command...>: run_job, once more when the launcher
# crashed or hung by itself.
run_job_retried() {
  local limit=$1 binary=$2 name=$3
  shift 3
  run_job "$limit" "$binary" "$@"
  if launcher_crashed "$rc" "$out" "$binary"; then
    echo "$name: mpiexec itself crashed (exit $rc) while ending the job; running it once more"
  elif [ "$launcher_hung" = 1 ]; then
    echo "$name: mpiexec itself hung after every rank had ended; running it once more"
  else
    return 0
  fi
  run_job "$limit" "$binary" "$@"
}
