#!/usr/bin/env bash
# Events per rank-step (perf stat at --limit 3200 and 9600: the difference over the 200 extra rank-steps) of
# the example's variants and the DDP peer: gloo handleEvents calls that found the pair locked (uprobes on
# libgloo), context switches, page faults, futex and writev calls, CPU time. Prints raw lines (tag limit rep
# counts... images/s); the README's table is the per-rank-step difference.
#   BUILD=build BIN=/tmp/prof/bin EXP_LIB=/path/to/patched/libidist/dir benchmarks/results/main_job_profile/event_counts.sh
# BIN: build_instrumented.sh's folder. EXP_LIB: a libidist built with op_lane_knobs.patch (optional; its
# variants are skipped without it). Needs root for the uprobes; removes them on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
bin=${BIN:?}
gloo=$(readlink -f /usr/lib/libgloo.so.0)
handle=$(nm -D "$gloo" | awk '/ T _ZN4gloo9transport3tcp4Pair12handleEventsEi$/ {print $1}')
rw=$(nm -D "$gloo" | awk '/ T _ZN4gloo9transport3tcp4Pair15handleReadWriteEi$/ {print $1}')
perf probe -q -x "$gloo" --add "ec_handle=0x$handle" && perf probe -q -x "$gloo" --add "ec_rw=0x$rw"
trap 'perf probe -q -d "probe_libgloo:ec_*"' EXIT
export OMP_NUM_THREADS=1
E="probe_libgloo:ec_handle,probe_libgloo:ec_rw,context-switches,page-faults,syscalls:sys_enter_futex,syscalls:sys_enter_writev,task-clock"
lb=$build/src:$build/src/torch
ex=$build/examples/fashion_mnist/fashion_mnist
pr=$bin/fashion_mnist_prof
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stat=$(mktemp)
v() { # tag libdir env... -- command...
  local tag=$1 lib=$2 envs=() L o; shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  for L in 3200 9600; do
    o=$(env LD_LIBRARY_PATH="$lib" "${envs[@]}" flock /tmp/idist-test.lock perf stat -x, -o "$stat" -e "$E" "$@" \
      --limit $L 2> /dev/null | grep '^{' | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
    echo "$tag $L $rep $(grep -v '^#' "$stat" | grep -v '^$' | cut -d, -f1 | tr '\n' ' ') ips=$o"
  done
}
for rep in 1 2; do
  v ex_base "$lb" -- "$ex" --backend gloo --nproc-per-node 2 --master-port "$(port)"
  v ex_epoch "$lb" PROF_METRICS=epoch -- "$pr" --backend gloo --nproc-per-node 2 --master-port "$(port)"
  v ddp "$lb" -- /usr/bin/python3 "$root/benchmarks/peers/ddp_fashion_mnist.py" --nproc 2
  v ddp_step "$lb" -- /usr/bin/python3 "$root/benchmarks/peers/ddp_fashion_mnist.py" --nproc 2 --metrics step
  if [ -n "${EXP_LIB:-}" ]; then
    le=$EXP_LIB:$build/src/torch
    v ex_nolinger "$le" IDIST_EXP_LINGER_US=0 -- "$ex" --backend gloo --nproc-per-node 2 --master-port "$(port)"
    v ex_noinline "$le" IDIST_EXP_NO_INLINE=1 IDIST_EXP_GRACE_US=0 -- "$ex" --backend gloo --nproc-per-node 2 \
      --master-port "$(port)"
    v ex_epoch_nolinger "$le" PROF_METRICS=epoch IDIST_EXP_LINGER_US=0 -- "$pr" --backend gloo --nproc-per-node 2 \
      --master-port "$(port)"
    v ex_all "$le" PROF_METRICS=epoch IDIST_EXP_LINGER_US=0 PROF_LOADER=prestacked -- "$pr" --backend gloo \
      --nproc-per-node 2 --master-port "$(port)"
  fi
done
rm -f "$stat"
