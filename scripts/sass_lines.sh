#!/usr/bin/env bash
# The SASS of a CUDA object built with -lineinfo, each instruction under its source locations
# (`nvdisasm -gi`), for scripts/ncu_source_lines.py. Usage:
#   scripts/sass_lines.sh OBJECT OUT.sass
# Build OBJECT with the flags of the measured build plus -lineinfo (the SASS is the same), e.g.
# from build-device: nvcc <CUDA_FLAGS, INCLUDES, DEFINES of eagle_engines_sm90> -lineinfo -c
# ../src/engines/native/linear_attention/gdn_fwd_sm90.cu -o /tmp/gdn_fwd_lines.o
set -euo pipefail
[ $# -eq 2 ] || { sed -n 2,7p "$0" >&2; exit 2; }
bin=$("$(dirname "$0")/sass_tools.sh")
object=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && "$bin/cuobjdump" -xelf all "$object" > /dev/null)
cubin=$(find "$work" -name '*sm_90a*.cubin' | head -1)
[ -n "$cubin" ] || { echo "sass_lines: no sm_90a cubin in $1" >&2; exit 1; }
"$bin/nvdisasm" -gi -c "$cubin" > "$2"
echo "sass_lines: $(grep -c '//## File' "$2") source locations in $2" >&2
