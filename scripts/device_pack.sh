#!/usr/bin/env bash
# Builds the release binaries here and packs what a GPU machine needs to run them into .carry/
# (ignored by git): the test, demo and bench programs, libeagle, the TBB runtime, the synccheck
# reproducer and scripts/device_run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
example_targets=$(grep -oE '[a-z_]+\.(cpp|cu)' examples/CMakeLists.txt | sed -E 's/\.(cpp|cu)$//; s/^/example_/')
cmake --build build-device -j"$jobs" --target eagle_tests eagle_cli eagle_bench eagle_bench_cudnn eagle_repro_synccheck \
  $example_targets
rm -rf .carry && mkdir -p .carry
cp build-device/tests/eagle_tests build-device/tools/eagle build-device/bench/eagle_bench build-device/bench/eagle_bench_cudnn \
  build-device/tests/eagle_repro_synccheck .carry/
cp -L build-device/libeagle.so.0 .carry/
mkdir -p .carry/examples
for t in $example_targets; do cp "build-device/examples/${t#example_}" .carry/examples/; done
cp -L /usr/lib/x86_64-linux-gnu/libtbb.so.12 .carry/
cp scripts/device_run.sh .carry/
du -sh .carry
