#!/usr/bin/env bash
# cluster.sh: an emulated cluster of N hosts on one Linux machine (run as root).
#
# Design
#   Host K (1..N) is a network namespace named <prefix>K (default prefix "idc",
#   so hosts idc1, idc2, ...) with
#     - eth0 = 198.18.0.K/24, one end of a veth pair whose other end
#       (<prefix>Kb, in the root namespace) is a port of the bridge <prefix>br0.
#       The bridge has no address and there is no default route, so from a host
#       only the loopback and the other hosts are reachable (198.18.0.0/24 is
#       the benchmarking range of RFC 2544; nothing else is ever addressed).
#       IPv6 is off on eth0 and the bridge ports (no ND/MLD chatter).
#     - its own hostname, held by a persistent UTS namespace bind-mounted on
#       /run/idist-cluster/<prefix>/hK.uts;
#     - its own /etc/hosts, /etc/hostname and /etc/resolv.conf under
#       /etc/netns/<prefix>K/ ("ip netns exec" bind-mounts them over /etc).
#       As on Debian, 127.0.1.1 is the host's own name (so a host's own name
#       resolves to loopback: the trap real users hit), every other host's name
#       maps to its 198.18.0.K address, and resolv.conf names no server (glibc
#       then asks 127.0.0.1 inside the host, which refuses at once).
#     - optionally, tbf shaping at RATE on both directions of its link
#       (egress of eth0 and egress of the bridge port); netem is not used.
#   "run K CMD" enters host K's network namespace (with its /etc files) and UTS
#   namespace and runs CMD there with the caller's environment.
#   Several clusters can coexist: IDIST_CLUSTER=<prefix> picks the prefix
#   (lowercase letters/digits, starting and ending with a letter, <= 8 chars).
#   State lives in /run/idist-cluster/<prefix>/; up/down/link take a lock on
#   /run/idist-cluster so concurrent calls do not interleave.
#   Daemons started with "spawn" are recorded (pid + start time, so a reused
#   pid is never signalled) in the state dir; "stop" and "down" signal exactly
#   those, nothing else.
#
# Exit codes: 0 ok, 1 failure (e.g. cluster already up / not up), 2 usage,
#   77 the emulated cluster cannot be created here (not root, no network
#   namespaces/bridge/veth/tbf); "run" returns CMD's exit status;
#   "status" returns 0 up, 1 partly present (run "down"), 3 not up.
set -euo pipefail

readonly NAME=${IDIST_CLUSTER:-idc}
readonly BASE=/run/idist-cluster
readonly STATE=$BASE/$NAME
readonly BRIDGE=${NAME}br0
readonly NET=198.18.0
SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF

usage() {
  cat <<EOF
usage: cluster.sh COMMAND [ARGS]      (as root; IDIST_CLUSTER=<prefix>, default idc)

  up N [--rate RATE] [--burst BYTES]
                       create hosts ${NAME}1..${NAME}N (198.18.0.1..N/24) on bridge
                       $BRIDGE; RATE (e.g. 100mbit, 1gbit, 10gbit) shapes every
                       link in both directions with tbf, whose bucket is BYTES
                       (default: 1 ms of RATE, at least 128 KiB; IDIST_CLUSTER_BURST
                       gives it when --burst is absent). Fails (exit 1) if this
                       cluster already exists; a failed up removes what it made.
  down                 stop recorded daemons, remove hosts, bridge, /etc/netns
                       files and state; idempotent, always exits 0
  run K CMD...         run CMD in host K (number or hostname): its network, its
                       hostname, its /etc/hosts; exits with CMD's status
  spawn K LABEL LOG CMD...
                       start CMD detached in host K (0 = the root namespace),
                       stdout/stderr appended to LOG, pid recorded as LABEL;
                       prints the pid
  stop [LABEL...]      TERM the recorded processes (all if no LABEL), KILL after
                       10 s, forget them
  link K down|up       take host K's link down (cable cut: no carrier) or up
  addr K | hostname K  print host K's address / hostname
  hosts                list the hostnames, one per line
  pids K               list the pids of all processes in host K's network
                       namespace (whoever started them), one per line
  status               describe the cluster (exit 0 up, 1 partial, 3 not up)
  --help               this text
EOF
}

