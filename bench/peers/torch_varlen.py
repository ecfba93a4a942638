#!/usr/bin/env python3
"""The torch side of eagle's varlen attention benchmarks (issue 10), timed on the GPU machine in
the same device call as eagle_bench. torch's peer is torch.nn.attention.varlen.varlen_attn
(FlashAttention 2 through aten._flash_attention_forward / _backward in torch 2.9-2.11), bf16,
H = Hk = 32, D = 128, THD layout with cu_seqlens.

Two families (--only exact,overcapture):
- exact: T tokens in N zipf sequences, (T, N) in (4096, 32), (16384, 64), (16384, 8), causal and
  not; the forward, and forward + backward (torch.autograd.grad(out, (q, k, v), grad): the
  backward of out.backward(grad) without accumulating into .grad): eager calls
  (varlen_T{T}_N{N}_{full|causal}_{fwd|fwdbwd}), and the same call captured in a CUDA graph and
  replayed (the same name + _graph: device time without the custom op's Python dispatch, which
  the smallest cases may not hide). max_seqlen = the real longest. FLOPs: forward
  4 * H * D * (visible (query, key) pairs; causal counts j <= i within a sequence), forward +
  backward 3.5x that (the FlashAttention convention).
- overcapture: the seed's three sweeps (shared/seeds/ragged-cuda-graphs.txt), causal forward +
  backward captured in CUDA graphs: a "worst" graph captured for capacity (T rows, N slots,
  cu_seqlens of N + 1 entries whose tail repeats the end, max_seqlen = T) and an "exact" graph
  (L rows, cu_seqlens of M + 1 entries, max_seqlen = the real longest); the ratio worst / exact
  in the JSON. Names overcapture_a_M{M}, overcapture_b_L{L}, overcapture_c_M{M}, + _worst/_exact.
  (a) T = L = 8192, N = 256, M in 1, 4, 16, 64, 256; (b) T = 16384, N = 256, M = 64, L in
  16384 .. 1024; (c) every sequence 128 tokens, T = 16384, N = 128, M in 128 .. 8 (L = 128 M).

Lengths: zipf_lengths below, the twin of bench/zipf_lengths.cpp (bit-identical: splitmix64
Fisher-Yates, pow, floor; no torch.randperm), seeds exact_seed(T, N) = T * 1000 + N and
overcapture_seed(T, M, L) = T * 1000 + M * 10 + L % 997. The table gets `shape NAME c0 ... cN`
(the cu_seqlens each case ran) so eagle_bench can check it timed the same batches.

Timing (as bench/peers/torch_ops.py): CUDA events around `reps` back-to-back calls (or graph
replays), after warm-up; the median (and min) of 21 such batches, per call; reps is calibrated
so a batch lasts about 25 ms. The worst and exact graphs of a point are timed in alternating
batches. Inputs are torch.randn (never zeros: zeros make tensor cores run cooler and faster).
Writes {case: {"ms", "min_ms", ...}} as JSON and, with --table, one line per case for
eagle_bench --peers: 'name median_ms min_ms', or 'name error: reason'. A case torch cannot run
here is written with an error, never a guess; the script goes on with the next case. Names hold
no spaces (eagle_bench's --peers reader splits a line at its first space). Before timing, a tiny
batch checks varlen_attn against per-sequence SDPA, causal and not (a causal flag that silently
did not apply would fail every case); each over-capture point checks that the worst graph's
active rows equal the exact graph's output (out_max_abs_diff_vs_exact). Past 210 s the remaining
cases are written as skipped. The whole run takes about a minute on an H200 (--quick: less).

`--lengths L,M,SEED` prints zipf_lengths(L, M, SEED) and exits (no torch needed): the check
against the C++ twin."""
import argparse
import inspect
import json
import math
import statistics
import sys
import time

H, D = 32, 128
MASK64 = (1 << 64) - 1
EXACT_SHAPES = [(4096, 32), (16384, 64), (16384, 8)]
BUDGET_S = 210  # past this, the remaining cases are written as errors (the run must stay < 4 min)


# ---------------------------------------------------------------- shapes (no torch below here)

