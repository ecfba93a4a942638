#!/usr/bin/env bash
# Builds the release binaries here and packs what a GPU machine needs to run them into .carry/
# (ignored by git): the test, demo and bench programs and the TBB runtime they link.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-device -j"$jobs" --target eagle_tests eagle_cli eagle_bench
rm -rf .carry && mkdir -p .carry
cp build-device/tests/eagle_tests build-device/tools/eagle build-device/bench/eagle_bench .carry/
cp -L /usr/lib/x86_64-linux-gnu/libtbb.so.12 .carry/
cp scripts/device_run.sh .carry/
du -sh .carry
