#!/usr/bin/env python3
"""Plots eagle_bench's over-capture sweeps from its log: for each sweep, the replay time of the
graph captured for the capacity over the graph captured for the exact batch, per engine.
Section 13b (default, --tag overcapture): forward+backward varlen attention (eagle native flat
and persistent, eagle's cuDNN backend, torch varlen_attn with max_seqlen = T). Section 14b
(--tag linear_overcapture): the linear-attention forward (eagle's kda and gdn, fla's chunk_kda
use_graph). Reads the log's "csv,TAG,SWEEP,X,ENGINE,RATIO" lines; writes one PNG.

    python3 bench/plots/plot_overcapture.py LOG [OUT.png] [--tag linear_overcapture]
"""
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SUPTITLES = {
    "overcapture": "Over-capture: forward+backward varlen attention, H200, bf16, H=32, D=128, causal",
    "linear_overcapture": "Over-capture: linear attention forward, H200, bf16, H=32, K=V=128",
}
TITLES = {
    "a": "(a) T = L = 8192, N = 256: M sequences",
    "b": "(b) T = 16384, N = 256, M = 64: L active tokens",
    "c": "(c) 128-token sequences, T = 16384, N = 128: M = L / 128",
}


def main():
    args = sys.argv[1:]
    tag = "overcapture"
    if "--tag" in args:
        i = args.index("--tag")
        tag = args[i + 1]
        del args[i:i + 2]
    if not args:
        print(__doc__)
        return 2
    out = args[1] if len(args) > 1 else f"bench/plots/{tag}.png"
    data = defaultdict(lambda: defaultdict(list))  # sweep -> engine -> [(x, ratio)]
    order = defaultdict(list)  # sweep -> x labels in log order
    with open(args[0]) as f:
        for line in f:
            if not line.startswith(f"csv,{tag},"):
                continue
            _, _, sweep, x, engine, ratio = line.strip().split(",")
            data[sweep][engine].append((x, float(ratio)))
            if x not in order[sweep]:
                order[sweep].append(x)
    sweeps = sorted(data)
    if not sweeps:
        print(f"no csv,{tag} lines in", args[0])
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
    fig.suptitle(SUPTITLES.get(tag, tag))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
