#!/usr/bin/env bash
# Builds the instrumented copies of the example (instrument_example.py) and of the MPI loop
# (instrument_mpi_loop.py) into OUT_DIR, each with the very compile and link commands of BUILD_DIR's target
# (same flags and libraries; only the instrumented source differs), and cg_marker.so for the DDP peer.
#   benchmarks/results/main_job_profile/build_instrumented.sh BUILD_DIR OUT_DIR
#     -> OUT_DIR/fashion_mnist_prof, OUT_DIR/peer_mpi_loop_prof, OUT_DIR/cg_marker.so, OUT_DIR/ddp_prof.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)

# instrumented <ninja target> <source, relative to root> <object dir of the target> <instrumenter> <binary>
instrumented() {
  local target=$1 src=$2 objdir=$3 tool=$4 bin=$5 cmds compile link name
  name=$(basename "$src")
  python3 "$here/$tool" "$root/$src" "$out/$name"
  cmds=$(ninja -C "$build" -t commands "$target")
  compile=$(grep -F -- "-c $root/$src" <<< "$cmds" | tail -n 1)
  link=$(grep -F -- "-o $target " <<< "$cmds" | tail -n 1)
  [ -n "$compile" ] && [ -n "$link" ] || { echo "build_instrumented: no commands for $target in $build" >&2; exit 1; }
  compile=${compile//"-c $root/$src"/"-c $out/$name"}
  compile=${compile//"-o $objdir/$name.o"/"-o $out/$name.o"}
  compile=${compile//"-MF $objdir/$name.o.d"/"-MF $out/$name.o.d"}
  compile=${compile//" -MT $objdir/$name.o"/}
  link=${link//"$objdir/$name.o"/"$out/$name.o"}
  link=${link//"-o $target "/"-o $out/$bin "}
  (cd "$build" && eval "$compile" && eval "$link")
}
instrumented examples/fashion_mnist/fashion_mnist examples/fashion_mnist/training.cpp \
  examples/fashion_mnist/CMakeFiles/fashion_mnist.dir instrument_example.py fashion_mnist_prof
instrumented benchmarks/peer_mpi_loop benchmarks/peers/mpi_loop.cpp benchmarks/CMakeFiles/peer_mpi_loop.dir/peers \
  instrument_mpi_loop.py peer_mpi_loop_prof
python3 "$here/instrument_ddp.py" "$root/benchmarks/peers/ddp_fashion_mnist.py" "$out/ddp_prof.py"
cc -O2 -shared -fPIC -o "$out/cg_marker.so" "$here/cg_marker.c"
ls "$out"/fashion_mnist_prof "$out"/peer_mpi_loop_prof "$out"/cg_marker.so "$out"/ddp_prof.py
