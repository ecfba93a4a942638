#!/usr/bin/env python3
"""The fla side of eagle's linear-attention benchmarks (issue 11), timed on the GPU machine in the
same device call as eagle_bench. The peer is flash-linear-attention 0.6 (`fla-core` and
`flash-linear-attention` wheels, pure Python over the machine's Triton), bf16, H = HV = 32,
K = V = 128, token-packed [1, T, H, D] with cu_seqlens, use_qk_l2norm_in_kernel=True, no initial
state, no final state.

Families (--only exact,overcapture; also overcapture_bwd, and profile: fla's time per kernel
at the first exact shape, by torch.profiler):
- exact: T tokens in N zipf sequences, (T, N) in (32768, 8), (32768, 64) and the seed's Kimi-style
  (4096, 32); chunk_gated_delta_rule (gdn, g [T, HV]) and chunk_kda (kda, g [T, HV, K]), the
  forward (fla_{gdn|kda}_T{T}_N{N}_fwd) and forward + backward (_fwdbwd: torch.autograd.grad of
  the output against q, k, v, g, beta with a random cotangent). Eager calls: fla's varlen path
  reads cu_seqlens on the host and caches chunk indices by tensor identity, so the eager time is
  what fla users get. fla 0.6 refuses GDN's backward on Hopper with Triton in [3.4, 3.7.1): that
  case is written with fla's error, never a guess.
- overcapture (forward) and overcapture_bwd (forward + backward): chunk_kda with
  use_graph=True, max_num_seqs=N (fla's mode meant for capture: a device-built chunk list
  bounded by ceil(T/C) + N - 1) captured in CUDA graphs: a "worst" graph captured for capacity (T rows, N + 1 cu_seqlens entries whose tail
  repeats the end) and an "exact" one (L rows, M + 1 entries); the seed's three sweeps as in
  torch_varlen.py (names fla_kda_{fwd|fwdbwd}_overcapture_{a_M|b_L|c_M}..._{worst|exact}). A capture that
  fails is written with its error.

Gates like a real layer's: g = logsigmoid(randn) (log space, <= 0), beta = sigmoid(randn).
Timing, lengths, seeds and the table format are torch_varlen.py's (imported from this folder).
Past 240 s (--budget) the remaining cases are written as skipped."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_varlen as tv  # noqa: E402 - zipf lengths, seeds, timing shared with the torch peer

H, D = 32, 128
EXACT_SHAPES = [(32768, 8), (32768, 64), (4096, 32)]
BUDGET_S = 240


class FlaRunner(tv.Runner):
    def __init__(self, quick):
        super().__init__(quick)
        self.fla_error = None
        try:
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
            from fla.ops.kda import chunk_kda
            self.gdn, self.kda = chunk_gated_delta_rule, chunk_kda
        except Exception as e:  # noqa: BLE001 - any failure means: no peer here
            self.fla_error = f"fla not importable: {type(e).__name__}: {e}"[:300]

    def over_budget(self):
        return time.monotonic() - self.start > BUDGET_S

    def inputs(self, rule, rows, grad):
        torch = self.torch
        f = torch.nn.functional

        def rand(*shape, dtype=torch.bfloat16):
            x = torch.randn(*shape, device="cuda", dtype=dtype)
            return x

        q, k, v = rand(1, rows, H, D), rand(1, rows, H, D), rand(1, rows, H, D)
        g_shape = (1, rows, H) if rule == "gdn" else (1, rows, H, D)
        g = f.logsigmoid(rand(*g_shape, dtype=torch.float32))
        beta = torch.sigmoid(rand(1, rows, H, dtype=torch.float32)).to(torch.bfloat16)
        xs = [q, k, v, g, beta]
        if grad:
            xs = [x.requires_grad_(True) for x in xs]
        return xs, rand(1, rows, H, D)

    def call(self, rule, xs, cu, **kw):
        fn = self.gdn if rule == "gdn" else self.kda
        q, k, v, g, beta = xs
        o, _ = fn(q, k, v, g, beta, use_qk_l2norm_in_kernel=True, cu_seqlens=cu, **kw)
        return o

    def step(self, rule, xs, do, cu, bwd, **kw):
        torch = self.torch
        if not bwd:
            def run():
                with torch.no_grad():
                    return (self.call(rule, xs, cu, **kw),)
            return run

        def run():
            o = self.call(rule, xs, cu, **kw)
            return (o,) + torch.autograd.grad(o, xs, do)
        return run


def long_cu(r, values):
    return r.torch.tensor(values, device="cuda", dtype=r.torch.long)


def exact_family(r, out, shapes, passes=(False, True)):
    for t, n in EXACT_SHAPES:
        seed = tv.exact_seed(t, n)
        lengths = tv.zipf_lengths(t, n, seed)
        shape = f"fla_T{t}_N{n}"
        shapes[shape] = tv.cu_seqlens(lengths, n)
        for rule in ("kda", "gdn"):
            for bwd in passes:
                name = f"fla_{rule}_T{t}_N{n}_" + ("fwdbwd" if bwd else "fwd")
                if r.fla_error:
                    out[name] = {"error": r.fla_error}
                    continue
                if r.over_budget():
                    out[name] = {"error": f"skipped: the run passed its {BUDGET_S} s budget"}
                    continue
                try:
                    xs, do = r.inputs(rule, t, bwd)
                    fn = r.step(rule, xs, do, long_cu(r, shapes[shape]), bwd)
                    ((ms, mn, reps),) = r.timed([fn])
                    out[name] = {"ms": ms, "min_ms": mn, "reps": reps, "T": t, "N": n,
                                 "seed": seed, "shape": shape,
                                 "what": f"fla chunk_{'gated_delta_rule' if rule == 'gdn' else 'kda'} "
                                         + ("forward + backward" if bwd else "forward") + ", eager"}
                except Exception as e:  # noqa: BLE001 - write it, go on
                    out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                r.cleanup()


def overcapture_family(r, out, shapes, bwd):
    for point, sweep, t, n, lengths, seed in tv.overcapture_points():
        l, m = sum(lengths), len(lengths)
        base = ("fla_kda_fwdbwd_" if bwd else "fla_kda_fwd_") + point
        worst_name, exact_name = base + "_worst", base + "_exact"
        shapes[worst_name] = tv.cu_seqlens(lengths, n)
        shapes[exact_name] = tv.cu_seqlens(lengths, m)
        if r.fla_error or r.over_budget():
            why = r.fla_error or f"skipped: the run passed its {BUDGET_S} s budget"
            out[worst_name] = out[exact_name] = {"error": why}
            continue
        graphs = {}
        try:
            xs, do = r.inputs("kda", t, True)
            xe = [x.detach()[:, :l].clone().requires_grad_(True) for x in xs]
            de = do[:, :l].clone()
            for key, ins, grad, cu, slots in (("worst", xs, do, shapes[worst_name], n),
                                              ("exact", xe, de, shapes[exact_name], m)):
                name = worst_name if key == "worst" else exact_name
                fn = r.step("kda", ins, grad, long_cu(r, cu), bwd, use_graph=True,
                            max_num_seqs=slots)
                try:
                    graphs[key] = r.capture(fn)
                except Exception as e:  # noqa: BLE001
                    out[name] = {"error": f"capture failed: {type(e).__name__}: {e}"[:300]}
                    r.cleanup()
            keys = [key for key in ("worst", "exact") if key in graphs]
            if keys:
                res = r.timed([graphs[key][0].replay for key in keys])
                for key, (ms, mn, reps) in zip(keys, res):
                    name = worst_name if key == "worst" else exact_name
                    out[name] = {"ms": ms, "min_ms": mn, "reps": reps, "sweep": sweep, "T": t,
                                 "N": n, "L": l, "M": m, "seed": seed,
                                 "what": "fla chunk_kda use_graph "
                                         + ("forward + backward" if bwd else "forward")
                                         + ", CUDA graph "
                                         "replay, captured for "
                                         + ("capacity" if key == "worst" else "the exact shape")}
            if len(keys) == 2:
                ratio = out[worst_name]["ms"] / out[exact_name]["ms"]
                out[worst_name]["ratio"] = out[exact_name]["ratio"] = ratio
                o_w, o_e = graphs["worst"][1][0], graphs["exact"][1][0]
                out[worst_name]["out_max_abs_diff_vs_exact"] = (
                    (o_w[:, :l].float() - o_e.float()).abs().max().item())
        except Exception as e:  # noqa: BLE001 - write it, go on
            for name in (worst_name, exact_name):
                if "ms" not in out.get(name, {}):
                    out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
        graphs.clear()
        r.cleanup()


def profile_family(r, rows=(("gdn", False), ("kda", False), ("kda", True))):
    """Where fla's time goes at the first exact shape: torch.profiler's CUDA time per kernel
    (kernels overlap nothing here: fla launches on one stream), averaged over 5 calls."""
    from torch.profiler import ProfilerActivity, profile
    t, n = EXACT_SHAPES[0]
    cu = long_cu(r, tv.cu_seqlens(tv.zipf_lengths(t, n, tv.exact_seed(t, n)), n))
    for rule, bwd in rows:
        xs, do = r.inputs(rule, t, bwd)
        fn = r.step(rule, xs, do, cu, bwd)
        for _ in range(3):
            fn()
        r.torch.cuda.synchronize()
        calls = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            r.torch.cuda.synchronize()
        per = {}
        for e in prof.events():
            if e.device_type.name == "CUDA":
                c, us = per.get(e.name, (0, 0.0))
                per[e.name] = (c + 1, us + e.device_time)
        total = sum(us for _, us in per.values()) / calls
        print(f"fla {rule} {'fwd+bwd' if bwd else 'fwd'} T {t} N {n}: {total / 1000:.3f} ms of "
              "kernel time per call", flush=True)
        for name, (c, us) in sorted(per.items(), key=lambda kv: -kv[1][1]):
            print(f"  {us / calls / 1000:8.3f} ms  {c // calls:3d}x  {name[:90]}", flush=True)
        r.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="exact,overcapture")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", required=True)
    ap.add_argument("--table")
    ap.add_argument("--fwd-only", action="store_true", help="time the forward alone")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="seconds after which the remaining cases are written as skipped")
    args = ap.parse_args()
    global BUDGET_S
    BUDGET_S = args.budget
    r = FlaRunner(args.quick)
    out, shapes = {}, {}
    families = args.only.split(",")
    if r.fla_error is None:
        import fla
        import triton
        print(f"fla {fla.__version__}, triton {triton.__version__}, torch {r.torch.__version__}",
              flush=True)
    if "exact" in families:
        exact_family(r, out, shapes, (False,) if args.fwd_only else (False, True))
    if "overcapture" in families:
        overcapture_family(r, out, shapes, False)
    if "overcapture_bwd" in families:
        overcapture_family(r, out, shapes, True)
    if "profile" in families and r.fla_error is None:
        profile_family(r)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    if args.table:
        tv.write_table(args.table, out, shapes)
    for k, v in out.items():
        print(k, f"{v['ms']:.3f} ms" + (f" ratio {v['ratio']:.3f}" if "ratio" in v else "")
              if "ms" in v else v["error"], flush=True)


if __name__ == "__main__":
    main()
