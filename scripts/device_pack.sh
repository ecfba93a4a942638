#!/usr/bin/env bash
# Builds the release binaries here and packs what a GPU machine needs to run them into .carry/
# (ignored by git): the test, demo and bench programs, libeagle, the TBB runtime, the synccheck
# reproducer, the Python package with its extension (for the GPU machine's Python 3.12, when a
# python3.12 is here), scripts/device_run.sh and the fla wheels (the linear-attention peer).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
python_args=() python_targets=()
# A Python 3.12 that runs (a pyenv shim may name one that is not active): the GPU machine's.
base312=""
for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
  if "$candidate" -c 'import sys' >/dev/null 2>&1; then
    base312=$candidate
    break
  fi
done
if [ -n "$base312" ]; then
  py312=$(scripts/pydeps.sh "$base312" .venv312)
  python_args=(-DEAGLE_PYTHON=ON -DPython_EXECUTABLE="$py312")
  python_targets=(_eagle _eagle_stub eagle_py_test_kernels)
else
  echo "device_pack: no python3.12 here: the Python package is not packed"
fi
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${python_args[@]}" >/dev/null
example_targets=$(grep -oE '[a-z_]+\.(cpp|cu)' examples/CMakeLists.txt | sed -E 's/\.(cpp|cu)$//; s/^/example_/')
cmake --build build-device -j"$jobs" --target eagle_tests eagle_cli eagle_bench eagle_bench_cudnn eagle_repro_synccheck \
  $example_targets "${python_targets[@]}"
rm -rf .carry && mkdir -p .carry
if [ ${#python_targets[@]} -gt 0 ]; then
  mkdir -p .carry/python
  cp -rL build-device/python/eagle .carry/python/
  rm -rf .carry/python/eagle/__pycache__
  cp build-device/python/libeagle_py_test_kernels.so .carry/python/
fi
cp build-device/tests/eagle_tests build-device/tools/eagle build-device/bench/eagle_bench build-device/bench/eagle_bench_cudnn \
  build-device/tests/eagle_repro_synccheck .carry/
cp -L build-device/libeagle.so.0 .carry/
mkdir -p .carry/examples
for t in $example_targets; do cp "build-device/examples/${t#example_}" .carry/examples/; done
cp -L /usr/lib/x86_64-linux-gnu/libtbb.so.12 .carry/
cp scripts/device_run.sh .carry/
# fla 0.6, the linear-attention peer (pure Python over the GPU machine's Triton), for
# device_run.sh's splits part; the set-up goes on without it (then no fla ratios).
python3 -m pip download -q --no-deps -d .carry/wheels fla-core==0.6.0 \
  flash-linear-attention==0.6.0 einops==0.8.2 >/dev/null 2>&1 ||
  echo "device_pack: the fla wheels could not be downloaded: no fla peer on the GPU machine"
# Symbols the GPU machine does not need: the carry is limited to 64 MiB with the working tree.
find .carry -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.sh' ! -name '*.py' \
  -exec strip --strip-unneeded {} + 2>/dev/null || true
du -sh .carry
