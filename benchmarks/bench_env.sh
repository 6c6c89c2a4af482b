# Sourced by the benchmark scripts (run_*.sh, repeat_training.sh): the settings they share
# and how they start ranks.
#
#   . "$(dirname "$0")/bench_env.sh" <benchmark target> <script name>
#
# Sets root, build (BUILD_DIR, default ./build), out (OUT_DIR, default ./bench-results), np (NP,
# default 2), mpiflags and bin (the benchmark binary, which must exist unless the target is empty);
# creates $out; runs LibTorch with one intra-op thread per rank.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${OUT_DIR:-$root/bench-results}
np=${NP:-2}
bin=$build/benchmarks/$1
mpiflags=(--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none)
# An empty target: a script that runs no benchmark binary (run_tcp_goodput.sh).
[ -z "$1" ] || [ -x "$bin" ] || { echo "$2: $bin not found; build the target $1" >&2; exit 1; }
mkdir -p "$out"
export OMP_NUM_THREADS=1

# launch <backend> <args...>: the benchmark on $np ranks of <backend> (mpi under mpirun, gloo
# through idist::spawn), or as one process for serial.
launch() {
  local b=$1
  shift
  case $b in
    serial) "$bin" --backend serial "$@" ;;
    mpi) mpirun "${mpiflags[@]}" -np "$np" "$bin" --backend mpi "$@" ;;
    gloo) "$bin" --backend gloo --nproc "$np" "$@" ;;
    *) echo "launch: unknown backend $b" >&2; return 1 ;;
  esac
}

# tcp_goodput <cluster script>: the fraction of a tbf-shaped link's rate that TCP's payload can use
# between the emulated hosts that are up (e.g. 0.9564 at MTU 1500). tbf counts whole frames: each
# carries MTU - 52 bytes of payload (IPv4 20, TCP 20, its timestamp option 12, on by default) in
# MTU + 14 bytes (the Ethernet header). benchmarks/tcp_stream.py measures it.
tcp_goodput() {
  local mtu
  mtu=$("$1" run 1 cat /sys/class/net/eth0/mtu)
  awk -v m="$mtu" 'BEGIN { printf "%.4f\n", (m - 52) / (m + 14) }'
}

# The helpers below bring up and use an emulated 2-host cluster (scripts/cluster.sh); they read the
# caller's cluster (its script), h1 (host 1's name), pin (1: host K's processes on core K-1) and
# run_timeout (seconds each command may run).
#
# cluster_up_pair <rate>: a fresh 2-host cluster (whatever the caller's cluster left is removed first)
# with links shaped at <rate>; sets h1 and h2 to the hosts' names. cluster.sh's own line goes to stdout.
cluster_up_pair() {
  "$cluster" down >/dev/null 2>&1 || true
  "$cluster" up 2 --rate "$1"
  h1=$("$cluster" hostname 1)
  h2=$("$cluster" hostname 2)
}

# host_prefix <K>: sets hp to the command prefix that runs on emulated host K (pinned to core K-1 when
# pin is 1).
host_prefix() {
  hp=("$cluster" run "$1")
  [ "$pin" = 1 ] && hp+=(taskset -c $(($1 - 1)))
  return 0
}

# pair <log> <command...>: the command as rank 1 on host 2 (background) and rank 0 on host 1, with
# torchrun's variables; rank 0's output goes to <log>.out, both ranks' errors to <log>.err*.
pair() {
  local log=$1 port rank1 status=0
  shift
  port=$((20000 + RANDOM % 20000))
  local env=(env WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$h1" MASTER_PORT="$port" OMP_NUM_THREADS=1)
  host_prefix 2
  timeout --kill-after=30 "$run_timeout" "${hp[@]}" "${env[@]}" RANK=1 "$@" > /dev/null 2> "$log.err1" &
  rank1=$!
  host_prefix 1
  timeout --kill-after=30 "$run_timeout" "${hp[@]}" "${env[@]}" RANK=0 "$@" > "$log.out" 2> "$log.err" || status=$?
  wait "$rank1" || status=$?
  return "$status"
}

# ddp_check <script name>: exits unless PEER_PYTHON (default /usr/bin/python3) has torch with gloo.
ddp_check() {
  "${PEER_PYTHON:-/usr/bin/python3}" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    { echo "$1: ${PEER_PYTHON:-/usr/bin/python3} has no torch with gloo (Debian: apt install python3-torch)" >&2; exit 1; }
}

# ddp_pair <log> <args...>: PyTorch's DDP in Python (benchmarks/peers/ddp_fashion_mnist.py under
# PEER_PYTHON, default /usr/bin/python3) with <args>, through pair. DDP's Gloo binds to the address of
# the host's own name (127.0.1.1 on these hosts, as on Debian), which the peer cannot reach: its users
# name the interface.
ddp_pair() {
  local log=$1
  shift
  pair "$log" env GLOO_SOCKET_IFNAME=eth0 "${PEER_PYTHON:-/usr/bin/python3}" "$root/benchmarks/peers/ddp_fashion_mnist.py" \
    --nproc 0 --threads 1 "$@"
}
