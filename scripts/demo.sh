#!/usr/bin/env bash
# The main job: builds eagle and runs `eagle train` (on the GPU when one is present, else the
# CPU): a small model trained on packed batches of real documents, each step one recorded graph.
# Extra arguments go to it, e.g. scripts/demo.sh --device cpu --steps 50. (`build/tools/eagle
# demo` is the heat-equation demo.)
# Says what it is doing and shows the build's progress; prints nothing of the build when
# everything is already built.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh  # prints only when it installs something
. scripts/env.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -f build/CMakeCache.txt ]; then
  echo "demo.sh: configuring the build in build/ (the CUDA backend is built when nvcc is found)"
fi
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
# Build progress ("[ 42%] Building ...") and any error are shown; "Built target" lines, all a
# finished build prints, are not.
cmake --build build -j"$jobs" --target eagle_cli 2>&1 | awk -v jobs="$jobs" '
  /Built target|Scanning dependencies|Consolidate compiler generated/ { next }
  !started { print "demo.sh: building eagle and the training job on " jobs " cores (a few minutes the first time, longer with CUDA)"; started = 1 }
  { print "  " $0; fflush() }
  END { if (started) print "demo.sh: built" }'
build/tools/eagle train "$@"
