"""A matmul with its pointwise node fused into one planned kernel, against the matmul and the
pointwise kernel planned apart, at the shapes of gradients.py's MLP (issue 12: the dim-512 step
spends about a quarter of its time in gelu and its backward).

Rows (bf16, a [T, dim] x [dim, dim] matmul, T 4096):
- matmul: the matmul alone (cuBLASLt's plan).
- gelu, gelu_backward: the pointwise kernel alone (eagle's pointwise engine).
- apart fwd: matmul then gelu, two planned kernels; fused fwd: one planned kernel of
  [matmul -> gelu] with the matmul's result an output too (the backward reads it).
- apart bwd: the backward's dx = dz W^T then gelu_backward(dx, z) of the layer below, two
  kernels; fused bwd: one planned kernel of [matmul -> gelu_backward].
- weight grad: dW = x^T g ([dim, T] x [T, dim], x^T a strided view), as planned (on a Hopper:
  native_gemm's split-K kernel).
Each row: a recorded eagle graph of --calls calls, its replay's wall time / calls (the median of
--repeats after a warm-up), the engine of each plan, and the fused kernel's largest difference
from the two kernels apart (relative to the largest magnitude).

Usage: python bench/python/epilogue.py [--dims 512,4096] [--tokens 4096] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import eagle

try:
    import torch
except ImportError:  # the CPU check of the script runs in f16 through numpy
    torch = None


DT = eagle.bf16  # the operands' dtype (--dtype)


def make(values, dtype, device):
    """float64 numpy values as an eagle array of `dtype` on `device`."""
    if dtype == eagle.bf16:
        v = torch.from_numpy(values).to(torch.bfloat16)
        return eagle.asarray(v.cuda() if device.is_cuda else v)
    return eagle.asarray(values.astype(np.float16), device=device)


def host(a):
    """An eagle array's values as float64 numpy."""
    if a.dtype == eagle.bf16:
        return torch.from_dlpack(a).double().cpu().numpy()
    return eagle.to_numpy(a).astype(np.float64)


def planned(graph):
    return eagle.planned_kernel(graph)


def matmul_graph(t, d, transposed_b=False, epilogue=None, keep_product=False):
    """[t, d] x [d, d] (b given as the transpose of a [d, d] row-major array when transposed_b),
    optionally followed by one pointwise node: ('gelu',) or ('gelu_backward', z)."""
    g = eagle.op.Graph("mm")
    a = g.tensor("a", (t, d), DT)
    b = g.tensor("b", (d, d), DT, strides=(1, d) if transposed_b else None)
    c = g.matmul(a, b)
    if epilogue is None:
        c.set_output(True).set_name("c")
        return g
    if keep_product:
        c.set_output(True).set_name("c")
    if epilogue == "gelu":
        out = g.pointwise("gelu", c)
    else:
        z = g.tensor("z", (t, d), DT)
        out = g.pointwise("gelu_backward", c, z)
    out.set_output(True).set_name("out")
    return g


def weight_grad_graph(t, d):
    """x^T g: [d, t] (the transpose of a row-major [t, d]) x [t, d]."""
    g = eagle.op.Graph("dw")
    a = g.tensor("a", (d, t), DT, strides=(1, d))
    g.matmul(a, g.tensor("b", (t, d), DT)).set_output(True).set_name("c")
    return g


def pointwise_graph(t, d, op):
    g = eagle.op.Graph(op)
    a = g.tensor("a", (t, d), DT)
    if op == "gelu":
        out = g.pointwise("gelu", a)
    else:
        out = g.pointwise("gelu_backward", a, g.tensor("z", (t, d), DT))
    out.set_output(True).set_name("out")
    return g


def engines_of(graph, device):
    plans = eagle.plan(graph, device)
    try:
        index = plans.build_plans()
    except Exception as e:  # noqa: BLE001 - reported
        return f"no plan: {e}"[:200]
    return plans.name_at(index)


def time_graph(g, calls, repeats):
    g(1)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        g(1)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dims", default="512,4096")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda:0", help="cpu: a check of the script, not a timing")
    p.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    p.add_argument("--json")
    args = p.parse_args()
    dev = eagle.Device(args.device)
    global DT
    DT = dt = eagle.bf16 if args.dtype == "bf16" else eagle.f16
    t = args.tokens
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        rng = np.random.default_rng(d)
        ex = make(rng.standard_normal((t, d)), dt, dev)
        ew = make(rng.standard_normal((d, d)) / d**0.5, dt, dev)
        ez = make(rng.standard_normal((t, d)), dt, dev)

        mm = planned(matmul_graph(t, d))
        mm_t = planned(matmul_graph(t, d, transposed_b=True))
        gelu = planned(pointwise_graph(t, d, "gelu"))
        gelu_bwd = planned(pointwise_graph(t, d, "gelu_backward"))
        fused_fwd = planned(matmul_graph(t, d, epilogue="gelu", keep_product=True))
        fused_bwd = planned(matmul_graph(t, d, transposed_b=True, epilogue="gelu_backward"))
        dw = planned(weight_grad_graph(t, d))
        # Each case from the recording's params (x, w, z); W^T is a strided view of w.
        cases = {
            "matmul": lambda x, w, z: mm(x, w),
            "gelu": lambda x, w, z: gelu(x),
            "gelu_backward": lambda x, w, z: gelu_bwd(x, z),
            "apart fwd": lambda x, w, z: gelu(mm(x, w)),
            "fused fwd": lambda x, w, z: fused_fwd(x, w),
            "apart bwd": lambda x, w, z: gelu_bwd(mm_t(x, w.transpose(0, 1)), z),
            "fused bwd": lambda x, w, z: fused_bwd(x, w.transpose(0, 1), z),
            "weight grad": lambda x, w, z: dw(x.transpose(0, 1), z),
        }
        graphs = {
            "matmul": matmul_graph(t, d),
            "gelu": pointwise_graph(t, d, "gelu"),
            "gelu_backward": pointwise_graph(t, d, "gelu_backward"),
            "fused fwd": matmul_graph(t, d, epilogue="gelu", keep_product=True),
            "fused bwd": matmul_graph(t, d, transposed_b=True, epilogue="gelu_backward"),
            "weight grad": weight_grad_graph(t, d),
        }
        outs = {}
        for name, one in cases.items():
            def step(r, one=one, name=name):
                x, w, z = r.param("x", ex), r.param("w", ew), r.param("z", ez)
                last = None
                for _ in range(args.calls):
                    last = one(x, w, z)
                r.result(list(last) if isinstance(last, tuple) else [last])
            row = {"dim": d, "tokens": t, "case": name,
                   "plan": engines_of(graphs[name], dev) if name in graphs else "(two kernels)"}
            try:
                g = eagle.Graph.record(step).build(dev)
                made = g()
                outs[name] = [host(a) for a in (made if isinstance(made, (list, tuple)) else [made])]
                row["us"] = time_graph(g, args.calls, args.repeats)
            except Exception as e:  # noqa: BLE001 - reported, the run goes on
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print(f"dim {d:5d} {name:14s} " + (f"{row['us']:8.2f} us" if "us" in row else row["error"])
                  + f"   [{row['plan']}]", flush=True)
        for fused, apart in (("fused fwd", "apart fwd"), ("fused bwd", "apart bwd")):
            if fused in outs and apart in outs:
                want, got = outs[apart][-1], outs[fused][-1]
                diff = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                print(f"dim {d:5d} {fused}: max rel diff vs apart {diff:.2e}", flush=True)
                rows.append({"dim": d, "case": fused + " diff", "max_rel_diff": diff})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
