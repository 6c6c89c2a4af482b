#!/usr/bin/env bash
# link_check.sh <repository root>: every relative link `[text](target)` of README.md and docs/*.md
# must name a file or folder that exists, and a `#anchor` into a Markdown file one of its headings
# (GitHub's slugs). Links inside code blocks and inline code, and http(s) / mailto links, are not
# checked. Exits 1 listing every broken link as file:line: target (reason).
set -euo pipefail
root=${1:?usage: link_check.sh <repository root>}
cd "$root"

# GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
slugs() {
  awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    sed -E 's/`//g; s/\[([^]]*)\]\([^)]*\)/\1/g' | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

broken=()
checked=0
for page in README.md docs/*.md; do
  [ -f "$page" ] || continue
  dir=$(dirname "$page")
  # file:line:target for every link outside code blocks and inline code.
  while IFS=$'\t' read -r line target; do
    checked=$((checked + 1))
    case "$target" in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*}
    anchor=""
    [[ "$target" == *"#"* ]] && anchor=${target#*#}
    if [ -z "$path" ]; then
      resolved=$page
    else
      resolved=$dir/$path
    fi
    if [ ! -e "$resolved" ]; then
      broken+=("$page:$line: $target (no such file: $resolved)")
    elif [ -n "$anchor" ] && [[ "$resolved" == *.md ]] && ! slugs "$resolved" | grep -qxF -- "$anchor"; then
      broken+=("$page:$line: $target (no heading with anchor #$anchor in $resolved)")
    fi
  done < <(awk '
      /^```/ { code = !code; next }
      code { next }
      {
        s = $0
        gsub(/`[^`]*`/, "", s)   # inline code
        while (match(s, /\]\([^) ]+\)/)) {
          printf "%d\t%s\n", NR, substr(s, RSTART + 2, RLENGTH - 3)
          s = substr(s, RSTART + RLENGTH)
        }
      }' "$page")
done

# A link to an image resolves to a file; the image must also be one (an empty file passes the above).
for img in "$root"/docs/img/*.png; do
  [ -e "$img" ] || continue
  [ "$(head -c 8 "$img" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    broken+=("${img#"$root"/}: not a PNG image (empty or damaged); redraw it with benchmarks/plot*.sh")
done

if [ ${#broken[@]} -gt 0 ]; then
  echo "link_check: ${#broken[@]} broken link(s) of $checked:"
  printf '  %s\n' "${broken[@]}"
  exit 1
fi
echo "link_check: $checked links of README.md and docs/*.md resolve"
