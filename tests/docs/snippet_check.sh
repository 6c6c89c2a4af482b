#!/usr/bin/env bash
# snippet_check.sh <source.cpp> <page.md>: every region `// [snippet:NAME]` ... `// [end]` of the
# source must appear in the page as the code block that follows `<!-- snippet:NAME -->`, line for
# line (the region's common indentation removed), and the page must name no other snippet.
# Exits 1 listing each snippet that differs or is missing.
set -euo pipefail
src=$1
page=$2
[ -f "$src" ] || { echo "snippet_check: no source file $src"; exit 1; }
[ -f "$page" ] || { echo "snippet_check: no page $page"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The source's regions, de-indented, one file per name.
awk -v out="$tmp/src" '
  /\/\/ \[snippet:[A-Za-z0-9_-]+\]/ { match($0, /\[snippet:[A-Za-z0-9_-]+\]/); name = substr($0, RSTART + 9, RLENGTH - 10); n = 0; next }
  /\/\/ \[end\]/ && name != "" {
    min = -1
    for (i = 1; i <= n; i++) if (lines[i] ~ /[^ ]/) { match(lines[i], /^ */); if (min < 0 || RLENGTH < min) min = RLENGTH }
    for (i = 1; i <= n; i++) print substr(lines[i], min + 1) > (out "." name)
    close(out "." name); name = ""; next
  }
  name != "" { lines[++n] = $0 }
' "$src"
# The page's blocks, one file per name.
awk -v out="$tmp/md" '
  /<!-- snippet:[A-Za-z0-9_-]+ -->/ { match($0, /snippet:[A-Za-z0-9_-]+/); name = substr($0, RSTART + 8, RLENGTH - 8); state = 1; next }
  state == 1 && /^```/ { state = 2; printf "" > (out "." name); next }
  state == 2 && /^```/ { close(out "." name); state = 0; name = ""; next }
  state == 2 { print > (out "." name) }
' "$page"

shopt -s nullglob
failures=()
sources=("$tmp"/src.*)
[ ${#sources[@]} -gt 0 ] || { echo "snippet_check: no [snippet:NAME] region in $src"; exit 1; }
for f in "${sources[@]}"; do
  name=${f##*/src.}
  if [ ! -f "$tmp/md.$name" ]; then
    failures+=("$name: no block after <!-- snippet:$name --> in $page")
  elif ! diff -u --label "$src [snippet:$name]" --label "$page snippet:$name" "$f" "$tmp/md.$name"; then
    failures+=("$name: the block in $page differs from $src (diff above)")
  fi
done
for f in "$tmp"/md.*; do
  name=${f##*/md.}
  [ -f "$tmp/src.$name" ] || failures+=("$name: named in $page, but $src has no [snippet:$name] region")
done
if [ ${#failures[@]} -gt 0 ]; then
  echo "snippet_check: ${#failures[@]} snippet(s) out of date:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "snippet_check: ${#sources[@]} snippet(s) of $page match $src"
