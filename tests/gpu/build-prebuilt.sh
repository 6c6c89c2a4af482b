#!/usr/bin/env bash
# tests/gpu/build-prebuilt.sh: builds the GPU checks here, without a GPU, for a GPU machine that has
# CUDA of the same major version and an NCCL library but not idist's other dependencies (fmt) nor
# time to build: an nccl-only Release build in $BUILD_DIR (default <repo>/build-gpu) with the
# binaries' run path pointing at $BUILD_DIR/gpulib, which receives libidist, libfmt and libcudart.
# Then, on the GPU machine, with the NCCL library's folder on LD_LIBRARY_PATH:
#   PREBUILT=1 BUILD_DIR=<repo>/build-gpu tests/gpu/run.sh
# Carry build-gpu/gpulib, build-gpu/tests/gpu and build-gpu/tests/conformance (about 10 MiB).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$repo/build-gpu}
# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIDIST_WITH_NCCL=ON -DIDIST_WITH_MPI=OFF \
  -DIDIST_WITH_GLOO=OFF -DIDIST_WITH_TORCH=OFF -DIDIST_BUILD_TESTS=ON -DIDIST_BUILD_EXAMPLES=OFF \
  -DIDIST_BUILD_BENCHMARKS=OFF '-DCMAKE_BUILD_RPATH=$ORIGIN/../../src;$ORIGIN/../../gpulib;$ORIGIN'
cmake --build "$build" -j"${JOBS:-$(nproc)}" --target idist_nccl_gpu idist_nccl_gpu_faults idist_nccl_allreduce_bw \
  idist_conformance
rm -rf "$build/gpulib"  # else ldd would find last time's copies there (the binaries' run path)
mkdir -p "$build/gpulib"
bin=$build/tests/gpu/idist_nccl_gpu
# libidist, fmt and the CUDA runtime travel; NCCL is the GPU machine's own (same C API).
libs=$(ldd "$bin" | awk '$1 ~ /^(libidist|libfmt|libcudart)\.so/ { print $3 }')
[ "$(wc -w <<<"$libs")" -eq 3 ] || { echo "build-prebuilt.sh: expected libidist, libfmt and libcudart in: $libs" >&2; exit 1; }
for path in $libs; do cp -L "$path" "$build/gpulib/"; done
echo "ready: $build/gpulib, $build/tests/gpu, $build/tests/conformance"
