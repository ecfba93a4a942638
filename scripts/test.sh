#!/usr/bin/env bash
# Builds eagle and passes every test: the full build (CUDA when nvcc is found; GPU tests skip
# without a GPU), the CPU build under AddressSanitizer + UndefinedBehaviorSanitizer, the
# installed-package test, and the clang-format check.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
. scripts/env.sh

echo "== format"
files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' 2>/dev/null || find include src tests tools bench -name '*.[ch]pp' -o -name '*.cu' -o -name '*.h')
clang-format --dry-run --Werror $files

echo "== build and test (release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== build and test (CPU, ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEAGLE_CUDA=OFF -DEAGLE_SANITIZE=ON \
  -DEAGLE_BUILD_TOOLS=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")

echo "== demo smoke run (CPU)"
build/tools/eagle demo --device cpu --size 64 --steps 10 --repeats 2
