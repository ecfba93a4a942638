#!/usr/bin/env python3
"""Sums an ncu --csv run's gpu__time_duration per kernel name and prints the heaviest kernels.

Usage: ncu_summary.py NCU.csv [--top N] [--skip N]: --skip drops the first N launches (set-up,
the graph's first replay). Reads what `ncu --metrics gpu__time_duration.sum --csv` prints.
"""
import argparse
import collections
import csv
import sys

UNITS_MS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
            "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=28)
    p.add_argument("--skip", type=int, default=0)
    a = p.parse_args()
    with open(a.csv, errors="replace") as f:
        rows = [line for line in f if line.startswith('"')]
    total, count = collections.Counter(), collections.Counter()
    launches = 0
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        launches += 1
        if launches <= a.skip:
            continue
        value = float(r["Metric Value"].replace(",", "")) * UNITS_MS.get(r["Metric Unit"], 1.0)
        name = r["Kernel Name"][:110]
        total[name] += value
        count[name] += 1
    if not total:
        print(f"no gpu__time_duration rows in {a.csv}", file=sys.stderr)
        return 1
    print(f"total {sum(total.values()):.3f} ms over {sum(count.values())} launches "
          f"(first {a.skip} skipped)")
    for name, ms in total.most_common(a.top):
        print(f"{ms:9.3f} ms {count[name]:5d}x  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
