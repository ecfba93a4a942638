#!/usr/bin/env bash
# SASS instruction counts of a CUDA object's kernels (scripts/sass_counts.py), for comparing two
# versions of a kernel on a machine without a GPU. Usage:
#   scripts/sass_counts.sh OBJECT PATTERN [--loops] [--top N]
# OBJECT is a .o or .cubin with sm_90a code (e.g. build-device/CMakeFiles/eagle_engines_sm90.dir/
# src/engines/native/linear_attention/gdn_fwd_sm90.cu.o); PATTERN a substring of the mangled
# kernel names. cuobjdump and nvdisasm come from scripts/sass_tools.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n 2,7p "$0" >&2; exit 2; }
bin=$("$repo/scripts/sass_tools.sh")
object=$1
shift
sass=$(mktemp)
trap 'rm -f "$sass"' EXIT
PATH=$bin:$PATH cuobjdump -sass "$object" > "$sass"
python3 "$repo/scripts/sass_counts.py" "$sass" "$@"
