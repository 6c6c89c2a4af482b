#!/usr/bin/env bash
# Builds idist in its single-backend configurations (serial-only, mpi-only, gloo-only, nccl-only;
# the main build is "everything"), installs each into its own prefix and builds and runs a consumer
# that calls idist::Parallel (tests/install/consumer_parallel) against it. Part of README command 2.
# Usage: scripts/check-configurations.sh [--build-only] [serial|mpi|gloo|nccl ...]   (default: all four;
#   --build-only configures and builds them, nothing more: run-tests.sh does that while ctest runs)
# Environment: JOBS (build parallelism, default nproc), CONFIG_ROOT (default build-configs/).
# nccl-only needs CUDA and NCCL (/usr/local/cuda); without them it is reported as skipped.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
base="${CONFIG_ROOT:-$root/build-configs}"
build_only=0
[[ "${1:-}" == --build-only ]] && { build_only=1; shift; }
configs=("$@")
[[ ${#configs[@]} -eq 0 ]] && configs=(serial mpi gloo nccl)
mpiexec_flags=(--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none)
status=0
mkdir -p "$base"
summary=()

for c in "${configs[@]}"; do
  mpi=OFF gloo=OFF nccl=OFF
  case $c in
    serial) ;;
    mpi) mpi=ON ;;
    gloo) gloo=ON ;;
    nccl) nccl=ON ;;
    *) echo "usage: $0 [--build-only] [serial|mpi|gloo|nccl ...]" >&2; exit 2 ;;
  esac
  if [[ $c == nccl && ! -e /usr/local/cuda/include/nccl.h && ! -e /usr/include/nccl.h ]]; then
    summary+=("$c-only: skipped (no CUDA / NCCL on this machine)")
    continue
  fi
  build="$base/$c"
  start=$SECONDS
  echo "==== $c-only: configure and build in $build"
  # Benchmarks stay on: an mpi-only build once failed to link the collectives benchmark. Build type
  # None (no optimisation, no debug information): these builds check what compiles, links, installs
  # and runs, which the optimiser does not change, and they compile faster without it.
  if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DIDIST_BUILD_TESTS=OFF \
       -DIDIST_BUILD_EXAMPLES=OFF -DIDIST_BUILD_BENCHMARKS=ON -DIDIST_WITH_TORCH=OFF \
       -DIDIST_WITH_MPI=$mpi -DIDIST_WITH_GLOO=$gloo -DIDIST_WITH_NCCL=$nccl >"$build.configure.log" 2>&1 &&
     cmake --build "$build" -j"$jobs" >"$build.build.log" 2>&1; then
    if ((build_only)); then
      summary+=("$c-only: built ($((SECONDS - start)) s)")
      continue
    fi
    case $c in
      mpi) run="$(IFS=';'; echo "mpirun;${mpiexec_flags[*]};-np;2;@APP@;mpi")" ;;
      *) run="@APP@;$c" ;;
    esac
    if cmake -DBUILD_DIR="$build" -DCONSUMER_DIR="$root/tests/install/consumer_parallel" \
         -DWORK_DIR="$build-consumer" -DGENERATOR=Ninja -DCXX="$(command -v c++)" -DCONFIG=None \
         "-DRUN=$run" -P "$root/tests/install/run_install_test.cmake" >"$build.consumer.log" 2>&1; then
      summary+=("$c-only: built, installed, consumer_parallel passed ($((SECONDS - start)) s)")
    else
      summary+=("$c-only: FAILED: the consumer (see $build.consumer.log)")
      tail -30 "$build.consumer.log"
      status=1
    fi
  else
    summary+=("$c-only: FAILED: configure or build (see $build.configure.log, $build.build.log)")
    tail -30 "$build.configure.log" "$build.build.log" 2>/dev/null || true
    status=1
  fi
done

echo "==================== single-backend configurations ===================="
printf '%s\n' "${summary[@]}"
exit "$status"
