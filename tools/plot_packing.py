#!/usr/bin/env python3
"""Plots `eagle pack`'s CSV: mean fill (%) against the token budget T, one line per candidate
buffer size B, like the packing-efficiency figure of shared/seeds/ragged-cuda-graphs.txt.
Usage: plot_packing.py TABLE.csv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(table, out):
    rows = list(csv.DictReader(open(table)))
    by_b = {}
    for r in rows:
        by_b.setdefault(int(r["lookahead"]), []).append((int(r["tokens"]), 100 * float(r["mean_fill"])))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for b, points in sorted(by_b.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"B = {b}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("token budget T")
    ax.set_ylabel("mean fill (%)")
    ax.set_title("packing efficiency by candidate-buffer size")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
