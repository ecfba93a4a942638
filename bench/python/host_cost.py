"""Host cost of eagle's Python calls, beside the same work looped in C++, in one run.

- g(): a one-node graph (scale of one element); Python's `g()` against C++'s `g()` looped in
  C++ (goal: Python <= C++ + 1 us).
- A planned op's execute with arrays in the variant pack: a one-element pointwise multiply
  planned once, executed with torch tensors (when torch is there) and with eagle arrays (goal
  <= 5 us per call with torch tensors; cudnn-frontend's Python pygraph execute is ~20 us in the
  seed). On a GPU the work is issued, not waited for: calls are timed in bursts of 64 from a
  drained queue (as eagle_bench's C++ host costs), so that a full launch queue (the device's
  pace) does not stand in for the host's. Beside them, the same execute looped in C++ (imports
  included) and the issue alone (operands imported once), so the run splits the Python call's
  cost, the imports' and the engine's issue.

Usage: python bench/python/host_cost.py [--device cuda:0] [--calls 20000] [--repeats 7]
Prints one line per measurement and a JSON summary (for bench/RESULTS.md)."""

import argparse
import json
import statistics
import time

import eagle

K = eagle.kernels


def per_call_ns(fn, calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls


BURST = 64


def burst_call_ns(fn, calls, drain):
    """fn's time per call over bursts of BURST calls, each from a drained queue (drain() between
    bursts, untimed): the host's cost of issuing, not the device's pace."""
    total, done = 0, 0
    while done < calls:
        drain()
        start = time.perf_counter_ns()
        for _ in range(BURST):
            fn()
        total += time.perf_counter_ns() - start
        done += BURST
    drain()
    return total / done


def graph_calls(device, calls, repeats):
    x = eagle.full((1,), 1.0, eagle.f32, device)
    g = eagle.Graph.record(lambda r: r.result(K.scale(r.param("x", x), 1.0))).build()
    g(100)
    py, cpp = [], []
    for _ in range(repeats):
        py.append(per_call_ns(g, calls))
        cpp.append(eagle._eagle._bench_graph_calls(g._g, calls))
    return statistics.median(py), statistics.median(cpp)


def execute_calls(device, calls, repeats):
    og = eagle.op.Graph("mul")
    ta, tb = og.tensor("a", (1,)), og.tensor("b", (1,))
    ty = og.pointwise("mul", ta, tb).set_output(True)
    plans = eagle.plan(og, device)
    plans.build_plans()
    stream = eagle.Stream(device)
    arrays = {t: eagle.full((1,), 2.0, eagle.f32, device) for t in (ta, tb, ty)}
    results = {"eagle arrays": []}
    runs = {"eagle arrays": lambda: plans.execute(arrays, stream)}
    try:
        import torch

        dev = "cpu" if device.is_cpu else f"cuda:{device.ordinal}"
        tensors = {t: torch.full((1,), 2.0, device=dev) for t in (ta, tb, ty)}
        if not device.is_cpu:
            stream = eagle.Stream.borrow(device, torch.cuda.current_stream().cuda_stream)
        results["torch tensors"] = []
        runs["torch tensors"] = lambda: plans.execute(tensors, stream)
    except ImportError:
        pass
    # The same calls looped in C++: the whole execute() (imports included) and the issue alone
    # (operands imported once), to split the Python call's cost from the C++ path's.
    operands = {"eagle arrays": arrays, **({"torch tensors": tensors} if "torch tensors" in runs
                                           else {})}
    cpp = {}
    for name, ops in operands.items():
        cpp[f"{name}, execute() looped in C++"] = (
            lambda ops=ops: plans._bench_execute_calls(ops, stream, calls, True))
    cpp["the issue alone, looped in C++"] = (
        lambda: plans._bench_execute_calls(arrays, stream, calls, False))
    results.update({name: [] for name in cpp})
    for _ in range(repeats):
        for name, run in runs.items():
            results[name].append(burst_call_ns(run, calls, stream.synchronize))
        for name, run in cpp.items():
            results[name].append(run())
    return {name: statistics.median(v) for name, v in results.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda:0" if eagle.cuda_available() else "cpu")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    device = eagle.Device(a.device)
    py, cpp = graph_calls(device, a.calls, a.repeats)
    print(f"g() on {device}: Python {py:.0f} ns, C++ {cpp:.0f} ns, Python - C++ = {py - cpp:+.0f} ns"
          f" (goal <= +1000 ns)")
    ex = execute_calls(device, a.calls // 4, a.repeats)
    for name, ns in ex.items():
        goal = " (goal <= 5000 ns)" if name == "torch tensors" else ""
        print(f"plans.execute with {name} on {device}: {ns:.0f} ns per call{goal}")
    print(json.dumps({"device": str(device), "g_python_ns": py, "g_cpp_ns": cpp,
                      "execute_ns": ex}))


if __name__ == "__main__":
    main()
