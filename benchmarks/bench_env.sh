# Sourced by run_collectives.sh, run_training.sh and repeat_training.sh: the settings they share
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
