#!/usr/bin/env bash
# run_readme_train.sh <train> [launcher args...]: runs README.md's program as its reader would, in a
# fresh folder holding data/ (Fashion-MNIST's training set, gunzipped: LibTorch's MNIST reader wants the
# four IDX files of that format and exactly 60,000 training images), e.g.
#   run_readme_train.sh build/tests/docs/idist_docs_program_readme_train
#   run_readme_train.sh <train> mpirun --allow-run-as-root -np 2 -- --backend mpi
# Passes when every epoch printed its loss (3 lines, rank 0 only), each finite and below chance
# (ln 10 = 2.303), and the last below the first.
set -euo pipefail
train=$(realpath "$1")
shift
launcher=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do launcher+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the program's own arguments follow --
data=${IDIST_DOCS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  gunzip -c "$data/$f.gz" >"$work/data/$f"
done
ln -s "$train" "$work/train"
cd "$work"
echo "running in $work: ${launcher[*]} ./train $*"
set +e
"${launcher[@]}" ./train "$@" >out.txt 2>&1
status=$?
set -e
cat out.txt
[ "$status" -eq 0 ] || { echo "FAILED: the program exited with $status"; exit 1; }
awk '
  /^epoch [0-9]+: loss / { n++; v[n] = $4 + 0; if ($4 !~ /^[0-9.]+$/ || v[n] >= 2.303) bad = bad " " $0 }
  END {
    if (n != 3) { print "FAILED: expected 3 epoch lines from rank 0, got " n; exit 1 }
    if (bad != "") { print "FAILED: a loss not below chance (2.303):" bad; exit 1 }
    if (v[3] >= v[1]) { print "FAILED: the loss did not decrease: " v[1] " then " v[3]; exit 1 }
    print "README program: 3 epochs, loss " v[1] " -> " v[3]
  }' out.txt
