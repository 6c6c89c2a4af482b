#!/usr/bin/env bash
# README command 1: the main job. Installs the dependencies, configures and builds the example, then
# trains the Fashion-MNIST CNN for one epoch on 2 ranks under mpirun (mpi backend).
# Extra arguments go to the example, e.g.  scripts/run-main-job.sh --epochs 3 --batch-size 128
# Environment: BUILD_DIR (default build/), NP (ranks, default 2).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
np="${NP:-2}"

bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DIDIST_WITH_MPI=ON -DIDIST_WITH_TORCH=ON
cmake --build "$build" -j"$(nproc)" --target fashion_mnist

mpi_flags=(--oversubscribe)  # never refuse for want of slots on small machines
if [ "$(id -u)" -eq 0 ]; then mpi_flags+=(--allow-run-as-root); fi
# Containers usually forbid the cross-memory attach of Open MPI's shared-memory transport.
mpi_flags+=(--mca btl_vader_single_copy_mechanism none)

set -x
exec mpirun "${mpi_flags[@]}" -np "$np" "$build/examples/fashion_mnist/fashion_mnist" --backend mpi --epochs 1 "$@"
