#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what .clang-format makes of it (the tree was formatted
# once; this keeps it so). Prints each such file and the command that fixes it. Skips (exit 77, with
# the reason) where clang-format or git is missing, e.g. a source tarball without .git.
set -euo pipefail
root="$1"
command -v clang-format >/dev/null || { echo "SKIP: clang-format not found"; exit 77; }
git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: $root is not a git checkout"; exit 77; }
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
