#!/usr/bin/env bash
# slurm-cluster.sh: a real SLURM cluster on the hosts of the emulated cluster
# (scripts/cluster.sh), for testing launchers end to end on one machine.
#
# Design
#   - One munged in the root namespace with its own key, socket and state in
#     <state>/slurm/munge (a filesystem unix socket, reachable from every
#     network namespace); slurm.conf names it with AuthInfo=socket=...
#   - slurm.conf in <state>/slurm/slurm.conf: cluster "idist", slurmctld on
#     host 1 (198.18.0.1), nodes <prefix>1..N at 198.18.0.K, one default
#     partition; no cgroups (proctrack/linuxproc, task/none), no accounting
#     database, SlurmUser=root, per-node spool/log/pid paths through %n.
#   - slurmctld runs inside host 1 and "slurmd -N <prefix>K" inside host K, so
#     every slurmd listens on the same port in its own namespace, and job tasks
#     inherit the host's network, hostname and /etc/hosts.
#   - All daemons are started with "cluster.sh spawn" (pid and start time
#     recorded) and stopped with "cluster.sh stop": only what we started.
#   Only the hosts reach slurmctld: run srun/sbatch/squeue/scontrol inside a
#   host with SLURM_CONF set, e.g.
#     export SLURM_CONF=/run/idist-cluster/idc/slurm/slurm.conf
#     scripts/cluster.sh run 1 srun --nodes=2 --ntasks-per-node=2 hostname
#   or "slurm-cluster.sh run CMD..." which does exactly that.
#   There is no slurmdbd: sacct does not work; a finished job's state is in
#   "scontrol show job ID" for MinJobAge (600 s) after it ends
#   (JobState=COMPLETED, or FAILED with ExitCode=1:0 when a task exits 1);
#   "wait-job" polls that.
#
# Exit codes: 0 ok, 1 failure, 2 usage, 77 cannot be set up here (the line
# starts "slurm-cluster.sh: cannot create the SLURM cluster:" or comes from
# cluster.sh).
set -euo pipefail

here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
readonly CLUSTER=$here/cluster.sh
readonly NAME=${IDIST_CLUSTER:-idc}
readonly SD=/run/idist-cluster/$NAME/slurm
readonly CONF=$SD/slurm.conf
readonly CPUS=${IDIST_SLURM_CPUS:-2}
readonly UP_TIMEOUT=${IDIST_SLURM_UP_TIMEOUT:-60}
# seconds a job credential lives; SLURM also holds a requeued job that long before it may start again
readonly CRED_EXPIRE=${IDIST_SLURM_CRED_EXPIRE:-120}