def splitmix64(state):
    """One splitmix64 draw: returns (new state, value), all on uint64 (explicit masks)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def zipf_lengths(total, n, seed):
    """n zipf(1.2) lengths >= 1 summing to total; the twin of eagle::bench::zipf_lengths."""
    if n < 1 or total < n:
        raise ValueError(f"zipf_lengths: need 1 <= n <= total, got n {n}, total {total}")
    ranks = list(range(1, n + 1))
    state = seed & MASK64
    for i in range(n - 1, 0, -1):  # Fisher-Yates, i = n-1 down to 1
        state, z = splitmix64(state)
        j = z % (i + 1)
        ranks[i], ranks[j] = ranks[j], ranks[i]
    w = [math.pow(float(r), -1.2) for r in ranks]
    s = 0.0
    for x in w:  # in index order
        s += x
    factor = float(total - n) / s
    extra, frac = [], []
    for x in w:
        scaled = x * factor
        whole = math.floor(scaled)
        extra.append(int(whole))
        frac.append(scaled - float(whole))
    remainder = total - n - sum(extra)
    if remainder < 0 or remainder > n:
        raise ArithmeticError(f"zipf_lengths: remainder {remainder} out of [0, n]")
    order = sorted(range(n), key=lambda i: (-frac[i], i))  # largest fraction, lower index first
    for i in order[:remainder]:
        extra[i] += 1
    return [e + 1 for e in extra]


def exact_seed(t, n):
    return t * 1000 + n


def overcapture_seed(t, m, l):
    return t * 1000 + m * 10 + l % 997


def cu_seqlens(lengths, slots):
    """0, the running sums, then the end repeated up to slots + 1 entries."""
    if len(lengths) > slots:
        raise ValueError(f"cu_seqlens: {len(lengths)} sequences in {slots} slots")
    cu = [0]
    for x in lengths:
        cu.append(cu[-1] + x)
    cu += [cu[-1]] * (slots + 1 - len(cu))
    return cu


def visible_pairs(lengths, causal):
    return sum(x * (x + 1) // 2 if causal else x * x for x in lengths)


def forward_flops(lengths, causal):
    return 4 * H * D * visible_pairs(lengths, causal)


def overcapture_points():
    """(name, sweep, T, N, lengths, seed or None) of the seed's three sweeps."""
    pts = []
    t, n, l = 8192, 256, 8192
    for m in (1, 4, 16, 64, 256):
        seed = overcapture_seed(t, m, l)
        pts.append((f"overcapture_a_M{m}", "a", t, n, zipf_lengths(l, m, seed), seed))
    t, n, m = 16384, 256, 64
    for l in (16384, 8192, 4096, 2048, 1024):
        seed = overcapture_seed(t, m, l)
        pts.append((f"overcapture_b_L{l}", "b", t, n, zipf_lengths(l, m, seed), seed))
    t, n = 16384, 128
    for m in (128, 64, 32, 16, 8):
        pts.append((f"overcapture_c_M{m}", "c", t, n, [128] * m, None))
    return pts


def exact_cases():
    """(name, shape name, T, N, lengths, seed, causal, backward) of the exact-shape family."""
    cases = []
    for t, n in EXACT_SHAPES:
        seed = exact_seed(t, n)
        lengths = zipf_lengths(t, n, seed)
        for causal in (False, True):
            for bwd in (False, True):
                name = (f"varlen_T{t}_N{n}_" + ("causal" if causal else "full")
                        + ("_fwdbwd" if bwd else "_fwd"))
                cases.append((name, f"varlen_T{t}_N{n}", t, n, lengths, seed, causal, bwd))
    return cases


# ---------------------------------------------------------------- torch

