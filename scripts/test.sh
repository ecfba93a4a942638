#!/usr/bin/env bash
# Builds eagle and passes every test: the clang-format, layer, README and clang-tidy checks, the
# full build (CUDA when nvcc is found; GPU tests skip without a GPU) with its tests, examples and the
# installed-package test, the CPU build under AddressSanitizer + UndefinedBehaviorSanitizer with
# its tests and examples, and a CPU demo run. Ends with what ran, passed and was skipped, and why.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
scripts/deps.sh
. scripts/env.sh
echo "== Python environment (.venv)"
python=$(scripts/pydeps.sh)

summary=()  # one line per check and build, printed at the end
failures=0
total_passed=0 total_failed=0 total_skipped=0

# failed_output <LastTest.log> <test name>: the tail of that test's output in a ctest log.
failed_output() {
  awk -v name="$2" '{ line = $0 } sub(/^[0-9]+\/[0-9]+ Test: /, "", line) && line == name { on = 1; next }
                    on == 1 && /^Output:/ { on = 2; getline; next }
                    on == 2 && /^<end of output>/ { exit } on == 2' "$1" |
    tail -n 40 | sed 's/^/    | /'
}

# run_ctest <build dir> <label>: runs every test of a build; prints the output of failures only,
# then ran / passed / failed / skipped, with the skip reasons GoogleTest printed, grouped. A test
# that fails is run once more on its own: the summary shows the first failure's output either
# way, and a test that passes the second time is reported as flaky rather than failed.
run_ctest() {
  local dir=$1 label=$2 log=$1/ctest-output.log rc=0
  (cd "$dir" && ctest --output-on-failure -j"$jobs") >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$log"
  else
    grep -E '^[0-9]+% tests passed|^Total Test time' "$log" || true
  fi
  local ran failed skipped
  ran=$(sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' "$log" | tail -1)
  local testlog=$dir/Testing/Temporary/LastTest.log notes=()
  if [ "$rc" -ne 0 ] && [ -s "$dir/Testing/Temporary/LastTestsFailed.log" ]; then
    local names=() name
    cp "$testlog" "$dir/ctest-first-run.log"
    testlog=$dir/ctest-first-run.log
    while IFS= read -r name; do names+=("${name#*:}"); done <"$dir/Testing/Temporary/LastTestsFailed.log"
    for name in "${names[@]}"; do
      notes+=("  $name failed; the end of its output:" "$(failed_output "$testlog" "$name")")
    done
    echo "== $label: the failed tests once more"
    if (cd "$dir" && ctest --rerun-failed --output-on-failure); then
      notes+=("  flaky (failed, then passed when rerun alone): ${names[*]}")
      rc=0 failed=0
    fi
  fi
  skipped=$(grep -c '(Skipped)$' "$log" || true)
  ran=${ran:-0} failed=${failed:-0}
  local passed=$((ran - failed - skipped))
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  summary+=("$label: $ran tests ran, $passed passed, $failed failed, $skipped skipped" "${notes[@]}")
  # GoogleTest prints "<file>:<line>: Skipped" and then the reason on the next line.
  local reasons
  reasons=$(awk '/: Skipped$/ { getline reason; if (reason == "") reason = "(no reason given)";
                                count[reason]++ }
                 END { for (r in count) printf "%6d  %s\n", count[r], r }' \
    "$testlog" 2>/dev/null | sort -rn || true)
  [ -n "$reasons" ] && summary+=("  skipped, by reason:" "$reasons")
  return "$rc"
}

echo "== format"
files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' 2>/dev/null || find include src tests tools bench examples -name '*.[ch]pp' -o -name '*.cu' -o -name '*.h')
clang-format --dry-run --Werror $files
summary+=("format: every C++ file is clang-formatted")

echo "== layers and README"
scripts/check_layers.sh
scripts/check_readme.sh
summary+=("layers: each layer includes only the layers below it" "README: every C++ block is an excerpt of a compiled example")

echo "== clang-tidy"
scripts/tidy.sh
summary+=("clang-tidy: the checks of .clang-tidy pass over src/ and tools/")

echo "== build and test (release)"
cuda=$(cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEAGLE_PYTHON=ON -DPython_EXECUTABLE="$python" |
  sed -n 's/.*eagle: CUDA backend //p')
cmake --build build -j"$jobs"
run_ctest build "release build (CUDA backend ${cuda:-?})" || failures=1

# run_pytest <label> [env...]: the Python tests, from outside the repository so `import eagle` is
# the package under test (the build tree's, or the installed one).
run_pytest() {
  local label=$1 log rc=0
  shift
  log=$(mktemp)
  (cd /tmp && env "$@" "$python" -m pytest -q -rs "$repo/python/tests") >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then cat "$log"; else tail -n 3 "$log"; fi
  local passed failed skipped
  passed=$(grep -oE '[0-9]+ passed' "$log" | tail -1 | cut -d' ' -f1)
  failed=$(grep -oE '[0-9]+ failed' "$log" | tail -1 | cut -d' ' -f1)
  skipped=$(grep -oE '[0-9]+ skipped' "$log" | tail -1 | cut -d' ' -f1)
  passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  summary+=("$label: $passed passed, $failed failed, $skipped skipped")
  local reasons
  reasons=$(grep -E '^SKIPPED' "$log" | sed -E 's/^SKIPPED \[[0-9]+\] [^:]+:[0-9]+: /        /' | sort | uniq -c || true)
  [ -n "$reasons" ] && summary+=("  skipped, by reason:" "$reasons")
  rm -f "$log"
  return "$rc"
}

echo "== Python tests (the release build's extension, build/python)"
run_pytest "Python tests, build tree" PYTHONPATH="$PWD/build/python" \
  EAGLE_TEST_KERNELS="$PWD/build/python/libeagle_py_test_kernels.so" || failures=1

echo "== pip install . (CPU build) and the Python tests against the installed package"
EAGLE_CUDA=OFF "$python" -m pip install --quiet --no-build-isolation --disable-pip-version-check .
run_pytest "Python tests, pip-installed package" || failures=1

echo "== build and test (CPU, ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEAGLE_CUDA=OFF -DEAGLE_SANITIZE=ON \
  -DEAGLE_BUILD_TOOLS=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 run_ctest build-asan "CPU build under ASan + UBSan" || failures=1

echo "== demo smoke run (CPU)"
build/tools/eagle demo --device cpu --size 64 --steps 10 --repeats 2
summary+=("demo: the CPU run's eager and graph results agree")
echo "== training job smoke run (CPU)"
build/tools/eagle train --device cpu --steps 10
summary+=("train: ten CPU training steps, one graph launch each")

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "all: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$failures"
