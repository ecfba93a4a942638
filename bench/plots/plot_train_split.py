#!/usr/bin/env python3
"""Plots where the training step's kernel time goes, from scripts/ncu_summary.py logs of
`device_run.sh profile` (one stacked bar per log: ms per step by kernel family), with torch's
captured step measured in the same calls as a line when given. Writes one PNG.

    python3 bench/plots/plot_train_split.py OUT.png LABEL=LOG [LABEL=LOG ...] \
        [--steps 3] [--torch MS]
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW = re.compile(r"^\s*([\d.]+) ms\s+(\d+)x\s+(.*)$")
# Kernel families by name, first match wins.
FAMILIES = [
    ("fused pointwise", re.compile(r"fused_(vec_)?kernel")),
    ("GEMM (cuBLASLt)", re.compile(r"nvjet|gemm|cutlass", re.I)),
    ("AdamW", re.compile(r"adamw")),
    ("attention (cuDNN)", re.compile(r"sdpa|dot_do_o|convert_dq|qkv_tma|ragged_prep", re.I)),
    ("norms", re.compile(r"norm")),
    ("embedding", re.compile(r"embedding|bucket_|id_place|row_kernel|Sort")),
]


def split(log, steps):
    parts = {name: 0.0 for name, _ in FAMILIES}
    parts["other"] = 0.0
    for line in open(log, errors="replace"):
        m = ROW.match(line)
        if not m:
            continue
        ms, name = float(m.group(1)) / steps, m.group(3)
        family = next((f for f, rx in FAMILIES if rx.search(name)), "other")
        parts[family] += ms
    return parts


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("logs", nargs="+", help="LABEL=LOG")
    p.add_argument("--steps", type=int, default=3, help="steps the ncu run profiled")
    p.add_argument("--torch", type=float, help="torch graph's step (ms), same device")
    p.add_argument("--title", default="eagle train's step by kernel family (ncu, H100, "
                   "T 4096, dim 4096, bf16 projections)")
    a = p.parse_args()
    labels, splits = [], []
    for item in a.logs:
        label, log = item.split("=", 1)
        labels.append(label)
        splits.append(split(log, a.steps))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bottoms = [0.0] * len(labels)
    for family in list(splits[0]):
        values = [s[family] for s in splits]
        ax.bar(labels, values, bottom=bottoms, label=family)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    for x, total in enumerate(bottoms):
        ax.text(x, total + 0.3, f"{total:.1f} ms", ha="center")
    if a.torch:
        ax.axhline(a.torch, color="black", linestyle="--", linewidth=1)
        ax.text(len(labels) - 1, a.torch + 0.3, f"torch graph's step, wall: {a.torch:.1f} ms",
                ha="center")
    ax.set_ylabel("ms of kernels per step (ncu: serialized, caches flushed)")
    ax.set_title(a.title, fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
