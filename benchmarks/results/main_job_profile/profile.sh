#!/usr/bin/env bash
# Instruction counts per training step and region under callgrind, for the example (gloo, mpi), the PyTorch
# DDP peer and the hand-written MPI loop, 2 ranks x 1 thread, on the first LIMIT training images.
#   benchmarks/results/main_job_profile/build_instrumented.sh build /tmp/prof/bin
#   BIN=/tmp/prof/bin OUT=/tmp/prof/cg benchmarks/results/main_job_profile/profile.sh [CASE...]
# CASEs (default all): ex_gloo ex_gloo_epoch ex_gloo_prestacked ex_mpi ex_mpi_epoch ex_mpi_prestacked
# ddp_gloo ddp_gloo_step ddp_gloo_prestacked mpi_loop. Each writes OUT/CASE/cg.<pid>[.<n>] and
# OUT/CASE/regions.txt (analyze_regions.py). Every case runs under the shared test lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:?BIN: the folder build_instrumented.sh wrote}
out=${OUT:?OUT: where to write the profiles}
limit=${LIMIT:-448}
python=${PEER_PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=1 PROF_SKIP_EVAL=1
cg=(valgrind --tool=callgrind --trace-children=no)
mpiflags=(--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none)
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run_case() {
  local c=$1 d=$out/$1 port
  rm -rf "$d" && mkdir -p "$d"
  local f=(--callgrind-out-file="$d/cg.%p")
  case $c in
    ex_gloo*|ex_mpi*)
      local env=()
      [[ $c == *_epoch ]] && env=(PROF_METRICS=epoch)
      [[ $c == *_prestacked ]] && env=(PROF_LOADER=prestacked)
      if [[ $c == ex_gloo* ]]; then
        env "${env[@]}" "${cg[@]}" "${f[@]}" "$bin/fashion_mnist_prof" --backend gloo --nproc-per-node 2 \
          --master-port "$(free_port)" --limit "$limit"
      else
        env "${env[@]}" mpirun "${mpiflags[@]}" -np 2 "${cg[@]}" "${f[@]}" "$bin/fashion_mnist_prof" --backend mpi \
          --limit "$limit"
      fi ;;
    ddp_gloo*)
      local env=(PROF_CG_LIB="$bin/cg_marker.so")
      [[ $c == *_step ]] && env+=(PROF_METRICS=step)
      [[ $c == *_prestacked ]] && env+=(PROF_LOADER=prestacked)
      port=$(free_port)
      for r in 0 1; do
        env "${env[@]}" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "${cg[@]}" "${f[@]}" \
          "$python" "$bin/ddp_prof.py" --nproc 0 --limit "$limit" > "$d/rank$r.out" 2> "$d/rank$r.err" &
      done
      wait ;;
    mpi_loop)
      mpirun "${mpiflags[@]}" -np 2 "${cg[@]}" "${f[@]}" "$bin/peer_mpi_loop_prof" --limit "$limit" ;;
    *) echo "profile: unknown case $c" >&2; return 1 ;;
  esac > "$d/stdout.txt" 2> "$d/stderr.txt"
  "$python" "$here/analyze_regions.py" "$d" --skip 2 > "$d/regions.txt"
  echo "== $c" && cat "$d/regions.txt"
}

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(ex_gloo ex_gloo_epoch ex_gloo_prestacked ex_mpi ex_mpi_epoch ex_mpi_prestacked
  ddp_gloo ddp_gloo_step ddp_gloo_prestacked mpi_loop)
for c in "${cases[@]}"; do
  flock /tmp/idist-test.lock timeout 1800 bash -c "$(declare -f run_case free_port); $(declare -p here bin out limit python cg mpiflags); run_case $c"
done
