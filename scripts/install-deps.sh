#!/usr/bin/env bash
# Installs the Debian 12 packages idist builds, tests and trains with.
# Skips what is already present; runs apt-get as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  libopenmpi-dev openmpi-bin
  libgloo-dev
  libtorch-dev libopenblas0-openmp
  python3-torch
  libfmt-dev libcli11-dev libasio-dev
  libgtest-dev libbenchmark-dev
  zlib1g-dev
  dataset-fashion-mnist
  gnuplot-nox
  doxygen clang-format
  iproute2
  munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
