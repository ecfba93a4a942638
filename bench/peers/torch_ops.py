#!/usr/bin/env python3
"""The torch side of eagle's op benchmarks (issue 9), timed on the GPU machine in the same
device call as eagle_bench. Writes {case: {"ms": median, "min_ms": min, "what": ...}} as JSON;
eagle_bench --peers FILE reads it and prints eagle / torch for every case both ran. A case torch
cannot run here is written with "error" instead of a time, never a guess.

Timing: CUDA events around `reps` back-to-back calls, after warm-up; the median (and min) of 15
such batches, per call. Inputs are random (never zeros): zeros make tensor cores run cooler and
faster than real data."""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F


def timed(fn, reps=20, batches=15, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / reps)
    return statistics.median(times), min(times)


def gemm_cases(out):
    for m, k, n in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 12288)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms, mn = timed(lambda: torch.matmul(a, b))
        out[f"gemm_bf16_{m}x{k}x{n}"] = {
            "ms": ms, "min_ms": mn, "what": "torch.matmul (cuBLAS)",
            "tflops": 2 * m * k * n / ms / 1e9}


def norm_cases(out, rows=16384, cols=4096, dtype=torch.bfloat16):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    dy = torch.randn_like(x)
    w = torch.rand(cols, device="cuda", dtype=dtype) + 0.5
    b = torch.randn(cols, device="cuda", dtype=dtype)
    tag = f"bf16_{rows}x{cols}"
    ms, mn = timed(lambda: torch.softmax(x, -1))
    out[f"softmax_fwd_{tag}"] = {"ms": ms, "min_ms": mn, "what": "torch.softmax"}
    y = torch.softmax(x, -1)
    ms, mn = timed(lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, dtype))
    out[f"softmax_bwd_{tag}"] = {"ms": ms, "min_ms": mn, "what": "aten._softmax_backward_data"}
    ms, mn = timed(lambda: torch.log_softmax(x, -1))
    out[f"log_softmax_fwd_{tag}"] = {"ms": ms, "min_ms": mn, "what": "torch.log_softmax"}
    ms, mn = timed(lambda: torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5))
    out[f"layer_norm_fwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                    "what": "aten.native_layer_norm (y, mean, rstd)"}
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5)
    ms, mn = timed(lambda: torch.ops.aten.native_layer_norm_backward(
        dy, x, [cols], mean, rstd, w, b, [True, True, True]))
    out[f"layer_norm_bwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                    "what": "aten.native_layer_norm_backward (dx, dw, db)"}
    try:
        ms, mn = timed(lambda: torch.ops.aten._fused_rms_norm(x, [cols], w, 1e-5))
        out[f"rms_norm_fwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                      "what": "aten._fused_rms_norm (y, rstd)"}
        _, rstd = torch.ops.aten._fused_rms_norm(x, [cols], w, 1e-5)
        ms, mn = timed(lambda: torch.ops.aten._fused_rms_norm_backward(
            dy, x, [cols], rstd, w, [True, True]))
        out[f"rms_norm_bwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                      "what": "aten._fused_rms_norm_backward (dx, dw)"}
    except (AttributeError, RuntimeError) as e:
        out[f"rms_norm_fwd_{tag}"] = {"error": f"torch has no fused rms_norm here: {e}"}


def cross_entropy_cases(out):
    for n, c in [(16384, 32768), (4096, 128256)]:
        logits = torch.randn(n, c, device="cuda", dtype=torch.bfloat16)
        targets = torch.randint(0, c, (n,), device="cuda")
        targets[::17] = -100
        tag = f"bf16_{n}x{c}"
        ms, mn = timed(lambda: F.cross_entropy(logits, targets, ignore_index=-100))
        out[f"cross_entropy_fwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                           "what": "F.cross_entropy (log_softmax + nll_loss)"}
        leaf = logits.detach().requires_grad_(True)

        def fwd_bwd():
            leaf.grad = None
            F.cross_entropy(leaf, targets, ignore_index=-100).backward()
        ms, mn = timed(fwd_bwd)
        out[f"cross_entropy_fwd_bwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                               "what": "F.cross_entropy forward + backward"}


def embedding_cases(out, tokens=16384, dim=4096):
    for vocab in [32768, 131072]:
        table = torch.randn(vocab, dim, device="cuda", dtype=torch.bfloat16)
        ids = torch.randint(0, vocab, (tokens,), device="cuda")
        dy = torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16)
        tag = f"bf16_{vocab}x{dim}_{tokens}"
        ms, mn = timed(lambda: F.embedding(ids, table))
        out[f"embedding_fwd_{tag}"] = {"ms": ms, "min_ms": mn, "what": "F.embedding"}
        ms, mn = timed(lambda: torch.ops.aten.embedding_dense_backward(dy, ids, vocab, -1, False))
        out[f"embedding_bwd_{tag}"] = {"ms": ms, "min_ms": mn,
                                       "what": "aten.embedding_dense_backward"}
    # Hot ids: every id among 8 of a 4096-row table (about 2048 positions each), as byte-level
    # text's frequent characters.
    vocab = 4096
    ids = torch.randint(0, 8, (tokens,), device="cuda")
    dy = torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16)
    ms, mn = timed(lambda: torch.ops.aten.embedding_dense_backward(dy, ids, vocab, -1, False))
    out[f"embedding_bwd_hot_bf16_{vocab}x{dim}_{tokens}"] = {
        "ms": ms, "min_ms": mn, "what": "aten.embedding_dense_backward, 8 hot ids"}


def reduction_cases(out, rows=16384, cols=4096):
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    xf = torch.randn(rows, cols, device="cuda", dtype=torch.float32)
    ms, mn = timed(lambda: x.sum(-1))
    out[f"reduction_sum_rows_bf16_{rows}x{cols}"] = {"ms": ms, "min_ms": mn, "what": "x.sum(-1)"}
    ms, mn = timed(lambda: x.sum())
    out[f"reduction_sum_all_bf16_{rows}x{cols}"] = {"ms": ms, "min_ms": mn, "what": "x.sum()"}
    ms, mn = timed(lambda: xf.amax(0))
    out[f"reduction_max_cols_f32_{rows}x{cols}"] = {"ms": ms, "min_ms": mn, "what": "x.amax(0)"}


def zipf_lengths(total, count, seed=0):
    gen = torch.Generator().manual_seed(seed)
    weights = 1.0 / torch.arange(1, count + 1, dtype=torch.float64) ** 1.1
    weights = weights[torch.randperm(count, generator=gen)]
    lengths = (weights / weights.sum() * total).floor().long().clamp(min=1)
    lengths[0] += total - lengths.sum()
    return lengths


def sdpa_cases(out):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, s, h, d = 8, 2048, 32, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        name = f"sdpa_fwd_bf16_dense_b{b}_s{s}_h{h}_d{d}" + ("_causal" if causal else "")
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ms, mn = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            out[name] = {"ms": ms, "min_ms": mn, "what": "F.sdpa, cuDNN backend",
                         "tflops": flops / ms / 1e9}
        except RuntimeError as e:
            out[name] = {"error": f"torch's cuDNN SDPA backend refused: {e}"}
    # THD ragged: torch reaches cuDNN's ragged attention only through nested (jagged) tensors.
    total, seqs = 16384, 64
    lengths = zipf_lengths(total, seqs)
    name = f"sdpa_fwd_bf16_thd_t{total}_n{seqs}_h{h}_d{d}_zipf"
    try:
        parts = [torch.randn(int(n), h, d, device="cuda", dtype=torch.bfloat16) for n in lengths]
        nq = torch.nested.nested_tensor(parts, layout=torch.jagged).transpose(1, 2)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            ms, mn = timed(lambda: F.scaled_dot_product_attention(nq, nq, nq))
        flops = sum(4 * h * int(n) * int(n) * d for n in lengths)
        out[name] = {"ms": ms, "min_ms": mn, "what": "F.sdpa on jagged nested tensors, cuDNN",
                     "tflops": flops / ms / 1e9, "lengths": [int(n) for n in lengths]}
    except (RuntimeError, NotImplementedError) as e:
        out[name] = {"error": f"torch cannot run ragged SDPA through cuDNN here: {e}".strip()[:300]}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--table", help="also write one line per case for eagle_bench --peers: "
                   "'name median_ms min_ms', or 'name error: reason'")
    p.add_argument("--only", default="gemm,norm,loss,embedding,reduction,sdpa")
    args = p.parse_args()
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version()}
    cases = {"gemm": gemm_cases, "norm": norm_cases, "loss": cross_entropy_cases,
             "embedding": embedding_cases, "reduction": reduction_cases, "sdpa": sdpa_cases}
    for part in args.only.split(","):
        try:
            cases[part](out)
        except Exception as e:  # a whole family torch cannot run: say so, go on
            out[f"{part}_error"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    if args.table:
        with open(args.table, "w") as f:
            for k, v in out.items():
                if not isinstance(v, dict):
                    continue
                if "ms" in v:
                    f.write(f"{k} {v['ms']:.6f} {v['min_ms']:.6f}\n")
                else:
                    f.write(f"{k} error: {' '.join(v['error'].split())}\n")
    for k, v in out.items():
        if isinstance(v, dict):
            t = f"{v['ms']*1e3:10.1f} us" if "ms" in v else "  " + v["error"]
            print(f"torch {k:48s} {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