usage() {
  cat <<EOF
usage: slurm-cluster.sh COMMAND [ARGS]   (as root; IDIST_CLUSTER as for cluster.sh)

  up [N]           start munged, slurmctld (host 1) and one slurmd per host of the
                   emulated cluster; if that cluster is not up, bring it up with N
                   hosts (default 2) first, and "down" takes it down again.
                   Waits up to ${UP_TIMEOUT} s for all nodes idle, then prints
                   "export SLURM_CONF=$CONF". Each node has
                   IDIST_SLURM_CPUS CPUs (default 2). Fails if SLURM is already up.
                   IDIST_SLURM_CRED_EXPIRE: the job credential lifetime in seconds
                   (default 120, SLURM's), also the wait of a requeued job.
  down             cancel jobs, stop the daemons this script started (TERM, KILL
                   after 10 s), remove the SLURM state; idempotent, exits 0
  status           sinfo/squeue of the cluster (exit 0 up, 3 not up)
  env              print "export SLURM_CONF=$CONF"
  run CMD...       run CMD inside host 1 with SLURM_CONF set (srun, sbatch, ...)
  wait-job ID [S]  wait up to S seconds (default 60) for job ID to end; prints its
                   JobState; exit 0 for COMPLETED, 1 otherwise (FAILED, TIMEOUT,
                   CANCELLED..., or still running at the deadline)
EOF
}

say() { echo "slurm-cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage_die() { say "$*"; echo "try 'slurm-cluster.sh --help'" >&2; exit 2; }
cannot() { echo "slurm-cluster.sh: cannot create the SLURM cluster: $*" >&2; exit 77; }

in_host1() { SLURM_CONF=$CONF "$CLUSTER" run 1 "$@"; }
slurm_up() { [[ -f $SD/up ]]; }

write_conf() {
  local n=$1 k
  cat <<EOF
# written by scripts/slurm-cluster.sh for the emulated cluster '$NAME'
ClusterName=idist
SlurmctldHost=${NAME}1(198.18.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SD/munge/munge.socket,cred_expire=$CRED_EXPIRE
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$SD/ctld
SlurmctldPidFile=$SD/ctld/slurmctld.pid
SlurmctldLogFile=$SD/ctld/slurmctld.log
SlurmdSpoolDir=$SD/nodes/%n/spool
SlurmdPidFile=$SD/nodes/%n/slurmd.pid
SlurmdLogFile=$SD/nodes/%n/slurmd.log
# the nodes share /tmp; the pmix plugin puts per-step client dirs under TmpFS
# (spmix_appdir_<job>.<step>), which would collide between nodes
TmpFS=$SD/nodes/%n/tmp
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups, no accounting daemon
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# the emulated nodes share one machine: trust the CPU counts below
SlurmdParameters=config_overrides
# short timeouts: failures show within seconds
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
TCPTimeout=2
KillWait=5
Waittime=0
InactiveLimit=0
# keep finished jobs for "scontrol show job" (there is no slurmdbd)
MinJobAge=600
EOF
  for ((k = 1; k <= n; k++)); do
    echo "NodeName=$NAME$k NodeAddr=198.18.0.$k CPUs=$CPUS State=UNKNOWN"
  done
  echo "PartitionName=idist Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
}

# stop the daemons we recorded, munged last (slurm needs it to shut down)
stop_daemons() {
  local n=$1 k labels=(slurm-ctld)
  for ((k = 1; k <= n; k++)); do labels+=("slurm-d$k"); done
  "$CLUSTER" stop "${labels[@]}" || true
  "$CLUSTER" stop slurm-munged || true
}

# cancel what is still queued or running, so no job step outlives slurmd
cancel_jobs() {
  local ids i
  ids=$(timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" squeue -h -o %A 2>/dev/null) || return 0
  [[ -n $ids ]] || return 0
  # shellcheck disable=SC2086 # word splitting of the id list is intended
  timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" scancel $ids 2>/dev/null || true
  for ((i = 0; i < 40; i++)); do
    ids=$(timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" squeue -h -o %A 2>/dev/null) || return 0
    [[ -z $ids ]] && return 0
    sleep 0.5
  done
  say "warning: jobs $(echo "$ids" | tr '\n' ' ')still listed 20 s after scancel"
}

teardown() {
  local n=0 ours=0
  [[ -f $SD/nodes.count ]] && n=$(cat "$SD/nodes.count")
  [[ -f $SD/own-cluster ]] && ours=1
  if [[ -f $SD/slurm.conf ]] && "$CLUSTER" status >/dev/null 2>&1; then cancel_jobs; fi
  stop_daemons "$n"
  rm -rf "$SD"
  if ((ours)); then "$CLUSTER" down >/dev/null || true; fi
}

# the state (and its logs) goes away with a failed up: show their ends first
show_logs() {
  local f
  # daemons run in the foreground: their stderr (*.out) holds all they log
  for f in "$SD"/munge/munged.log "$SD"/ctld/slurmctld.out "$SD"/nodes/*/slurmd.out; do
    [[ -s $f ]] || continue
    echo "==> $f (last 10 lines) <==" >&2
    tail -n 10 "$f" >&2
  done
}

UP_DONE=0
up_exit() {
  local rc=$?
  if ((UP_DONE == 0)); then
    if ((rc != 77)); then
      show_logs
      say "up failed (exit $rc): stopping what it started"
    fi
    teardown
  fi
  exit "$rc"
}

cmd_up() {
  local want=${1:-} n k st=0 idle
  if [[ -n $want ]] && ! [[ $want =~ ^[0-9]{1,3}$ && $want -ge 1 ]]; then usage_die "up [N]: N must be a positive number"; fi
  [[ $CPUS =~ ^[1-9][0-9]{0,2}$ ]] || usage_die "IDIST_SLURM_CPUS='$CPUS': a number of CPUs per node, 1..999"
  [[ $UP_TIMEOUT =~ ^[0-9]+$ ]] || usage_die "IDIST_SLURM_UP_TIMEOUT='$UP_TIMEOUT': seconds"
  [[ $CRED_EXPIRE =~ ^[1-9][0-9]{0,4}$ ]] || usage_die "IDIST_SLURM_CRED_EXPIRE='$CRED_EXPIRE': seconds, 1..99999"
  [[ $(id -u) -eq 0 ]] || cannot "not root (the emulated cluster and the SLURM daemons need root)"
  for c in munged mungekey slurmctld slurmd srun sinfo scontrol; do
    command -v "$c" >/dev/null ||
      cannot "'$c' not found (install munge slurmctld slurmd slurm-client: scripts/install-deps.sh)"
  done
  slurm_up && die "SLURM is already up on cluster '$NAME'; run 'slurm-cluster.sh down' first"
  [[ -e $SD ]] && die "remains of a SLURM cluster in $SD; run 'slurm-cluster.sh down' first"

  "$CLUSTER" status >/dev/null 2>&1 || st=$?
  local created=0
  case $st in
    0) ;;
    3) "$CLUSTER" up "${want:-2}" >&2 || exit $?; created=1 ;;  # stdout: only the export line
    *) die "cluster '$NAME' is partly present; run 'cluster.sh down' first" ;;
  esac
  n=$("$CLUSTER" hosts | wc -l)
  if [[ -n $want ]] && ((want != n)); then
    ((created)) || die "cluster '$NAME' is up with $n hosts, not $want"
  fi

  trap up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$SD"
  ((created)) && touch "$SD/own-cluster"
  echo "$n" >"$SD/nodes.count"
  mkdir -p "$SD/ctld"
  for ((k = 1; k <= n; k++)); do mkdir -p "$SD/nodes/$NAME$k/spool" "$SD/nodes/$NAME$k/tmp"; done
  # munged wants its socket directory searchable by all, its key private
  mkdir -p "$SD/munge"
  chmod 755 "$SD" "$SD/munge"
  mungekey --create --keyfile="$SD/munge/munge.key" >/dev/null
  write_conf "$n" >"$CONF"
  # slurmd 22.05 always loads a cgroup plugin; inside "ip netns exec" /sys is
  # a fresh sysfs without /sys/fs/cgroup mounts, so autodetection fails. Name
  # the plugin instead: with proctrack/linuxproc and task/none it stays unused.
  echo "CgroupPlugin=cgroup/v1" >"$SD/cgroup.conf"

  "$CLUSTER" spawn 0 slurm-munged "$SD/munge/munged.log" munged --foreground \
    --socket="$SD/munge/munge.socket" --key-file="$SD/munge/munge.key" \
    --pid-file="$SD/munge/munged.pid" --seed-file="$SD/munge/munged.seed" >/dev/null
  for ((k = 0; k < 50; k++)); do
    [[ -S $SD/munge/munge.socket ]] && break
    sleep 0.1
  done
  munge -S "$SD/munge/munge.socket" -n </dev/null >/dev/null ||
    die "munged does not answer; see $SD/munge/munged.log"

  # -c: cold start, no state from an earlier cluster
  "$CLUSTER" spawn 1 slurm-ctld "$SD/ctld/slurmctld.out" env SLURM_CONF="$CONF" \
    slurmctld -D -c -f "$CONF" >/dev/null
  for ((k = 1; k <= n; k++)); do
    "$CLUSTER" spawn "$k" "slurm-d$k" "$SD/nodes/$NAME$k/slurmd.out" env SLURM_CONF="$CONF" \
      slurmd -D -N "$NAME$k" -f "$CONF" >/dev/null
  done

  local deadline=$((SECONDS + UP_TIMEOUT))
  while :; do
    idle=$(timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) || idle=0
    ((idle == n)) && break
    if ((SECONDS >= deadline)); then
      timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" sinfo -N >&2 || true
      die "only $idle of $n nodes idle after ${UP_TIMEOUT} s; logs: $SD/ctld/slurmctld.log, $SD/nodes/*/slurmd.log"
    fi
    sleep 0.5
  done

  touch "$SD/up"
  UP_DONE=1
  trap - EXIT INT TERM
  say "SLURM cluster 'idist' up: $n nodes ${NAME}1..$NAME$n, $CPUS CPUs each; run commands inside a host:"
  say "  scripts/cluster.sh run 1 srun --nodes=$n --ntasks-per-node=$CPUS hostname   (with SLURM_CONF exported)"
  echo "export SLURM_CONF=$CONF"
}

cmd_down() {
  if [[ $(id -u) -ne 0 ]]; then
    [[ -e $SD ]] || { echo "SLURM on cluster '$NAME' down"; return 0; }
    die "down needs root"
  fi
  teardown
  echo "SLURM on cluster '$NAME' down"
}

cmd_wait_job() {
  (($# >= 1 && $# <= 2)) || usage_die "usage: wait-job JOBID [SECONDS]"
  local id=$1 limit=${2:-60} out state deadline
  [[ $id =~ ^[0-9]+$ && $limit =~ ^[0-9]+$ ]] || usage_die "wait-job: JOBID and SECONDS are numbers"
  slurm_up || die "SLURM is not up on cluster '$NAME'"
  deadline=$((SECONDS + limit))
  while :; do
    out=$(timeout 10 "$CLUSTER" run 1 env SLURM_CONF="$CONF" scontrol -o show job "$id" 2>&1) ||
      die "scontrol show job $id: $out"
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$out" | cut -d= -f2)
    case $state in
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | SIGNALING | STAGE_OUT) ;;
      *) break ;;
    esac
    if ((SECONDS >= deadline)); then
      echo "$state"
      say "job $id still $state after $limit s"
      return 1
    fi
    sleep 0.5
  done
  echo "$state"
  [[ $state == COMPLETED ]]
}

main() {
  (($#)) || { usage >&2; exit 2; }
  local cmd=$1
  shift
  case $cmd in
    -h | --help | help) usage ;;
    up) (($# <= 1)) || usage_die "usage: up [N]"; cmd_up "$@" ;;
    down) cmd_down ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    status)
      if ! slurm_up; then echo "SLURM on cluster '$NAME': not up"; return 3; fi
      echo "SLURM on cluster '$NAME': up, SLURM_CONF=$CONF"
      in_host1 sinfo -N
      in_host1 squeue
      ;;
    run)
      (($#)) || usage_die "usage: run CMD..."
      slurm_up || die "SLURM is not up on cluster '$NAME'"
      exec env SLURM_CONF="$CONF" "$CLUSTER" run 1 "$@"
      ;;
    wait-job) cmd_wait_job "$@" ;;
    *) usage_die "unknown command '$cmd'" ;;
  esac
}

main "$@"
