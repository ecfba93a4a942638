#!/usr/bin/env bash
# Prints the folder holding cuobjdump and nvdisasm 13.2.51 (the toolkit here lacks both), fetched
# once from pinned, hash-checked PyPI wheels into .deps/sass-13.2.51 (ignored by git). Used by
# scripts/sass_counts.sh and scripts/sass_lines.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tools=${EAGLE_DEPS_DIR:-$repo/.deps}/sass-13.2.51
# fetch <wheel> <sha256> <pip spec>: the wheel's bin/ into $tools/bin.
fetch() {
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$3"
  if ! echo "$2  $tmp/$1" | sha256sum --check --status; then
    echo "sass_tools: $1 does not have the pinned sha256 $2" >&2
    rm -rf "$tmp"
    exit 1
  fi
  python3 - "$tmp/$1" "$tools/bin" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if "/bin/" in n and not n.endswith("/"):
            out = os.path.join(dest, os.path.basename(n))
            with open(out, "wb") as f:
                f.write(z.read(n))
            os.chmod(out, 0o755)
PY
  rm -rf "$tmp"
}
if [ ! -f "$tools/.complete" ]; then
  echo "sass_tools: fetching cuobjdump and nvdisasm 13.2.51 into $tools" >&2
  fetch nvidia_cuda_cuobjdump-13.2.51-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl \
    95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50 nvidia-cuda-cuobjdump==13.2.51
  fetch nvidia_cuda_nvdisasm-13.2.51-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl \
    5a7acf77c55d6d2911ed6155d4d5bc156ffadf9df7a68a89b0c1155f4b13688c nvidia-cuda-nvdisasm==13.2.51
  touch "$tools/.complete"
fi
echo "$tools/bin"
