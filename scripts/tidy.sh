#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) over eagle's C++ sources, in parallel, on a CPU-only
# configuration (CUDA sources are nvcc's; their host code is built with the same warnings).
# Exits non-zero on the first file with a finding. Usage: scripts/tidy.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
dir=${1:-build-tidy}
cmake -S . -B "$dir" -DEAGLE_CUDA=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DEAGLE_BUILD_TESTS=OFF >/dev/null
# clang-tidy reads g++'s flags from the compile commands; it does not know g++-only warnings.
files=$(git ls-files 'src/*.cpp' 'tools/*.cpp' 2>/dev/null || find src tools -name '*.cpp')
echo "clang-tidy: $(wc -w <<<"$files") files on $jobs jobs"
xargs -P "$jobs" -n 4 clang-tidy -p "$dir" --quiet --extra-arg=-Wno-unknown-warning-option \
  <<<"$files" 2>/dev/null
echo "clang-tidy: clean"