say() { echo "cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage_die() { say "$*"; echo "try 'cluster.sh --help'" >&2; exit 2; }
# The one line tests look for to report "skipped".
cannot() { echo "cluster.sh: cannot create the emulated cluster: $*" >&2; exit 77; }

[[ $NAME =~ ^[a-z]([a-z0-9]{0,6}[a-z])?$ ]] ||
  usage_die "IDIST_CLUSTER='$NAME': use 1-8 lowercase letters/digits, first and last a letter"

host_ns() { echo "$NAME$1"; }     # namespace name == hostname
port_of() { echo "$NAME${1}b"; }  # bridge-side veth of host K
uts_of() { echo "$STATE/h$1.uts"; }
recorded_n() { cat "$STATE/hosts" 2>/dev/null || echo 0; }
is_up() { [[ -f $STATE/up ]]; }

need_root() {
  [[ $(id -u) -eq 0 ]] || die "$1 needs root"
}

lock() {
  mkdir -p "$BASE"
  exec 9<"$BASE"
  flock -w 120 9 || die "timed out waiting for the lock on $BASE"
}

# host K given as a number or a hostname of this cluster; prints K.
host_index() {
  local h=$1 n
  is_up || die "cluster '$NAME' is not up (run: cluster.sh up N)"
  n=$(recorded_n)
  [[ $h =~ ^$NAME([0-9]+)$ ]] && h=${BASH_REMATCH[1]}
  if ! [[ $h =~ ^[0-9]{1,3}$ ]] || ((10#$h < 1 || 10#$h > n)); then
    die "no host '$1' in cluster '$NAME' (hosts 1..$n)"
  fi
  echo $((10#$h))
}

# tbf needs a bucket of at least one (GSO-sized) packet and about one timer
# tick of traffic: 1 ms of RATE, at least 128 KiB (1gbit -> 128 KiB,
# 10gbit -> 1.25 MB).
burst_for() {
  local rate=$1 num unit bits
  [[ $rate =~ ^([0-9]+)(|k|m|g)bit$ ]] || return 1
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in
    '') bits=$num ;;
    k) bits=$((num * 1000)) ;;
    m) bits=$((num * 1000000)) ;;
    g) bits=$((num * 1000000000)) ;;
  esac
  ((bits > 0)) || return 1
  local b=$((bits / 8 / 1000))
  ((b < 131072)) && b=131072
  echo "$b"
}

# --- recorded processes -------------------------------------------------------

# start time (clock ticks since boot) of pid $1, empty if gone or a zombie
start_time() {
  local stat rest f
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  rest=${stat##*) }  # fields after "(comm) ", i.e. from field 3 (state) on
  read -r -a f <<<"$rest"
  [[ ${f[0]} == Z ]] && return 0
  echo "${f[19]}"    # field 22
}

# alive and still the process we recorded?
rec_alive() {
  local pid st
  read -r pid st _ <"$1" 2>/dev/null || return 1
  [[ -n $pid && $(start_time "$pid") == "$st" ]]
}

stop_records() {
  local recs=("$@") r pid deadline sig
  for r in "${recs[@]}"; do
    if rec_alive "$r"; then
      read -r pid _ <"$r"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for sig in KILL none; do
    deadline=$((SECONDS + 10))
    for r in "${recs[@]}"; do
      while rec_alive "$r" && ((SECONDS < deadline)); do sleep 0.1; done
    done
    [[ $sig == none ]] && break
    for r in "${recs[@]}"; do
      if rec_alive "$r"; then
        read -r pid _ <"$r"
        say "pid $pid ($(basename "$r" .pid)) ignored SIGTERM for 10 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
  for r in "${recs[@]}"; do
    rec_alive "$r" && say "pid $(cut -d' ' -f1 "$r") still alive after SIGKILL"
    rm -f "$r"
  done
}

cmd_spawn() {
  (($# >= 4)) || usage_die "usage: spawn K LABEL LOG CMD..."
  local k=$1 label=$2 log=$3 pid st
  shift 3
  [[ $label =~ ^[A-Za-z0-9._-]+$ ]] || usage_die "bad label '$label'"
  [[ $k == 0 ]] || k=$(host_index "$k")
  mkdir -p "$STATE/pids"
  [[ -e $STATE/pids/$label.pid ]] && rec_alive "$STATE/pids/$label.pid" &&
    die "a process labelled '$label' is already running"
  # setsid: own session, so no terminal signal reaches it. A background child of
  # a non-interactive shell is no group leader, so setsid does not fork, and
  # "run" execs: $! is the daemon's own pid.
  if [[ $k == 0 ]]; then
    setsid "$@" </dev/null >>"$log" 2>&1 &
  else
    setsid "$SELF" run "$k" "$@" </dev/null >>"$log" 2>&1 &
  fi
  pid=$!
  st=$(start_time "$pid")
  [[ -n $st ]] || die "'$*' exited at once; see $log"
  echo "$pid $st $k $*" >"$STATE/pids/$label.pid"
  echo "$pid"
}

cmd_stop() {
  local recs=() l
  if (($# == 0)); then
    shopt -s nullglob
    recs=("$STATE"/pids/*.pid)
    shopt -u nullglob
  else
    for l in "$@"; do [[ -f $STATE/pids/$l.pid ]] && recs+=("$STATE/pids/$l.pid"); done
  fi
  ((${#recs[@]} == 0)) || stop_records "${recs[@]}"
}

# --- up / down ----------------------------------------------------------------

# everything of this cluster that exists, recorded or not (a crashed up may
# leave resources without state)
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}[0-9]+$" || true; }
# ports of our bridge (a namespace's deletion destroys its veth pair anyway,
# unless a process keeps the namespace alive)
our_ports() { ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' || true; }

teardown() {
  local k ns p pids n
  # SLURM on this cluster: cancel its jobs and stop its daemons first (its own
  # down must not take the cluster down again: we hold the lock)
  if [[ -d $STATE/slurm ]]; then
    rm -f "$STATE/slurm/own-cluster"
    "$(dirname "$SELF")/slurm-cluster.sh" down >/dev/null || true
  fi
  cmd_stop || true
  n=$(recorded_n)
  local nss
  nss=$( { for ((k = 1; k <= n; k++)); do host_ns "$k"; done; our_namespaces; } | sort -u)
  for ns in $nss; do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
    [[ -n ${pids// /} ]] &&
      say "warning: processes not started by the cluster scripts still run in $ns (pids ${pids% }); they lose their network"
    k=${ns#"$NAME"}
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
    umount "$(uts_of "$k")" 2>/dev/null || true
  done
  for p in $(our_ports); do ip link del "$p" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  if [[ -d $STATE ]]; then
    for f in "$STATE"/h*.uts; do [[ -e $f ]] && { umount "$f" 2>/dev/null || true; }; done
    rm -rf "$STATE"
  fi
}

no_ipv6() {  # no link-local address, no ND/MLD packets on this interface
  local ns=$1 dev=$2
  if [[ -n $ns ]]; then
    ip netns exec "$ns" sh -c "[ ! -d /proc/sys/net/ipv6/conf/$dev ] || echo 1 >/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
  elif [[ -d /proc/sys/net/ipv6/conf/$dev ]]; then
    echo 1 >"/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
  fi
}

write_etc() {  # /etc/netns/<ns>/{hosts,hostname,resolv.conf} of host $1 of $2
  local k=$1 n=$2 j dir
  dir=/etc/netns/$(host_ns "$k")
  mkdir -p "$dir"
  {
    echo "# emulated host $(host_ns "$k") of idist cluster '$NAME' (scripts/cluster.sh)"
    printf '127.0.0.1\tlocalhost\n'
    printf '127.0.1.1\t%s\n' "$(host_ns "$k")"
    for ((j = 1; j <= n; j++)); do
      ((j == k)) || printf '%s.%d\t%s\n' "$NET" "$j" "$(host_ns "$j")"
    done
    printf '\n::1     localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n'
  } >"$dir/hosts"
  host_ns "$k" >"$dir/hostname"
  printf '# no DNS in the emulated cluster: names come from /etc/hosts\noptions timeout:1 attempts:1\n' >"$dir/resolv.conf"
}

UP_DONE=0
up_exit() {
  local rc=$?
  if ((UP_DONE == 0)); then
    # exit 77 already said why, in the one line tests look for
    ((rc == 77)) || say "up failed (exit $rc): removing what it created"
    teardown
  fi
  exit "$rc"
}

cmd_up() {
  local n="" rate="" burst="" want_burst=${IDIST_CLUSTER_BURST:-} err k ns port
  while (($#)); do
    case $1 in
      --rate) (($# >= 2)) || usage_die "--rate needs a value"; rate=$2; shift 2 ;;
      --rate=*) rate=${1#--rate=}; shift ;;
      --burst) (($# >= 2)) || usage_die "--burst needs a value"; want_burst=$2; shift 2 ;;
      --burst=*) want_burst=${1#--burst=}; shift ;;
      *) [[ -z $n ]] || usage_die "unexpected argument '$1'"; n=$1; shift ;;
    esac
  done
  if ! [[ $n =~ ^[0-9]{1,3}$ ]] || ((10#$n < 1 || 10#$n > 250)); then
    usage_die "up N: N must be 1..250"
  fi
  n=$((10#$n))
  if [[ -n $rate ]]; then
    burst=$(burst_for "$rate") || usage_die "--rate '$rate': use <number>[k|m|g]bit, e.g. 1gbit"
  fi
  if [[ -n $want_burst ]]; then
    # at least one 64 KiB GSO packet, so that tbf never has to split one
    [[ $want_burst =~ ^[0-9]{1,9}$ ]] && ((10#$want_burst >= 65536)) ||
      usage_die "--burst '$want_burst': a bucket size in bytes from 65536 to 999999999 was expected"
    [[ -n $rate ]] || usage_die "--burst needs --rate"
    burst=$((10#$want_burst))
  fi

  [[ $(id -u) -eq 0 ]] || cannot "not root (network namespaces, a bridge and veth pairs need root)"
  for c in ip nsenter unshare flock setsid; do
    command -v "$c" >/dev/null || cannot "'$c' not found (install iproute2 and util-linux)"
  done
  [[ -z $rate ]] || command -v tc >/dev/null || cannot "'tc' not found (install iproute2)"

  lock
  if [[ -e $STATE ]] || ip link show "$BRIDGE" >/dev/null 2>&1 || [[ -n $(our_namespaces) ]]; then
    if is_up; then
      die "cluster '$NAME' is already up ($(recorded_n) hosts); run 'cluster.sh down' first"
    fi
    die "remains of cluster '$NAME' exist ($STATE, bridge $BRIDGE or namespaces $NAME<K>); run 'cluster.sh down' first"
  fi

  trap up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$STATE/pids"
  echo "$n" >"$STATE/hosts"       # first, so a crash leaves enough to clean up
  echo "${rate:-unshaped}${burst:+ burst $burst}" >"$STATE/rate"

  # The first bridge, namespace and veth decide whether this machine can do it.
  err=$(ip link add name "$BRIDGE" type bridge 2>&1) ||
    cannot "cannot create a bridge (ip link add type bridge: $err)"
  no_ipv6 "" "$BRIDGE"
  ip link set "$BRIDGE" up

  for ((k = 1; k <= n; k++)); do
    ns=$(host_ns "$k") port=$(port_of "$k")
    err=$(ip netns add "$ns" 2>&1) || {
      ((k == 1)) && cannot "cannot create a network namespace (ip netns add: $err)"
      die "ip netns add $ns: $err"
    }
    err=$(ip link add "$port" type veth peer name eth0 netns "$ns" 2>&1) || {
      ((k == 1)) && cannot "cannot create a veth pair (ip link add type veth: $err)"
      die "veth for $ns: $err"
    }
    no_ipv6 "" "$port"
    ip link set "$port" master "$BRIDGE"
    ip link set "$port" up
    no_ipv6 "$ns" eth0
    ip -n "$ns" addr add "$NET.$k/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    if [[ -n $rate ]]; then
      err=$(ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms 2>&1) || {
        ((k == 1)) && cannot "tbf shaping not available (tc qdisc add tbf: $err)"
        die "tc on $ns: $err"
      }
      tc qdisc add dev "$port" root tbf rate "$rate" burst "$burst" latency 50ms
    fi
    touch "$(uts_of "$k")"
    err=$(unshare --uts="$(uts_of "$k")" hostname "$ns" 2>&1) ||
      cannot "cannot create a persistent UTS namespace (unshare --uts=FILE: $err)"
    write_etc "$k" "$n"
  done

  touch "$STATE/up"
  UP_DONE=1
  trap - EXIT INT TERM
  echo "cluster '$NAME' up: hosts $(host_ns 1)..$(host_ns "$n") = $NET.1..$NET.$n/24, bridge $BRIDGE, rate ${rate:-unshaped}${burst:+, tbf burst $burst bytes}"
}

cmd_down() {
  if [[ $(id -u) -ne 0 ]]; then
    # nothing to remove is no failure, whoever asks
    [[ -e $STATE || -n $(our_namespaces) ]] || { echo "cluster '$NAME' down"; return 0; }
    die "down needs root"
  fi
  lock
  teardown
  echo "cluster '$NAME' down"
}

cmd_status() {
  local n k ns port st=0 link procs
  if ! is_up; then
    if [[ -e $STATE ]] || ip link show "$BRIDGE" >/dev/null 2>&1 || [[ -n $(our_namespaces) ]]; then
      echo "cluster '$NAME': partly present (run 'cluster.sh down')"
      return 1
    fi
    echo "cluster '$NAME': not up"
    return 3
  fi
  n=$(recorded_n)
  echo "cluster '$NAME': up, $n hosts, bridge $BRIDGE, rate $(cat "$STATE/rate"), state $STATE"
  ip link show "$BRIDGE" >/dev/null 2>&1 || { echo "  bridge $BRIDGE MISSING"; st=1; }
  for ((k = 1; k <= n; k++)); do
    ns=$(host_ns "$k") port=$(port_of "$k")
    if ! ip netns list | awk '{print $1}' | grep -qx "$ns"; then
      echo "  $ns: namespace MISSING"; st=1; continue
    fi
    link=$(ip -o link show "$port" 2>/dev/null | grep -q '[<,]UP[,>]' && echo up || echo down)
    procs=$(ip netns pids "$ns" 2>/dev/null | wc -l)
    echo "  $ns $NET.$k link=$link processes=$procs"
  done
  local r s
  for r in "$STATE"/pids/*.pid; do
    [[ -e $r ]] || continue
    if rec_alive "$r"; then s=running; else s=gone; fi
    echo "  daemon $(basename "$r" .pid): $s: $(cut -d' ' -f1,3- "$r")"
  done
  return $st
}

main() {
  (($#)) || { usage >&2; exit 2; }
  local cmd=$1
  shift
  case $cmd in
    -h | --help | help) usage ;;
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    run)
      (($# >= 2)) || usage_die "usage: run K CMD..."
      need_root run
      local k
      k=$(host_index "$1")
      shift
      exec ip netns exec "$(host_ns "$k")" nsenter --uts="$(uts_of "$k")" -- "$@"
      ;;
    spawn) need_root spawn; cmd_spawn "$@" ;;
    stop) need_root stop; cmd_stop "$@" ;;
    link)
      if (($# != 2)) || [[ $2 != up && $2 != down ]]; then usage_die "usage: link K down|up"; fi
      need_root link
      local k
      k=$(host_index "$1")
      ip link set "$(port_of "$k")" "$2"
      ;;
    addr | hostname)
      (($# == 1)) || usage_die "usage: $cmd K"
      local k
      k=$(host_index "$1")
      if [[ $cmd == addr ]]; then echo "$NET.$k"; else host_ns "$k"; fi
      ;;
    hosts)
      is_up || die "cluster '$NAME' is not up"
      local k
      for ((k = 1; k <= $(recorded_n); k++)); do host_ns "$k"; done
      ;;
    pids)
      (($# == 1)) || usage_die "usage: pids K"
      need_root pids
      local k
      k=$(host_index "$1")
      ip netns pids "$(host_ns "$k")"
      ;;
    status) cmd_status ;;
    *) usage_die "unknown command '$cmd'" ;;
  esac
}

main "$@"
