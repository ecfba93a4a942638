#!/usr/bin/env bash
# Checks that each layer includes only its own headers and those of the layers it may use
# (docs/ARCHITECTURE.md): the include-level half of "a layer uses only the layers below it"
# (CMake's per-layer object libraries are the link-level half). Prints each violation.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [core]="core util"
  [util]="core util"
  [kernel]="core util kernel"
  [graph]="core util kernel graph"
  [exec]="core util kernel graph exec"
  [diff]="core util kernel graph exec diff"
  [op]="core util op"
  [plan]="core util kernel op plan"
  # engines records with graph: a planned kernel's derivative records its backward's calls.
  [engines]="core util kernel graph op plan engines"
  [ragged]="core util kernel graph ragged"
  [data]="core util data"
  [comm]="core util kernel comm"
)
bad=0
for layer in "${!allowed[@]}"; do
  for dir in "src/$layer" "include/eagle/$layer"; do
    [ -d "$dir" ] || continue
    while IFS= read -r line; do
      file=${line%%:*}
      inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
      target=${inc#eagle/}
      target=${target%%/*}
      # The ragged layer's foundation (capacity bounds, schedules and their block-wide scan: core
      # and kernel only) serves the engines' ragged kernels too.
      if [[ $layer == engines && ( $inc == eagle/ragged/capacity.hpp || $inc == eagle/ragged/schedule.hpp ||
            $inc == ragged/block_schedule.cuh ) ]]; then
        continue
      fi
      # comm opens NCCL, and exec CUPTI (GPU traces), with the engines' loader, which depends on
      # nothing of eagle's.
      if [[ ( $layer == comm || $layer == exec ) && $inc == engines/loader/dynamic_library.hpp ]]; then
        continue
      fi
      case " ${allowed[$layer]} " in
        *" $target "*) ;;
        *)
          # Headers outside eagle's layers (a sibling of the file, a third-party header) pass.
          if [[ " core util kernel graph exec diff op plan engines ragged data comm " == *" $target "* ]]; then
            echo "layer violation: $file ($layer) includes \"$inc\" ($target)"
            bad=1
          fi
          ;;
      esac
    done < <(grep -rHE '^#include "' "$dir" || true)
  done
done
if [ "$bad" -ne 0 ]; then
  echo "check_layers: a layer includes a layer above it (see docs/ARCHITECTURE.md)"
  exit 1
fi
echo "check_layers: every layer includes only the layers below it"
