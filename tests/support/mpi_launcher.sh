# Sourced by the mpi failure scripts. Open MPI 4.1's mpiexec (ORTE/PMIx) can itself segfault while it
# tears a job down after MPI_Abort, a race in its PMIx server finalize ("ORTE_ERROR_LOG: Out of
# resource in file .../show_help.c", then a backtrace through PMIx_server_finalize and mpiexec; seen
# once in a CI run, not reproduced in 8 local reruns). That is the launcher, not a rank: a scenario
# whose only crash is the launcher's runs once more, and a second launcher crash fails like any other.

# launcher_crashed <rc> <output> <rank binary>: true when the job ended by a signal whose backtrace
# runs through mpiexec/orterun and no rank process (the binary) printed a backtrace.
launcher_crashed() {
  local rc=$1 output=$2 binary
  binary=$(basename "$3")
  [ "$rc" -gt 128 ] || return 1
  grep -Eq '^\[[^]]*\] \[ *[0-9]+\] [^ ]*/(mpiexec|mpirun|orterun)\(' <<<"$output" || return 1
  ! grep -Eq "^\[[^]]*\] \[ *[0-9]+\] [^ ]*/${binary}\(" <<<"$output"
}
