#!/usr/bin/env bash
# Runs on the GPU machine over the binaries packed by device_pack.sh: every test (the CUDA half
# included), compute-sanitizer memcheck over the CUDA tests, the demo, and the benchmarks.
# Logs go to $OUT. Usage (from the repo root there): .carry/device_run.sh
set -uo pipefail
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
./eagle devices | tee "$out/devices.txt"
./eagle_tests --gtest_brief=1 2>&1 | tee "$out/tests.txt" | tail -40
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --leak-check full ./eagle_tests --gtest_brief=1 \
    --gtest_filter='*cuda*:*Gpu*:*Cuda*' > "$out/memcheck.txt" 2>&1
  tail -5 "$out/memcheck.txt"
fi
./eagle demo 2>&1 | tee "$out/demo.txt"
./eagle demo --size 1024 --steps 100 2>&1 | tee -a "$out/demo.txt"
./eagle_bench 2>&1 | tee "$out/bench.txt" | tail -60
