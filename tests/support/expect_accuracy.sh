#!/usr/bin/env bash
# expect_accuracy.sh <min> <command...>: runs a training command and passes only when it exits 0 AND
# its JSON report (the last line holding "test_accuracy") gives a test accuracy of at least <min>.
# For the training smoke tests, where a pattern alone would ignore the exit status and a loose one
# would accept chance (0.1 on Fashion-MNIST).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 <min accuracy> <command...>" >&2
  exit 2
fi
min=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "FAILED: the command exited with status $rc (expected 0)"
  exit 1
fi
acc=$(grep -o '"test_accuracy": *[0-9.]*' "$log" | tail -n 1 | sed 's/.*: *//')
if [ -z "$acc" ]; then
  echo "FAILED: no \"test_accuracy\" in the command's output"
  exit 1
fi
if ! awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a + 0 >= m + 0) }'; then
  echo "FAILED: test accuracy $acc is below $min"
  exit 1
fi
echo "ok: exit status 0, test accuracy $acc >= $min"
