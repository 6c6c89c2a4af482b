#!/usr/bin/env bash
# The one rule for a test that cannot run here (no root, no network namespaces, no dataset, a part
# not built): outside CI it reports Skipped (exit 77, ctest's SKIP_RETURN_CODE) with the reason; under
# CI (CI=true or CI=1) it FAILS with the reason, so that CI is never green over coverage it did not
# have. GPU tests are the exception and do not use this (they skip wherever no GPU is visible).
#
# Sourced by test scripts:   . tests/support/skip.sh; skip_test "dataset-fashion-mnist is not installed"
# Run as a ctest command:    skip.sh --unless-file <path> <reason> -- <command...>
#                            (runs the command when <path> is readable, else skip_test <reason>)
#                            skip.sh --because <reason>
#                            (a test whose requirement configure found missing: always skip_test <reason>)

# in_ci: true under CI=true / CI=1 (GitHub Actions, GitLab and most CI services set CI=true).
in_ci() { [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; }

# skip_test <reason>: ends the test as described above.
skip_test() {
  if in_ci; then
    echo "FAILED: this test cannot run here and CI=${CI} forbids skipping it: $*"
    exit 1
  fi
  echo "SKIPPED: $*"
  exit 77
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ $# -ge 4 && "$1" == --unless-file && "$4" == -- ]]; then
    file=$2 reason=$3
    shift 4
    [[ $# -ge 1 ]] || { echo "skip.sh: no command after --" >&2; exit 2; }
    [[ -r "$file" ]] || skip_test "$reason ($file not found)"
    exec "$@"
  fi
  if [[ $# -eq 2 && "$1" == --because ]]; then
    skip_test "$2"
  fi
  echo "usage: $0 --unless-file <path> <reason> -- <command...> | --because <reason>" >&2
  exit 2
fi
