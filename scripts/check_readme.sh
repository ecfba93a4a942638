#!/usr/bin/env bash
# Checks that every ```cpp block of README.md is code that compiles: each must appear verbatim
# (after removing common leading indentation) inside a region of examples/ marked
#   // [readme:NAME]
#   ...
#   // [/readme]
# and the examples are built and run by ctest. Likewise every ```python block must be a region of
# python/examples/*.py marked with `# [readme:NAME]` ... `# [/readme]` (run by the Python tests).
# Names each block that does not. Usage: scripts/check_readme.sh [README] [examples dir]
set -euo pipefail
cd "$(dirname "$0")/.."
readme=${1:-README.md}
examples=${2:-examples}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
status=0

# check_blocks <language> <comment marker> <examples dir> <find name patterns...>
check_blocks() {
local lang=$1 mark=$2 dir=$3
shift 3
local tmp=$root/$lang
mkdir -p "$tmp"
local examples=$dir

# Removes the indentation common to the non-blank lines, and trailing blanks.
dedent() {
  awk '{ sub(/[ \t]+$/, ""); line[NR] = $0
         if ($0 != "") { match($0, /^ */); if (min == "" || RLENGTH < min) min = RLENGTH } }
       END { for (i = 1; i <= NR; i++) print substr(line[i], min + 1) }' "$1"
}

# README blocks: block_<line>.raw, where <line> is the line of the opening fence.
awk -v dir="$tmp" -v lang="$lang" '
  $0 ~ "^[ \t]*```" lang "[ \t]*$" { inside = 1; file = dir "/block_" NR ".raw"; printf "" > file; next }
  inside && /^[ \t]*```[ \t]*$/ { inside = 0; close(file); next }
  inside { print > file }' "$readme"

# Marked regions of the examples: region_<n>.raw, with region_<n>.name holding "file:line NAME".
bad=0
n=0
while IFS= read -r file; do
  out=$(awk -v dir="$tmp" -v src="$file" -v start="$n" -v mark="$mark" '
    $0 ~ "^[ \t]*" mark " \\[readme:[A-Za-z0-9_.-]+\\]" {
      if (inside) { print "unclosed " name " before line " NR > "/dev/stderr"; exit 1 }
      inside = 1; n++; name = $0; sub(/.*\[readme:/, "", name); sub(/\].*/, "", name)
      file = dir "/region_" (start + n) ".raw"; printf "" > file
      print src ":" NR " " name > (dir "/region_" (start + n) ".name"); next }
    $0 ~ "^[ \t]*" mark " \\[/readme\\]" {
      if (!inside) { print "[/readme] without an opening marker at line " NR > "/dev/stderr"; exit 1 }
      inside = 0; close(file); next }
    inside { print > file }
    END { if (inside) { print "unclosed region " name > "/dev/stderr"; exit 1 } print n }' "$file") || {
    echo "check_readme: $file: bad markers"
    bad=1
    continue
  }
  n=$((n + out))
done < <(find "$examples" -type f \( "$@" \) | sort)

for f in "$tmp"/region_*.raw "$tmp"/block_*.raw; do
  [ -e "$f" ] && dedent "$f" >"${f%.raw}.txt"
done

blocks=0
# In README order (block_<line>.txt, by line number).
for block in $(find "$tmp" -name 'block_*.txt' | sort -t_ -k2 -n); do
  blocks=$((blocks + 1))
  line=${block##*/block_}
  line=${line%.txt}
  found=""
  for region in "$tmp"/region_*.txt; do
    [ -e "$region" ] || continue
    # Is the block a run of consecutive lines of the region?
    if awk 'NR == FNR { r[++nr] = $0; next } { b[++nb] = $0 }
            END { for (i = 0; i + nb <= nr; i++) { ok = 1
                    for (j = 1; j <= nb && ok; j++) if (r[i + j] != b[j]) ok = 0
                    if (ok) exit 0 }
                  exit 1 }' "$region" "$block"; then
      found=$(cat "${region%.txt}.name")
      break
    fi
  done
  if [ -z "$found" ]; then
    first=$(grep -m1 -v '^$' "$block" || true)
    echo "check_readme: the \`\`\`$lang block at $readme:$line (\"$first\") is not a verbatim excerpt" \
      "of a $mark [readme:NAME] region of $examples/"
    bad=1
  fi
done

if [ "$bad" -ne 0 ]; then
  echo "check_readme: copy the block from its example, or mark the example's code with" \
    "$mark [readme:NAME] ... $mark [/readme] (the examples are run by the tests)"
  status=1
  return
fi
echo "check_readme: all $blocks $lang blocks of $readme are excerpts of $examples/"
}

check_blocks cpp // "$examples" -name '*.cpp' -o -name '*.cu' -o -name '*.hpp'
check_blocks python '#' python/examples -name '*.py'
exit "$status"
