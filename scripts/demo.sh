#!/usr/bin/env bash
# The main job: builds eagle and runs `eagle demo` (on the GPU when one is present, else the
# CPU). Extra arguments go to the demo, e.g. scripts/demo.sh --device cpu --size 512.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
. scripts/env.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target eagle_cli >/dev/null
build/tools/eagle demo "$@"
