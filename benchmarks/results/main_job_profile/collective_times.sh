#!/usr/bin/env bash
# Durations of the per-step all-reduces (uprobes on gloo::allreduce / PMPI_Allreduce, perf record) of the
# example on gloo and mpi, the DDP peer and the MPI loop, LIMIT (3200) images = 50 steps, under the test lock.
# Wall-clock figures: rough on a shared machine. Needs root (uprobes); removes the probes on exit.
#   BUILD=build benchmarks/results/main_job_profile/collective_times.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
L=${LIMIT:-3200}
steps=$((L / 64))
gloo=$(readlink -f /usr/lib/libgloo.so.0)
mpi=$(readlink -f "$(ldconfig -p | awk '/libmpi.so.40 / {print $NF; exit}')")
sym() { nm -D "$1" | awk -v s="$2" '$2 == "T" && $3 == s {print $1}'; }
ar=$(sym "$gloo" _ZN4gloo9allreduceERKNS_16AllreduceOptionsE)
perf probe -q -x "$gloo" --add "cg_ar_in=0x$ar" --add "cg_ar_out=0x$ar%return"
perf probe -q -x "$gloo" --add "cg_handle=0x$(sym "$gloo" _ZN4gloo9transport3tcp4Pair12handleEventsEi)"
perf probe -q -x "$gloo" --add "cg_rw=0x$(sym "$gloo" _ZN4gloo9transport3tcp4Pair15handleReadWriteEi)"
m=$(sym "$mpi" PMPI_Allreduce)
perf probe -q -x "$mpi" --add "cg_mar_in=0x$m" --add "cg_mar_out=0x$m%return"
tmp=$(mktemp -d)
trap 'perf probe -q -d "probe_libgloo:cg_*" -d "probe_libmpi:cg_*"; rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
G=(-e probe_libgloo:cg_ar_in -e probe_libgloo:cg_ar_out__return -e probe_libgloo:cg_handle -e probe_libgloo:cg_rw)
M=(-e probe_libmpi:cg_mar_in -e probe_libmpi:cg_mar_out__return)
mf=(--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np 2)
rec() { # name events... -- command...
  local name=$1 ev=(); shift; while [ "$1" != -- ]; do ev+=("$1"); shift; done; shift
  flock /tmp/idist-test.lock perf record -q "${ev[@]}" -o "$tmp/$name.data" "$@" --limit "$L" > /dev/null 2>&1
  perf script -i "$tmp/$name.data" -F pid,tid,time,event 2> /dev/null > "$tmp/$name.txt"
}
rec ex_gloo "${G[@]}" -- "$build/examples/fashion_mnist/fashion_mnist" --backend gloo --nproc-per-node 2
rec ddp_gloo "${G[@]}" -- /usr/bin/python3 "$root/benchmarks/peers/ddp_fashion_mnist.py" --nproc 2
rec ex_mpi "${M[@]}" -- mpirun "${mf[@]}" "$build/examples/fashion_mnist/fashion_mnist" --backend mpi
rec mpi_loop "${M[@]}" -- mpirun "${mf[@]}" "$build/benchmarks/peer_mpi_loop"
echo "== example, gloo (bucket, progress totals)"; python3 "$here/collective_times.py" "$tmp/ex_gloo.txt" 2 "$steps" 2
echo "== PyTorch DDP, gloo (bucket)"; python3 "$here/collective_times.py" "$tmp/ddp_gloo.txt" 1 "$steps" 2
echo "== example, mpi (bucket, progress totals)"; python3 "$here/collective_times.py" "$tmp/ex_mpi.txt" 2 "$steps" 1
echo "== MPI loop (one per parameter)"; python3 "$here/collective_times.py" "$tmp/mpi_loop.txt" 8 "$steps" 2