class Runner:
    def __init__(self, quick):
        import torch
        self.torch = torch
        self.quick = quick
        self.batches = 5 if quick else 21
        self.warmup = 1 if quick else 3
        self.batch_ms = 4.0 if quick else 25.0
        self.max_reps = 50
        self.start = time.monotonic()
        self.varlen, self.causal_kw, self.signature, self.varlen_error = None, None, None, None
        try:
            from torch.nn.attention.varlen import varlen_attn
            params = inspect.signature(varlen_attn).parameters
            self.signature = f"varlen_attn{inspect.signature(varlen_attn)}"
            if "window_size" in params:  # torch 2.10+: causal is window_size == (-1, 0), a tuple
                self.causal_kw = {True: {"window_size": (-1, 0)}, False: {}}
            elif "is_causal" in params:  # torch 2.9
                self.causal_kw = {True: {"is_causal": True}, False: {}}
            else:
                raise TypeError(f"no causal argument in {self.signature}")
            self.varlen = varlen_attn
        except Exception as e:  # noqa: BLE001 - any failure means: no peer here
            self.varlen_error = f"torch has no usable varlen_attn: {type(e).__name__}: {e}"

    def over_budget(self):
        return time.monotonic() - self.start > BUDGET_S

    def attn(self, q, k, v, cu, max_seqlen, causal):
        # Positional up to max_k: the names changed across versions (cu_seq_q/cu_seq_k,
        # max_q/max_k in 2.9-2.11), the order did not.
        return self.varlen(q, k, v, cu, cu, max_seqlen, max_seqlen, **self.causal_kw[causal])

    def rand(self, rows, grad=False):
        x = self.torch.randn(rows, H, D, device="cuda", dtype=self.torch.bfloat16)
        return x.requires_grad_(True) if grad else x

    def cu(self, values):
        return self.torch.tensor(values, device="cuda", dtype=self.torch.int32)

    def event_ms(self, fn, reps):
        torch = self.torch
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / reps

    def timed(self, fns):
        """Median and min ms per call of each fn, batches alternating between them."""
        torch = self.torch
        for fn in fns:
            for _ in range(self.warmup):
                fn()
        torch.cuda.synchronize()
        reps = []
        for fn in fns:
            one = self.event_ms(fn, 1)
            reps.append(max(1, min(self.max_reps, int(self.batch_ms / max(one, 1e-3)))))
        times = [[] for _ in fns]
        for b in range(self.batches):
            for k in range(len(fns)):
                i = (b + k) % len(fns)
                times[i].append(self.event_ms(fns[i], reps[i]))
        return [(statistics.median(t), min(t), r) for t, r in zip(times, reps)]

    def capture(self, fn):
        """A CUDA graph of fn: warm-up on a side stream, then capture on it (as torch requires)."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(max(self.warmup, 2)):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        return graph, out

    def fwd_bwd(self, q, k, v, grad, cu, max_seqlen, causal):
        def run():
            out = self.attn(q, k, v, cu, max_seqlen, causal)
            dq, dk, dv = self.torch.autograd.grad(out, (q, k, v), grad)
            return out, dq, dk, dv
        return run

    def cleanup(self):
        torch = self.torch
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky error: later cases will say so themselves
            pass
        torch.cuda.empty_cache()

    def sanity(self):
        """varlen_attn against per-sequence SDPA in fp32 on a tiny batch, causal and not: a
        causal flag that silently did not apply would make every causal figure wrong."""
        torch = self.torch
        import torch.nn.functional as F
        lengths = [5, 130, 1, 70]
        cu = self.cu(cu_seqlens(lengths, len(lengths)))
        q, k, v = (self.rand(sum(lengths)) for _ in range(3))
        worst = {}
        for causal in (False, True):
            out = self.attn(q, k, v, cu, max(lengths), causal).float()
            err, start = 0.0, 0
            for n in lengths:
                s = slice(start, start + n)
                ref = F.scaled_dot_product_attention(
                    *(x[s].float().transpose(0, 1) for x in (q, k, v)), is_causal=causal)
                err = max(err, (out[s] - ref.transpose(0, 1)).abs().max().item())
                start += n
            worst["causal" if causal else "full"] = err
        return worst


def exact_family(r, out, table_shapes):
    torch = r.torch
    inputs = {}
    for name, shape, t, n, lengths, seed, causal, bwd in exact_cases():
        if shape not in table_shapes:
            table_shapes[shape] = cu_seqlens(lengths, n)
        if r.varlen is None:
            out[name] = out[name + "_graph"] = {"error": r.varlen_error}
            continue
        if r.over_budget():
            out[name] = out[name + "_graph"] = {
                "error": f"skipped: the run passed its {BUDGET_S} s budget"}
            continue
        try:
            if shape not in inputs:
                inputs.clear()
                r.cleanup()
                inputs[shape] = (r.rand(t, True), r.rand(t, True), r.rand(t, True), r.rand(t),
                                 r.cu(cu_seqlens(lengths, n)))
            q, k, v, grad, cu = inputs[shape]
            mx = max(lengths)
            if bwd:
                fn = r.fwd_bwd(q, k, v, grad, cu, mx, causal)
            else:
                def fn():
                    with torch.no_grad():
                        return r.attn(q, k, v, cu, mx, causal)
            flops = forward_flops(lengths, causal) * (3.5 if bwd else 1.0)
            what = "varlen_attn " + ("forward + backward" if bwd else "forward")
            common = {"flops": flops, "T": t, "N": n, "causal": causal, "max_seqlen": mx,
                      "seed": seed, "shape": shape}
            # The same call captured in a CUDA graph as well: the device time without the
            # Python dispatch of the custom op, which the smallest cases may not hide.
            graph, graph_error = None, None
            try:
                graph = r.capture(fn)
            except Exception as e:  # noqa: BLE001
                graph_error = f"capture failed: {type(e).__name__}: {e}"[:300]
                r.cleanup()
            fns = [fn] + ([graph[0].replay] if graph else [])
            res = r.timed(fns)
            for key, (ms, mn, reps) in zip((name, name + "_graph"), res):
                out[key] = dict(common, ms=ms, min_ms=mn, reps=reps, tflops=flops / ms / 1e9,
                                what=what + (", eager" if key == name else ", CUDA graph replay"))
            if graph_error:
                out[name + "_graph"] = {"error": graph_error}
            del graph, fns
        except Exception as e:  # noqa: BLE001 - write it, go on
            for key in (name, name + "_graph"):
                if "ms" not in out.get(key, {}):
                    out[key] = {"error": f"{type(e).__name__}: {e}"[:300]}
            r.cleanup()
    inputs.clear()
    r.cleanup()


def overcapture_family(r, out, table_shapes):
    for point, sweep, t, n, lengths, seed in overcapture_points():
        l, m, mx = sum(lengths), len(lengths), max(lengths)
        worst_name, exact_name = point + "_worst", point + "_exact"
        table_shapes[worst_name] = cu_seqlens(lengths, n)
        table_shapes[exact_name] = cu_seqlens(lengths, m)
        if r.varlen is None:
            out[worst_name] = out[exact_name] = {"error": r.varlen_error}
            continue
        if r.over_budget():
            out[worst_name] = out[exact_name] = {
                "error": f"skipped: the run passed its {BUDGET_S} s budget"}
            continue
        flops = 3.5 * forward_flops(lengths, True)
        common = {"sweep": sweep, "T": t, "N": n, "L": l, "M": m, "seed": seed,
                  "flops": flops, "causal": True}
        graphs = {}
        try:
            q, k, v, grad = r.rand(t, True), r.rand(t, True), r.rand(t, True), r.rand(t)
            # The exact graph's inputs are the worst graph's active rows: their outputs must agree.
            qe, ke, ve = (x.detach()[:l].clone().requires_grad_(True) for x in (q, k, v))
            ge = grad[:l].clone()
            cu_w, cu_e = r.cu(table_shapes[worst_name]), r.cu(table_shapes[exact_name])
            for key, fn in (("worst", r.fwd_bwd(q, k, v, grad, cu_w, t, True)),
                            ("exact", r.fwd_bwd(qe, ke, ve, ge, cu_e, mx, True))):
                name = worst_name if key == "worst" else exact_name
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
                    out[name] = dict(common, ms=ms, min_ms=mn, reps=reps,
                                     tflops=flops / ms / 1e9,
                                     max_seqlen=t if key == "worst" else mx,
                                     slots=n if key == "worst" else m,
                                     rows=t if key == "worst" else l,
                                     what="varlen_attn forward + backward, causal, CUDA graph "
                                          "replay, captured for "
                                          + ("capacity (T rows, N slots, max_seqlen T)"
                                             if key == "worst" else "the exact shape"))
            if len(keys) == 2:
                ratio = out[worst_name]["ms"] / out[exact_name]["ms"]
                out[worst_name]["ratio"] = out[exact_name]["ratio"] = ratio
                o_w, o_e = graphs["worst"][1][0], graphs["exact"][1][0]
                diff = (o_w[:l].float() - o_e.float()).abs().max().item()
                out[worst_name]["out_max_abs_diff_vs_exact"] = diff
        except Exception as e:  # noqa: BLE001 - write it, go on
            for name in (worst_name, exact_name):
                if "ms" not in out.get(name, {}):
                    out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
        graphs.clear()
        r.cleanup()


def write_table(path, out, shapes):
    with open(path, "w") as f:
        for name, cu in shapes.items():
            f.write(f"shape {name} " + " ".join(str(c) for c in cu) + "\n")
        for k, v in out.items():
            if not isinstance(v, dict):
                continue
            if "ms" in v:
                f.write(f"{k} {v['ms']:.6f} {v['min_ms']:.6f}\n")
            elif "error" in v:
                f.write(f"{k} error: {' '.join(str(v['error']).split())}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="where to write the results")
    p.add_argument("--table", help="also write one line per case for eagle_bench --peers: "
                   "'name median_ms min_ms', or 'name error: reason', and 'shape NAME cu...'")
    p.add_argument("--only", default="exact,overcapture")
    p.add_argument("--quick", action="store_true", help="fewer repetitions: a smoke run")
    p.add_argument("--lengths", help="L,M,SEED: print zipf_lengths(L, M, SEED) and exit")
    args = p.parse_args()
    if args.lengths:
        total, n, seed = (int(x) for x in args.lengths.split(","))
        print(" ".join(str(x) for x in zipf_lengths(total, n, seed)))
        return 0
    if not args.json:
        p.error("--json FILE is required")
    parts = [x for x in args.only.split(",") if x]
    families = {"exact": exact_family, "overcapture": overcapture_family}
    for part in parts:
        if part not in families:
            p.error(f"--only: unknown family '{part}' (exact, overcapture)")

    out, shapes = {}, {}
    try:
        r = Runner(args.quick)
        torch = r.torch
        torch.manual_seed(0)
        out.update({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "varlen_attn": r.signature,
                    "causal_argument": (str(r.causal_kw[True]) if r.causal_kw else None),
                    "quick": args.quick})
        if r.varlen is not None:
            try:
                err = r.sanity()
                out["sanity_max_abs_err_vs_sdpa"] = err
                if max(err.values()) > 0.05:
                    r.varlen_error = f"varlen_attn disagrees with SDPA on a tiny batch: {err}"
                    r.varlen = None
            except Exception as e:  # noqa: BLE001
                r.varlen_error = f"varlen_attn failed on a tiny batch: {type(e).__name__}: {e}"
                r.varlen = None
        for part in parts:
            try:
                families[part](r, out, shapes)
            except Exception as e:  # noqa: BLE001 - a whole family torch cannot run: say so
                out[f"{part}_error"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        out["wall_s"] = time.monotonic() - r.start
    except Exception as e:  # noqa: BLE001 - no torch / no GPU: every case says so
        why = f"torch cannot run here: {type(e).__name__}: {e}"[:300]
        for name, shape, t, n, lengths, *_ in exact_cases():
            shapes.setdefault(shape, cu_seqlens(lengths, n))
            if "exact" in parts:
                out[name] = out[name + "_graph"] = {"error": why}
        for point, _, t, n, lengths, _ in overcapture_points():
            shapes[point + "_worst"] = cu_seqlens(lengths, n)
            shapes[point + "_exact"] = cu_seqlens(lengths, len(lengths))
            if "overcapture" in parts:
                out[point + "_worst"] = out[point + "_exact"] = {"error": why}
    out["shapes"] = shapes
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    if args.table:
        write_table(args.table, out, shapes)

    print(f"torch varlen_attn peer: {out.get('device', '?')}, torch {out.get('torch', '?')}, "
          f"{out.get('varlen_attn', '?')}")
    print(f"{'case':36s} {'ms':>10s} {'TFLOP/s':>9s} {'worst/exact':>12s}")
    for k, v in out.items():
        if not isinstance(v, dict) or k == "shapes" or k.startswith("sanity"):
            continue
        if "ms" in v:
            ratio = f"{v['ratio']:12.3f}" if "ratio" in v and k.endswith("_worst") else ""
            print(f"{k:36s} {v['ms']:10.3f} {v['tflops']:9.1f} {ratio}")
        else:
            print(f"{k:36s} error: {' '.join(str(v.get('error')).split())[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
