#!/usr/bin/env python3
"""Per-source-line totals of ncu's per-instruction counters (scripts/ncu_source.py's CSV), through
the line table of a -lineinfo build of the same code (the SASS is the same with or without
-lineinfo, so the instruction offsets line up).

  ncu_source_lines.py COUNTERS.csv LINES.sass KERNEL [--top N] [--metric NAME]

LINES.sass is `nvdisasm -gi -c` of the -lineinfo cubin (scripts/sass_lines.sh makes it);
KERNEL a substring of the kernel's demangled name in both (ncu's in the CSV, c++filt's of the
SASS), naming one instantiation, e.g. 'gdn_output<__nv_bfloat16, 128, 128>'. Prints the source lines (innermost
location, inlined calls resolved) with the most of --metric (default: instructions executed),
each with its share and the other counters there.
"""
import argparse
import collections
import csv
import re
import sys

from sass_counts import INSTR as INSTRUCTION, demangle  # this folder's SASS reader

LOCATION = re.compile(r'\s*//## File "([^"]+)", line (\d+)')


def line_table(path, kernel):
    """offset -> (file, line) for the first function of the SASS whose name contains kernel."""
    with open(path) as f:
        text = f.read()
    sections = re.split(r"\n\s*\.section\s+\.text\.", text)
    for section in sections[1:]:
        name = demangle(section.split(",", 1)[0].strip())
        if kernel not in name:
            continue
        table, where, fresh = {}, None, True
        for row in section.split("\n"):
            m = LOCATION.match(row)
            if m:
                if fresh:  # the first location of a group is the innermost (inlined) one
                    where = (m.group(1).split("/")[-1], int(m.group(2)))
                fresh = False
                continue
            m = INSTRUCTION.match(row)
            if m:
                fresh = True
                table[int(m.group(1), 16)] = where
        return name, table
    sys.exit(f"ncu_source_lines: no function of {path} contains {kernel!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("counters")
    ap.add_argument("sass")
    ap.add_argument("kernel")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--metric", default="inst_executed")
    a = ap.parse_args()
    name, table = line_table(a.sass, a.kernel)
    rows = []
    with open(a.counters, newline="") as f:
        for r in csv.DictReader(f):
            if a.kernel in r["kernel"] and r["value"] not in ("", None):
                rows.append((int(r["address"]), r["metric"], float(r["value"])))
    if not rows:
        sys.exit(f"ncu_source_lines: no counters of a kernel containing {a.kernel!r} in {a.counters}")
    base = min(address for address, _, _ in rows)
    per_line = collections.defaultdict(collections.Counter)
    unmatched = 0
    for address, metric, value in rows:
        where = table.get(address - base)
        if where is None:
            unmatched += 1
            continue
        per_line[where][metric] += value
    metrics = sorted({m for _, m, _ in rows})
    chosen = a.metric if a.metric in metrics else next((m for m in metrics if a.metric in m), None)
    if chosen is None:
        sys.exit(f"ncu_source_lines: no metric {a.metric!r}; the CSV has: {', '.join(metrics)}")
    total = sum(c[chosen] for c in per_line.values()) or 1.0
    print(f"{name}: {chosen} {total:.0f} in all, {len(per_line)} source lines"
          + (f", {unmatched} counters at offsets the SASS lacks (another build?)" if unmatched else ""))
    for (file, line), c in sorted(per_line.items(), key=lambda kv: -kv[1][chosen])[: a.top]:
        others = ", ".join(f"{m} {v:.0f}" for m, v in c.most_common(4) if m != chosen and v)
        print(f"  {100 * c[chosen] / total:5.1f}%  {file}:{line}  {c[chosen]:.0f}  {others}")


if __name__ == "__main__":
    main()
