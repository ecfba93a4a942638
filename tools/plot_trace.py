#!/usr/bin/env python3
"""Draws one replay of an `eagle train --trace` file (trace-event JSON) as a timeline: a lane
per worker thread (CPU) or stream (GPU), each node a bar coloured by its scope (block0, block1,
..., backward, optimizer), and beside it the share of the step each scope took.
Usage: plot_trace.py TRACE.json OUT.png [LAUNCH]   (LAUNCH: the replay to draw, default the last)"""
import json
import sys


def load_events(path):
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X"]


def replay(events, launch=None):
    """The complete events of one replay (the last when launch is None), their times made
    relative to its first event, in microseconds."""
    launches = sorted({e["args"]["launch"] for e in events})
    if not launches:
        raise ValueError("the trace holds no complete ('X') events")
    pick = launches[-1] if launch is None else launch
    if pick not in launches:
        raise ValueError(f"launch {pick} is not in the trace (it has {launches[0]}..{launches[-1]})")
    chosen = [e for e in events if e["args"]["launch"] == pick]
    t0 = min(e["ts"] for e in chosen)
    return pick, [dict(e, ts=e["ts"] - t0) for e in chosen]


def scope_of(event):
    """The outermost scope (block0, backward, ...): what a bar's colour says."""
    return (event["args"].get("scope") or "(outside scopes)").split("/")[0]


def name_of(event):
    """A node's name on the plot: the innermost scope below the outermost (a derivative's
    "d(l0.attention)") before its label."""
    scopes = (event["args"].get("scope") or "").split("/")
    return scopes[-1] if len(scopes) > 1 else event["name"]


def scope_totals(events):
    """Busy time per scope (us), summed over lanes, in order of first appearance."""
    totals = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        totals[scope_of(e)] = totals.get(scope_of(e), 0.0) + e["dur"]
    return totals


def main(trace, out, launch=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pick, events = replay(load_events(trace), launch)
    totals = scope_totals(events)
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(totals)}
    lanes = sorted({(e["pid"], e["tid"]) for e in events},
                   key=lambda lane: (str(lane[0]), lane[1]))  # lane 2 before lane 10
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    fig, (ax, share) = plt.subplots(1, 2, figsize=(11, 2.4 + 0.45 * len(lanes)),
                                    gridspec_kw={"width_ratios": [4, 1]})
    end = max(e["ts"] + e["dur"] for e in events) / 1e3
    for e in events:
        y = lane_of[(e["pid"], e["tid"])]
        ax.barh(y, e["dur"] / 1e3, left=e["ts"] / 1e3, height=0.8, color=colours[scope_of(e)],
                edgecolor="black", linewidth=0.2)
    ax.set_yticks(range(len(lanes)), [f"{p} / {t}" for p, t in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the replay's first node (ms)")
    ax.set_title(f"{trace.split('/')[-1]}: replay {pick}, {len(events)} nodes, {end:.2f} ms",
                 fontsize=9)
    # The longest nodes by name (the right panel is the colour key).
    for e in sorted(events, key=lambda e: -e["dur"])[:5]:
        y = lane_of[(e["pid"], e["tid"])]
        ax.text((e["ts"] + e["dur"] / 2) / 1e3, y, name_of(e), ha="center", va="center",
                fontsize=6, rotation=90 if e["dur"] / 1e3 < 0.06 * end else 0)
    busy = sum(totals.values())
    names = list(totals)
    share.barh(range(len(names)), [100 * totals[s] / busy for s in names],
               color=[colours[s] for s in names])
    share.set_yticks(range(len(names)), names, fontsize=7)
    share.invert_yaxis()
    share.set_xlabel("share of busy time (%)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return pick, totals


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else None)
