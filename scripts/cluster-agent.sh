#!/usr/bin/env bash
# cluster-agent.sh: an ssh stand-in that runs a command on a host of the
# emulated cluster (scripts/cluster.sh), for Open MPI's rsh launcher:
#
#   scripts/cluster.sh run 1 mpirun --host idc1:2,idc2:2 \
#     --mca plm_rsh_agent "$PWD/scripts/cluster-agent.sh" \
#     --mca btl tcp,self --mca btl_tcp_if_include 198.18.0.0/24 \
#     --mca oob_tcp_if_include 198.18.0.0/24 ...
#
# Open MPI 4.1 calls the agent as "AGENT HOST WORD..." (plus "-x" and the
# like when it believes the agent is ssh), where the words form one shell
# command line, quoted for the remote shell: e.g.
#   idc2 ' orted' -mca ess '"env"' ... -mca orte_hnp_uri '"...;tcp://198.18.0.1:PORT"'
# So, like ssh, the agent skips ssh options, joins the words with spaces and
# hands the line to /bin/sh -c inside the host. Unlike ssh it keeps the
# caller's environment and working directory (one machine, one filesystem).
# HOST may be a hostname (idc2), user@hostname, a host number or 198.18.0.K.
# IDIST_CLUSTER selects the cluster as for cluster.sh.
# Exit status: the command's, or 255 for the agent's own errors (as ssh).
#
# "cluster-agent.sh --mpirun-flags" prints, on one line, the mpirun options
# that use this agent and keep Open MPI's traffic (daemons' OOB, TCP BTL) on
# the cluster's network; as root it adds --allow-run-as-root (the emulated
# cluster needs root) and --bind-to none: the emulated hosts share this machine's
# cores, and each host's orted would otherwise bind its first rank to core 0, so
# one rank per host would put every rank on the same core. Use it unquoted: mpirun $(cluster-agent.sh --mpirun-flags) ...
# mpirun itself must run inside a host (cluster.sh run 1 mpirun ...): only the
# hosts reach each other. No --prefix is needed: the agent keeps PATH and
# LD_LIBRARY_PATH, so orted is found where mpirun was.
set -euo pipefail

here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
fail() { echo "cluster-agent.sh: $*" >&2; exit 255; }

if [[ ${1:-} == --mpirun-flags ]]; then
  [[ $here != *[[:space:]]* ]] || fail "the agent's path '$here' holds a space: --mpirun-flags cannot be word-split"
  flags=(--mca plm_rsh_agent "$here/cluster-agent.sh" --mca btl "tcp,self"
    --mca btl_tcp_if_include 198.18.0.0/24 --mca oob_tcp_if_include 198.18.0.0/24 --bind-to none)
  [[ $(id -u) -ne 0 ]] || flags=(--allow-run-as-root "${flags[@]}")
  echo "${flags[*]}"
  exit 0
fi

while (($#)); do
  case $1 in
    --) shift; break ;;
    # ssh options that take an argument, separate or attached
    -[BbcDEeFIiJLlmOopQRSWw])
      (($# >= 2)) || fail "option $1 needs an argument"
      shift 2 ;;
    -[BbcDEeFIiJLlmOopQRSWw]?*) shift ;;
    # ssh flags, possibly combined (-xq)
    -[46AaCfGgKkMNnqsTtVvXxYy]*) shift ;;
    -*) fail "unsupported option '$1'" ;;
    *) break ;;
  esac
done
(($# >= 1)) || fail "usage: cluster-agent.sh [ssh options] HOST COMMAND..."
host=${1#*@}
shift
(($# >= 1)) || fail "no command for $host (interactive logins are not supported)"
[[ $host =~ ^198\.18\.0\.([0-9]+)$ ]] && host=${BASH_REMATCH[1]}
"$here/cluster.sh" hostname "$host" >/dev/null 2>&1 ||
  fail "'$host' is no host of the emulated cluster '${IDIST_CLUSTER:-idc}' (see: cluster.sh hosts)"

exec "$here/cluster.sh" run "$host" /bin/sh -c "$*"
