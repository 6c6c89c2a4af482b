#!/usr/bin/env bash
# run_elastic_record.sh <program>: docs/fault-tolerance.md's record() program returns run()'s status,
# and after an exception exits 1 having written torchrun's error file with the exception's message.
set -uo pipefail
prog=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TORCHELASTIC_ERROR_FILE=$work/error.json "$prog" || { echo "FAILED: exit $? without an exception"; exit 1; }
[ ! -e "$work/error.json" ] || { echo "FAILED: an error file without an error"; exit 1; }
DOCS_RUN_THROWS=1 TORCHELASTIC_ERROR_FILE=$work/error.json "$prog"
status=$?
[ "$status" -eq 1 ] || { echo "FAILED: exit $status after an exception, expected 1"; exit 1; }
grep -q "run() failed on purpose" "$work/error.json" || { echo "FAILED: the error file lacks the message:"; cat "$work/error.json"; exit 1; }
echo "record(): exit 0, then exit 1 with the message in the error file"
