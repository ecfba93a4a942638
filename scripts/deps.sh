#!/usr/bin/env bash
# Installs what eagle needs to build and test, from Debian's packages. Idempotent: installs
# only what is missing, and asks the package index nothing when nothing is missing.
set -euo pipefail
packages=(cmake g++ make libtbb-dev libgtest-dev clang-format clang-tidy)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "eagle: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
