#!/usr/bin/env bash
# tests/gpu/prepare-kit.sh: fills the kit folder that tests/gpu/wheel.sh needs on a GPU machine that has
# only PyTorch's wheel: idist's other build dependencies and the Fashion-MNIST files. The folder
# (default <repo>/.gpukit) is ignored by git, so a copy of the checkout carries it only when asked to
# (a device call's `carry: [".gpukit"]`); it holds about 40 MB.
#
#   .gpukit/prefix/{fmt,cli11,gtest,zlib,asio}   one install prefix per package (Debian's files), so that
#                                                fmt's headers do not shadow LibTorch's bundled fmt
#   .gpukit/data/*.gz + SHA256SUMS               train / t10k images and labels (IDX, gzip)
#   .gpukit/COMMIT                               the checkout's commit when the kit was made
#
# Usage: tests/gpu/prepare-kit.sh [PREFIX [DATA_DIR]]
#   PREFIX    a folder with the five sub-prefixes (default: $GPUKIT_PREFIX, else <repo>/../shared/gpukit/prefix)
#   DATA_DIR  the four Fashion-MNIST .gz files (default: $GPUKIT_DATA, else /usr/share/datasets/fashion-mnist)
# Environment: GPUKIT_DIR (the kit folder to fill, default <repo>/.gpukit).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${GPUKIT_DIR:-$repo/.gpukit}
prefix=${1:-${GPUKIT_PREFIX:-$repo/../shared/gpukit/prefix}}
data=${2:-${GPUKIT_DATA:-/usr/share/datasets/fashion-mnist}}
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
# One file per package that its find_package / include must see.
needed=(fmt/include/fmt/format.h cli11/include/CLI/CLI.hpp gtest/include/gtest/gtest.h zlib/include/zlib.h
  asio/include/asio.hpp)

fail() {
  echo "prepare-kit.sh: $*" >&2
  exit 1
}

[ -d "$prefix" ] || fail "no prefix folder at $prefix (give one as the first argument or in GPUKIT_PREFIX)"
for f in "${needed[@]}"; do
  [ -f "$prefix/$f" ] || fail "$prefix/$f is missing (expected the sub-prefixes fmt, cli11, gtest, zlib, asio)"
done
for f in "${files[@]}"; do
  [ -s "$data/$f" ] || fail "$data/$f is missing or empty (the Debian package dataset-fashion-mnist installs it)"
done

# Built beside the kit, then moved into place: an interrupted run leaves the previous kit as it was.
stage="$kit.partial"
rm -rf "$stage"
mkdir -p "$stage/data"
# Dereferenced, and writable (the sources may be read-only): the copy has plain files only.
cp -rL "$prefix" "$stage/prefix"
for f in "${files[@]}"; do cp -L "$data/$f" "$stage/data/"; done
chmod -R u+w "$stage"
(cd "$stage/data" && sha256sum "${files[@]}" >SHA256SUMS)
git -C "$repo" rev-parse --short HEAD >"$stage/COMMIT" 2>/dev/null || echo unknown >"$stage/COMMIT"
rm -rf "$kit"
mv "$stage" "$kit"

echo "kit ready: $kit ($(du -sh "$kit" | cut -f1); prefix from $prefix, data from $data, commit $(cat "$kit/COMMIT"))"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 && ! git -C "$repo" check-ignore -q "$kit"; then
  echo "warning: git does not ignore $kit: add it to .gitignore, or a copy of the checkout takes it as a tracked-looking folder"
fi
echo "On a device machine: carry [\"$(realpath --relative-to="$repo" "$kit")\"], then run tests/gpu/wheel.sh"
