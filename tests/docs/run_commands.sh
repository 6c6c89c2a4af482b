#!/usr/bin/env bash
# run_commands.sh <source dir> <build dir> <README program>: lists every shell command of README.md and
# docs/ with its status from commands.tsv, checks what each names (scripts, programs, options,
# variables), and runs the `run` ones in a fresh folder laid out as the pages assume: build/ (this
# build), ./train (README.md's program), data/ (Fashion-MNIST for it).
set -euo pipefail
src=$(realpath "$1")
build=$(realpath "$2")
train=$(realpath "$3")
data=${IDIST_DOCS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
ln -s "$train" "$work/train"
for d in scripts benchmarks tests examples; do ln -s "$src/$d" "$work/$d"; done
mkdir "$work/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  gunzip -c "$data/$f.gz" >"$work/data/$f"
done
# As launching.md says: as root mpirun wants --allow-run-as-root, and --oversubscribe for more ranks
# than cores; the commands are run as the page writes them, so the environment says it instead.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
exec python3 "$src/tests/docs/doc_blocks.py" commands "$src" "$src/tests/docs/commands.tsv" "$build" "$work"
