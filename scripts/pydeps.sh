#!/usr/bin/env bash
# Makes .venv/ (ignored by git) with the pinned Python packages eagle's bindings are built and
# tested with: nanobind and scikit-build-core (the build), numpy and pytest (the tests). Idempotent:
# quiet and offline when everything is there. Prints the interpreter's path last.
# Usage: scripts/pydeps.sh [base interpreter [venv folder]] (default python3, .venv); e.g.
# `scripts/pydeps.sh python3.12 .venv312` for an extension that loads in a Python 3.12 elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-python3}
venv=${2:-.venv}
pins=(nanobind==3.1.0 scikit-build-core==1.1.2 numpy==2.4.6 pytest==9.2.0)
stamp=$venv/.eagle-pins
if [ ! -x "$venv/bin/python" ]; then
  if ! "$base" -m venv --help >/dev/null 2>&1 || ! "$base" -c 'import ensurepip' 2>/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "eagle: installing python3-venv" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv python3-dev >/dev/null
  fi
  echo "eagle: making $venv" >&2
  "$base" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  echo "eagle: installing ${pins[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" >"$stamp"
fi
echo "$PWD/$venv/bin/python"
