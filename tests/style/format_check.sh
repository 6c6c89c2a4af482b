#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what .clang-format makes of it (the tree was formatted
# once; this keeps it so). Prints each such file and the command that fixes it. Skips (exit 77, with
# the reason) where clang-format or git is missing, e.g. a source tarball without .git; fails there
# under CI=true (tests/support/skip.sh).
set -euo pipefail
root="$1"
source "$(dirname "${BASH_SOURCE[0]}")/../support/skip.sh"
command -v clang-format >/dev/null || skip_test "clang-format not found"
git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || skip_test "$root is not a git checkout"
cd "$root"
bad=()
while IFS= read -r f; do
  [[ -f "$f" ]] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' | grep -v '^benchmarks/results/')
if ((${#bad[@]})); then
  printf 'not formatted: %s\n' "${bad[@]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "every tracked C++ file is formatted ($(clang-format --version))"
