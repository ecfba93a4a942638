#!/usr/bin/env bash
# Installs eagle from a build tree into a fresh prefix, then builds and runs a consumer project
# that uses find_package(eagle). Usage: run.sh <eagle build dir> <scratch dir>
set -euo pipefail
build=$1
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$here" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_TBB=ON >/dev/null
cmake --build "$scratch/consumer" -j2 >/dev/null
"$scratch/consumer/consumer"
