#!/usr/bin/env python3
"""Per-instruction counters of an ncu report (--section SourceCounters), as CSV: one row per
SASS address of each profiled kernel with every source-correlated metric ncu kept there
(instructions executed, warp stall samples by reason, ...), and the instruction's text.

Usage (on the GPU machine, where ncu's Python report interface lives):
  ncu_source.py REPORT.ncu-rep OUT.csv

The addresses are offsets in the kernel's code, so the rows line up with `cuobjdump -sass` of
the same build (scripts/sass_counts.sh) and, through a -lineinfo build of the same flags, with
source lines. Finds ncu_report under the ncu in PATH (extras/python), or NCU_PYTHON.
"""
import csv
import glob
import os
import shutil
import sys


def import_ncu_report():
    places = [os.environ.get("NCU_PYTHON", "")]
    ncu = shutil.which("ncu")
    if ncu:
        root = os.path.dirname(os.path.realpath(ncu))
        places += [os.path.join(root, "extras", "python"), os.path.join(root, "..", "extras", "python")]
    places += glob.glob("/usr/local/cuda*/nsight-compute*/extras/python")
    places += glob.glob("/opt/nvidia/nsight-compute/*/extras/python")
    for place in places:
        if place and os.path.isfile(os.path.join(place, "ncu_report.py")):
            sys.path.insert(0, place)
            break
    import ncu_report  # noqa: E402 (found above)
    return ncu_report


def value(metric, i):
    for read in ("as_double", "as_uint64"):
        try:
            return getattr(metric, read)(i)
        except Exception:  # the instance's type decides which read works
            continue
    return ""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ncu_report = import_ncu_report()
    context = ncu_report.load_report(sys.argv[1])
    with open(sys.argv[2], "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["kernel", "address", "metric", "value", "sass"])
        for r in range(context.num_ranges()):
            rng = context.range_by_idx(r)
            for a in range(rng.num_actions()):
                action = rng.action_by_idx(a)
                kernel = action.name()
                base = None
                for name in sorted(action.metric_names()):
                    metric = action[name]
                    if not metric.has_correlation_ids():
                        continue
                    ids = metric.correlation_ids()
                    for i in range(metric.num_instances()):
                        pc = ids.as_uint64(i)
                        base = pc if base is None else min(base, pc)
                        try:
                            text = action.sass_by_pc(pc)
                        except Exception:
                            text = ""
                        out.writerow([kernel, pc, name, value(metric, i), text])
                print(f"{kernel}: code starts at {base:#x}" if base is not None else f"{kernel}: no source counters")


if __name__ == "__main__":
    main()
