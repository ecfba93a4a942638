#!/usr/bin/env bash
# Installs what eagle needs to build and test, from Debian's packages. Idempotent: installs
# only what is missing, and asks the package index nothing when nothing is missing.
set -euo pipefail
packages=(cmake g++ make libtbb-dev libgtest-dev clang-format clang-tidy)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "eagle: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Third-party headers, from pinned PyPI wheels: downloaded with pip, hash-checked, and only the
# headers unpacked into .deps/ (ignored by git), where CMake looks for them. Quiet when present.
deps_dir=${EAGLE_DEPS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.deps}
# fetch_headers <name> <pip spec> <wheel file> <sha256> <folder inside the wheel> [pip flags...]
fetch_headers() {
  local name=$1 spec=$2 wheel=$3 sha=$4 inner=$5
  shift 5
  local dest=$deps_dir/$name
  [ -f "$dest/.complete" ] && return 0
  if ! python3 -m pip --version >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "eagle: installing python3-pip"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip unzip >/dev/null
  fi
  echo "eagle: fetching $spec (headers only) into $dest"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$@" -d "$tmp" "$spec"
  if [ ! -f "$tmp/$wheel" ]; then
    echo "eagle: pip did not deliver $wheel for $spec" >&2
    ls "$tmp" >&2
    rm -rf "$tmp"
    exit 1
  fi
  if ! echo "$sha  $tmp/$wheel" | sha256sum --check --status; then
    echo "eagle: $wheel does not have the pinned sha256 $sha" >&2
    rm -rf "$tmp"
    exit 1
  fi
  rm -rf "$dest" && mkdir -p "$dest"
  python3 - "$tmp/$wheel" "$inner" "$dest/include" <<'PY'
import os, sys, zipfile
wheel, inner, dest = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.startswith(inner) and not n.endswith("/"):
            out = os.path.join(dest, n[len(inner):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(n))
PY
  rm -rf "$tmp"
  touch "$dest/.complete"
}
# The C++ graph API of cuDNN (MIT). The wheel is per Python version; the headers are not.
fetch_headers cudnn-frontend-1.32.0 nvidia-cudnn-frontend==1.32.0 \
  nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl \
  c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0 include \
  --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64
# CUTLASS and CuTe (BSD-3).
fetch_headers cutlass-4.2.0.0 nvidia-cutlass==4.2.0.0 nvidia_cutlass-4.2.0.0-py3-none-any.whl \
  f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6 cutlass_library/source/include
