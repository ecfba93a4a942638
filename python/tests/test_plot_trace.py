"""tools/plot_trace.py: one replay picked out of a trace, scopes and names as drawn, the PNG."""

import importlib.util
import json
import pathlib

import pytest

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "plot_trace.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("plot_trace", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(name, scope, launch, ts, dur, tid=0):
    return {"name": name, "cat": name, "ph": "X", "pid": "step", "tid": tid, "ts": ts, "dur": dur,
            "args": {"node": 0, "scope": scope, "launch": launch}}


@pytest.fixture
def trace(tmp_path):
    events = [event("embed", "", 0, 0.0, 5.0), event("mm", "block0", 0, 5.0, 10.0),
              event("embed", "", 1, 100.0, 4.0), event("mm", "block0", 1, 104.0, 8.0),
              event("backward.0", "backward/d(l0.mm)", 1, 112.0, 20.0),
              event("adamw", "optimizer", 1, 132.0, 2.0, tid=1),
              {"name": "process_name", "ph": "M", "pid": "step", "args": {"name": "x"}}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_the_last_replay_is_picked_and_made_relative(trace):
    tool = load_tool()
    events = tool.load_events(str(trace))
    assert len(events) == 6  # the metadata event is not a node
    pick, chosen = tool.replay(events)
    assert pick == 1 and len(chosen) == 4
    assert min(e["ts"] for e in chosen) == 0.0 and max(e["ts"] for e in chosen) == 32.0
    assert tool.replay(events, 0)[0] == 0
    with pytest.raises(ValueError, match="launch 7 is not in the trace"):
        tool.replay(events, 7)


def test_scopes_colour_by_the_outermost_and_name_by_the_innermost(trace):
    tool = load_tool()
    _, chosen = tool.replay(tool.load_events(str(trace)))
    totals = tool.scope_totals(chosen)
    assert totals == {"(outside scopes)": 4.0, "block0": 8.0, "backward": 20.0, "optimizer": 2.0}
    names = [tool.name_of(e) for e in chosen]
    assert names == ["embed", "mm", "d(l0.mm)", "adamw"]


def test_it_draws_a_png(trace, tmp_path):
    pytest.importorskip("matplotlib")
    tool = load_tool()
    out = tmp_path / "trace.png"
    pick, _ = tool.main(str(trace), str(out))
    assert pick == 1 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
