#!/usr/bin/env python3
"""Plots bench 14a's forward times per knob point from an eagle_bench log ("kda T32768 N8 prepare 1
fwd vs fla: eagle 5.660 ms" lines), one group of bars per rule and shape, with fla's time as a
line where given (--fla RULE:SHAPE=MS, e.g. kda:T32768N8=3.99, measured in an earlier run: the
plot says so). Writes one PNG.

    python3 bench/plots/plot_linear_knobs.py LOG OUT.png [--fla kda:T32768N8=3.99 ...]
"""
import argparse
import re
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"^\s*(kda|gdn) (T\d+ N\d+)( .*?)? fwd vs fla: eagle\s+([\d.]+) (ms|us)")


def read(log):
    times = defaultdict(dict)  # (rule, shape) -> knob label -> ms
    for line in open(log, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        rule, shape, knobs, value, unit = m.groups()
        ms = float(value) / (1000 if unit == "us" else 1)
        times[(rule, shape)][(knobs or "").strip() or "default"] = ms
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument("--fla", action="append", default=[], help="RULE:SHAPE=MS (SHAPE without spaces)")
    p.add_argument("--title", default="Linear-attention forward per knob point, H200, bf16, "
                   "H=32, K=V=128 (bench 14a)")
    a = p.parse_args()
    times = read(a.log)
    fla = {}
    for item in a.fla:
        key, ms = item.split("=")
        rule, shape = key.split(":")
        fla[(rule, shape)] = float(ms)
    groups = sorted(times, key=lambda k: (k[0], -int(k[1].split()[0][1:]), k[1]))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 4.2), squeeze=False)
    for ax, key in zip(axes[0], groups):
        labels = list(times[key])
        values = [times[key][k] for k in labels]
        ax.bar(range(len(values)), values, color="#4c72b0")
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
        ax.set_title(f"{key[0]} {key[1]}", fontsize=9)
        ax.set_ylabel("ms per forward" if key == groups[0] else "")
        f = fla.get((key[0], key[1].replace(" ", "")))
        if f is not None:
            ax.axhline(f, color="#c44e52", linestyle="--", linewidth=1)
            ax.text(-0.45, f, f"fla {f:.2f} (earlier run)", color="#c44e52", ha="left",
                    va="bottom", fontsize=7, bbox={"facecolor": "white", "edgecolor": "none",
                                                   "pad": 1})
    fig.suptitle(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
