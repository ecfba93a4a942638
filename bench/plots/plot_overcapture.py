#!/usr/bin/env python3
"""Plots eagle_bench section 13b (over-capture) from its log: for each sweep, the replay time of
the graph captured for the capacity over the graph captured for the exact batch, per engine
(eagle native flat and persistent, eagle's cuDNN backend, torch varlen_attn with max_seqlen = T).
Reads the log's "csv,overcapture,SWEEP,X,ENGINE,RATIO" lines; writes one PNG.

    python3 bench/plots/plot_overcapture.py LOG [OUT.png]
"""
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {
    "a": "(a) T = L = 8192, N = 256: M sequences",
    "b": "(b) T = 16384, N = 256, M = 64: L active tokens",
    "c": "(c) 128-token sequences, T = 16384, N = 128: M = L / 128",
}


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = sys.argv[2] if len(sys.argv) > 2 else "bench/plots/overcapture.png"
    data = defaultdict(lambda: defaultdict(list))  # sweep -> engine -> [(x, ratio)]
    order = defaultdict(list)  # sweep -> x labels in log order
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.startswith("csv,overcapture,"):
                continue
            _, _, sweep, x, engine, ratio = line.strip().split(",")
            data[sweep][engine].append((x, float(ratio)))
            if x not in order[sweep]:
                order[sweep].append(x)
    sweeps = sorted(data)
    if not sweeps:
        print("no csv,overcapture lines in", sys.argv[1])
        return 1
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5.5 * len(sweeps), 4.2), squeeze=False)
    for ax, sweep in zip(axes[0], sweeps):
        xs = order[sweep]
        for engine, points in sorted(data[sweep].items()):
            pos = [xs.index(x) for x, _ in points]
            ax.plot(pos, [r for _, r in points], marker="o", label=engine)
        ax.axhline(1.10, color="grey", linestyle="--", linewidth=1, label="goal 1.10")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs)
        ax.set_yscale("log")
        ax.set_ylabel("worst-case graph / exact graph (replay time)")
        ax.set_title(TITLES.get(sweep, sweep), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Over-capture: forward+backward varlen attention, H200, bf16, H=32, D=128, causal")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
