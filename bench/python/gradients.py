"""Training steps as one eagle graph (forward + backward, one launch) against the same math in
PyTorch, eager and captured with torch.cuda.graph, timed in the same run (issue 12, Benchmarks).

Cases:
- mlp: a recorded 4-layer MLP, x [T, dim] -> 3 x (matmul, gelu) -> matmul -> cross_entropy
  against class ids (mean), gradients of the 4 weights. eagle: one op graph cut by
  eagle.planned_segments (each matmul, each gelu, the loss: one planned kernel each). The loss's
  backward computes its rows' logsumexp again from the logits (one more read of [T, dim]) rather
  than reading the forward's (output_lse): that would make it wait for the forward loss's total,
  5-10 us on the step's path at dim 512 (--mlp-lse keeps them).
- attention: one attention block as the seed's VarLenAttention (../shared/seeds/
  ragged-cuda-graphs.txt): qkv projection, causal varlen attention over a packed batch of N
  Zipf-length sequences (cu_seqlens, T tokens in all), output projection, loss = sum of the
  output (the seed's grad_output of ones); gradients of the projection weights. torch: the seed's
  module (one qkv Linear [dim, 3 dim], view, unbind; torch's varlen_attn, on the CPU the same
  attention per sequence with scaled_dot_product_attention). eagle: as torch, one qkv weight: a
  planned [T, dim] x [dim, 3 dim] projection whose output's column slices are q, k and v (read
  by the attention where they lie, their gradients written into one array: one weight
  gradient), the sdpa op (its logsumexp exposed, so the backward reads it instead of running the
  forward again), the output projection and the loss. --separate-qkv: three [dim, dim] weights
  instead (q, k, v: one matmul each, the same math as the qkv Linear's column blocks).
- loop: the reverse of a capped loop: h <- h + gelu(h W) for 100 turns (r.for_, record=True;
  per turn the planned matmul and gelu, then the standard axpy adding in place), loss = sum(h); per-turn cost of forward alone and of the reverse (forward+reverse minus the
  same recorded forward), and their ratio.

Every run checks first that eagle's loss and gradients equal torch's for the same weights and
inputs (relative to the largest magnitude of torch's gradient; tolerance by dtype: f32 1e-4,
bf16 2e-2) and prints the largest difference; a case that fails is not timed and the run exits 1.
Then: eagle's step = g(n) wall time / n after warm-up (g(n) is n launches and one wait);
torch eager and torch graph with CUDA events (perf_counter on the CPU, where only eager runs);
the median of --repeats. Goal (H200): eagle's step >= 1.0x torch's captured step at dim 4096,
>= 1.5x at dim 512, printed as speedup = torch graph time / eagle time.

Usage: python bench/python/gradients.py [--device cuda:0|cpu] [--small|--full] [--json OUT]
  [--autotune] (eagle's planned pieces pick their plan entries by timing them on the device)
  [--fuse-epilogues] (the MLP's planned segments with matmul epilogues: each gelu in its matmul's
  segment, gelu_backward in the dx matmul's, fused where an engine serves them)
  [--prefer NAMES] (engine names eagle's planned pieces try first, e.g. native_attention,
  native_attention_bwd)
  [--prioritize-chains] (eagle's steps built with node priorities: a call later calls wait on
  starts before the graph's sinks, e.g. weight gradients)
  [--defer-side-roots] (the calls that wait on nothing start after the heaviest of them)
  [--keep-memset-nodes] (libraries' memset nodes stay memset nodes, not the default kernels)
  [--mlp-lse] (the MLP's loss keeps its rows' logsumexp for its backward)
  [--separate-qkv] (the attention with three q, k, v weights instead of one qkv weight)
  [--max-seqlen capacity|exact|switch] (the attention's per-sequence bound: none, the batch's
  longest as torch is given, or a device switch over power-of-two buckets)
  [--trace DIR] (after timing, each eagle step's trace of a few replays into DIR/<case>-<dim>.json,
  CUPTI on a GPU, and the last replay's nodes printed in order: start, length, stream, kernel).
Default on a GPU: --full (T 4096, N 32, dims 512 and 4096, bf16; the loop in f32); on the CPU:
--small (T 64, N 4, dims 32 and 64, f32) as a check of the benchmark itself, not of the goal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

import eagle

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))
from train_step import varlen_causal_kwargs  # noqa: E402 - the peers' one causal-flag rule

K = eagle.kernels

TOLERANCE = {"f32": 1e-4, "bf16": 2e-2, "f64": 1e-9}
TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f64": torch.float64}
EAGLE_DTYPES = {"f32": eagle.f32, "bf16": eagle.bf16, "f64": eagle.f64}
GOALS = {512: 1.5, 4096: 1.0}  # issue 12: eagle's one-graph step vs torch's captured step


@dataclass
class Config:
    device: str = "cpu"
    tokens: int = 64
    seqs: int = 4
    dims: tuple = (32, 64)
    dtype: str = "f32"
    loop_dtype: str = "f32"
    loop_rows: int = 16
    loop_dim: int = 32
    turns: int = 100
    iters: int = 20
    warmup: int = 3
    repeats: int = 3
    seed: int = 0
    cases: tuple = ("mlp", "attention", "loop")
    autotune: bool = False  # eagle's planned pieces chosen by timing (planned_* autotune=True)
    fuse_epilogues: bool = False  # the MLP's segments with matmul epilogues
    prefer: tuple = ()  # engine names eagle's planned pieces try first (PlanningOptions::prefer)
    prioritize_chains: bool = False  # eagle's steps built with BuildOptions::prioritize_chains
    defer_side_roots: bool = False  # ... and BuildOptions::defer_side_roots
    memsets_as_kernels: bool = True  # libraries' memset nodes as kernels (BuildOptions' default)
    mlp_lse: bool = False  # the MLP's loss exposes its rows' logsumexp for the backward
    packed_qkv: bool = True  # attention: eagle holds one qkv weight, as torch does (see Attention)
    max_seqlen: str = "capacity"  # attention's per-sequence bound: capacity, exact or switch
    trace_dir: str | None = None  # --trace: where each eagle step's trace goes

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


SMALL = dict(tokens=64, seqs=4, dims=(32, 64), dtype="f32", loop_rows=16, loop_dim=32, iters=20)
FULL = dict(tokens=4096, seqs=32, dims=(512, 4096), dtype="bf16", loop_rows=4096, loop_dim=512,
            iters=50)


def head_dim(dim: int) -> int:
    """64 at the seed's dim 512 (8 heads), 128 at 4096 (32 heads): both served by eagle's native
    attention (D in {64, 128}); 16 for the small CPU shapes."""
    if dim < 256:
        return 16
    return 64 if dim <= 1024 else 128


# ---- shared helpers -----------------------------------------------------------------------------


def planning(cfg: Config) -> dict:
    """The planning arguments of every planned piece (planned_kernel, planned_segments)."""
    return {"autotune": cfg.autotune, "prefer": list(cfg.prefer)}


def build_step(step, cfg: Config):
    """An eagle step (forward and reverse recorded as one graph) built for the run's device."""
    return eagle.Graph.record(step, record=True).build(
        eagle.Device(cfg.device), prioritize_chains=cfg.prioritize_chains,
        defer_side_roots=cfg.defer_side_roots,
        memsets_as_kernels=cfg.memsets_as_kernels)


def zipf_cu_seqlens(total: int, n: int, gen: torch.Generator) -> tuple[torch.Tensor, int]:
    """The seed's get_zipf_tokens: n sequences of randomized Zipf-ranked lengths summing to total."""
    ranks = torch.randperm(n, generator=gen).add(1)
    weights = ranks.to(torch.float64).pow(-1.2)
    scaled = weights * ((total - n) / weights.sum())
    extra = scaled.floor().to(torch.int32)
    remainder = total - n - int(extra.sum())
    if remainder:
        order = (scaled - extra).argsort(descending=True)
        extra[order[:remainder]] += 1
    lengths = extra.add(1)
    cu = torch.cat((torch.zeros(1, dtype=torch.int32), lengths.cumsum(0, dtype=torch.int32)))
    return cu, int(lengths.max())


def named_outputs(kernel, made) -> dict:
    """A planned kernel call's outputs by parameter name (write-only parameters, in order)."""
    made = made if isinstance(made, tuple) else (made,)
    names = [name for name, access, _ in kernel.params if access == "write"]
    return dict(zip(names, made))


def call_segments(segments, values: dict) -> None:
    """Records the calls of eagle.planned_segments' pieces in order; values maps uid -> Value."""
    for kernel, inputs, outputs in segments:
        made = kernel(*[values[u] for u in inputs])
        values.update(zip(outputs, made if isinstance(made, tuple) else (made,)))


def share(t: torch.Tensor):
    """A torch tensor as an eagle array, the same memory (DLPack)."""
    return eagle.asarray(t.detach().contiguous())


def to_torch(a) -> torch.Tensor:
    return torch.from_dlpack(a)


def rel_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want| (in float64)."""
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    scale = max(float(w.abs().max()), 1e-30)
    return float((g - w).abs().max()) / scale


def sync(cfg: Config) -> None:
    if cfg.cuda:
        torch.cuda.synchronize()


def eagle_step_us(g, cfg: Config) -> float:
    """g(n) wall time / n after a warm-up, the median of cfg.repeats."""
    g(cfg.warmup)
    times = []
    for _ in range(cfg.repeats):
        start = time.perf_counter()
        g(cfg.iters)
        times.append((time.perf_counter() - start) / cfg.iters * 1e6)
    return statistics.median(times)


def torch_step_us(fn, cfg: Config) -> float:
    """fn's time per call: CUDA events on a GPU, perf_counter on the CPU; median of repeats."""
    for _ in range(cfg.warmup):
        fn()
    sync(cfg)
    times = []
    for _ in range(cfg.repeats):
        if cfg.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(cfg.iters):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / cfg.iters)
        else:
            start = time.perf_counter()
            for _ in range(cfg.iters):
                fn()
            times.append((time.perf_counter() - start) / cfg.iters * 1e6)
    return statistics.median(times)


def capture(fn, warmup: int = 3):
    """The seed's capture_graph: warm up on a side stream, capture one call, return the graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


@dataclass
class CaseResult:
    case: str
    dim: int
    dtype: str
    shapes: dict
    max_rel_diff: float
    tolerance: float
    ok: bool
    diffs: dict = field(default_factory=dict)
    eagle_us: float | None = None
    torch_eager_us: float | None = None
    torch_graph_us: float | None = None
    speedup_vs_torch_graph: float | None = None
    goal: float | None = None
    eagle_nodes: int | None = None  # nodes of eagle's step graph (forward, reverse)


# ---- case (a): the 4-layer MLP ------------------------------------------------------------------


class Mlp:
    layers = 4

    def __init__(self, cfg: Config, dim: int, dtype: str):
        self.cfg, self.dim, self.dtype = cfg, dim, dtype
        T, dt, dev = cfg.tokens, TORCH_DTYPES[dtype], cfg.device
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + dim)
        self.x = torch.randn(T, dim, generator=gen).to(dev, dt)
        self.t = torch.randint(0, dim, (T,), generator=gen).to(dev)
        self.ws = [(torch.randn(dim, dim, generator=gen) / math.sqrt(dim)).to(dev, dt)
                   .requires_grad_() for _ in range(self.layers)]

    # torch: the same math
    def torch_step(self):
        h = self.x
        for i, w in enumerate(self.ws):
            h = h @ w
            if i < self.layers - 1:
                h = F.gelu(h)
        loss = F.cross_entropy(h, self.t)
        # loss detached: a kept output must not keep the autograd graph (and the leaves'
        # AccumulateGrad nodes, made on this stream) alive into torch.cuda.graph's capture.
        return (loss.detach(), *torch.autograd.grad(loss, self.ws))

    # eagle: one op graph cut into planned pieces, forward and backward recorded as one graph
    def eagle_graph(self):
        T, dim, dt = self.cfg.tokens, self.dim, EAGLE_DTYPES[self.dtype]
        og = eagle.op.Graph("mlp")
        tx = og.tensor("x", (T, dim), dt)
        tws = [og.tensor(f"w{i}", (dim, dim), dt) for i in range(self.layers)]
        tt = og.tensor("t", (T,), eagle.i64)
        h = tx
        for i, tw in enumerate(tws):
            h = og.matmul(h, tw)
            if i < self.layers - 1:
                h = og.pointwise("gelu", h)
        ce = og.op("cross_entropy", {"logits": h, "targets": tt},
                   {"output_lse": self.cfg.mlp_lse})
        tloss = ce["loss"]
        tloss.set_output(True).set_name("loss")
        if self.cfg.mlp_lse:  # the backward reads each row's logsumexp: it waits for the loss
            ce["lse"].set_output(True).set_name("lse")
        segments = eagle.planned_segments(og, **planning(self.cfg),
                                          fuse_epilogues=self.cfg.fuse_epilogues)
        x, t, ws = share(self.x), share(self.t), [share(w) for w in self.ws]

        def step(r):
            wv = [r.param(f"w{i}", w) for i, w in enumerate(ws)]
            values = {tx.uid: r.param("x", x), tt.uid: r.param("t", t)}
            values.update({tw.uid: v for tw, v in zip(tws, wv)})
            call_segments(segments, values)
            loss = values[tloss.uid]
            r.result([loss, *eagle.diff.gradients(r, [loss], wv)])

        return build_step(step, self.cfg)

    def compare(self, eagle_out, torch_out) -> dict:
        names = ["loss"] + [f"dw{i}" for i in range(self.layers)]
        return {n: rel_diff(to_torch(e), t) for n, e, t in zip(names, eagle_out, torch_out)}

    def shapes(self) -> dict:
        return {"tokens": self.cfg.tokens, "dim": self.dim, "layers": self.layers}


# ---- case (b): one attention block (the seed's VarLenAttention) ---------------------------------


def torch_varlen_attn():
    """torch's varlen_attn (torch.nn.attention.varlen), or None where this torch has none."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def torch_varlen_attention(q, k, v, cu, max_len, cu_host):
    """torch's varlen_attn (causal) on a GPU; on the CPU (or a torch without it) the same
    attention per sequence with scaled_dot_product_attention."""
    varlen_attn = torch_varlen_attn() if q.is_cuda else None
    if varlen_attn is not None:
        return varlen_attn(q, k, v, cu, cu, max_len, max_len, **varlen_causal_kwargs())
    outs = []
    for b, e in zip(cu_host[:-1], cu_host[1:]):
        qs, ks, vs = (z[b:e].transpose(0, 1) for z in (q, k, v))  # [H, S, D]
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=True).transpose(0, 1))
    return torch.cat(outs)


class Attention:
    def __init__(self, cfg: Config, dim: int, dtype: str):
        self.cfg, self.dim, self.dtype = cfg, dim, dtype
        self.hd = head_dim(dim)
        self.heads = dim // self.hd
        T, dt, dev = cfg.tokens, TORCH_DTYPES[dtype], cfg.device
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + dim + 1)
        cu, self.max_len = zipf_cu_seqlens(T, cfg.seqs, gen)
        self.cu_host = cu.tolist()
        self.cu = cu.to(dev)
        self.x = torch.randn(T, dim, generator=gen).to(dev, dt)
        w = [torch.randn(dim, dim, generator=gen) / math.sqrt(dim) for _ in range(4)]
        # torch holds the seed's layout: one qkv weight (x @ wqkv = [q | k | v]) and out_proj
        self.wqkv = torch.cat(w[:3], dim=1).to(dev, dt).requires_grad_()
        self.wo = w[3].to(dev, dt).requires_grad_()

    def torch_step(self):
        T, H, D = self.cfg.tokens, self.heads, self.hd
        q, k, v = (self.x @ self.wqkv).view(T, 3, H, D).unbind(dim=1)
        attn = torch_varlen_attention(q, k, v, self.cu, self.max_len, self.cu_host)
        y = attn.reshape(T, self.dim) @ self.wo
        loss = y.sum()
        dwqkv, dwo = torch.autograd.grad(loss, (self.wqkv, self.wo))
        return loss.detach(), dwqkv, dwo  # detached: as Mlp.torch_step

    def attention(self, strides):
        """A function (r, q, k, v, cu_seqlens) -> o recording the varlen attention (causal, its
        logsumexp kept for the backward) with q, k, v [T, H, D] at `strides` (None: contiguous),
        each sequence bounded as --max-seqlen says: capacity (no bound: T rows, what a graph
        captured for the worst case has), exact (the batch's longest, which torch's FlashAttention
        is given on the host) or switch (a device switch over ragged.seqlen_buckets(T, 256): the
        batch's longest picks the arm on the device, each arm's attention bounded by its bucket;
        the reverse pass runs the same arm's backward)."""
        T, H, D, dt = self.cfg.tokens, self.heads, self.hd, EAGLE_DTYPES[self.dtype]
        tensor_args = {} if strides is None else {"strides": strides}

        def planned(bound: int):
            g = eagle.op.Graph("varlen_attention")
            tq, tk, tv = (g.tensor(n, (T, H, D), dt, **tensor_args) for n in "qkv")
            tcu = g.tensor("cu_seqlens", (self.cfg.seqs + 1,), eagle.i32)
            attrs = {"scale": 1.0 / math.sqrt(D), "causal": True, "generate_stats": True,
                     "max_seqlen_q": bound, "max_seqlen_kv": bound}
            outs = g.op("sdpa", {"q": tq, "k": tk, "v": tv, "cu_seqlens_q": tcu,
                                 "cu_seqlens_kv": tcu}, attrs)
            outs["o"].set_output(True).set_name("o")
            outs["stats"].set_output(True).set_name("stats")  # read by the backward
            # It reads cu_seqlens, so autotune leaves it to the list's order (planned_kernel).
            return eagle.planned_kernel(g, **planning(self.cfg))

        if self.cfg.max_seqlen != "switch":
            kernel = planned(self.max_len if self.cfg.max_seqlen == "exact" else 0)
            return lambda r, q, k, v, cu: named_outputs(kernel, kernel(q, k, v, cu))["o"]
        smallest = min(256, T)
        arms = [planned(b) for b in eagle.ragged.seqlen_buckets(T, smallest)]

        def switched(r, q, k, v, cu):
            o = r.empty((T, H, D), dt, "attention_o")
            stats = r.empty((T, H), eagle.f32, "attention_stats")
            bucket = K.seqlen_bucket(cu, T, smallest)
            r.switch_(bucket, [lambda a=a: a(q, k, v, cu, buffer=[o, stats]) for a in arms])
            return o

        return switched

    def eagle_graph(self):
        if self.cfg.packed_qkv:
            return self.eagle_packed_graph()
        T, dim, H, D = self.cfg.tokens, self.dim, self.heads, self.hd
        dt = EAGLE_DTYPES[self.dtype]
        proj_graph = eagle.op.Graph("proj")  # [T, dim] x [dim, dim]: q, k, v and out
        proj_graph.matmul(proj_graph.tensor("a", (T, dim), dt),
                          proj_graph.tensor("w", (dim, dim), dt)).set_output(True).set_name("c")
        proj = eagle.planned_kernel(proj_graph, **planning(self.cfg))
        attention = self.attention(strides=None)
        loss_graph = eagle.op.Graph("loss")
        loss_graph.op("reduction", {"x": loss_graph.tensor("y", (T, dim), dt)},
                      {"mode": "sum"})["y"].set_output(True).set_name("loss")
        loss_kernel = eagle.planned_kernel(loss_graph, **planning(self.cfg))
        x, cu = share(self.x), share(self.cu)
        ws = [share(self.wqkv[:, i * dim:(i + 1) * dim]) for i in range(3)] + [share(self.wo)]

        def step(r):
            wv = [r.param(n, w) for n, w in zip(("wq", "wk", "wv", "wo"), ws)]
            xv, cuv = r.param("x", x), r.param("cu_seqlens", cu)
            q, k, v = (proj(xv, w).reshape((T, H, D)) for w in wv[:3])
            o = attention(r, q, k, v, cuv)
            y = proj(o.reshape((T, dim)), wv[3])
            loss = loss_kernel(y)
            r.result([loss, *eagle.diff.gradients(r, [loss], wv)])

        return build_step(step, self.cfg)

    def eagle_packed_graph(self):
        """The default (torch's layout). One [T, dim] x [dim, 3 dim] projection; q, k and v are
        column slices of its output ([T, H, D] views, tokens 3 dim apart) that the attention
        reads where they lie; sdpa's backward writes their gradients as slices of one [T, 3 dim]
        array (not zero-filled: the slices cover it), so dwqkv is one product."""
        T, dim, H, D = self.cfg.tokens, self.dim, self.heads, self.hd
        dt = EAGLE_DTYPES[self.dtype]

        def projection(cols):
            g = eagle.op.Graph(f"proj{cols}")
            g.matmul(g.tensor("a", (T, dim), dt),
                     g.tensor("w", (dim, cols), dt)).set_output(True).set_name("c")
            return eagle.planned_kernel(g, **planning(self.cfg))

        qkv_proj, out_proj = projection(3 * dim), projection(dim)
        attention = self.attention(strides=(3 * dim, D, 1))
        loss_graph = eagle.op.Graph("loss")
        loss_graph.op("reduction", {"x": loss_graph.tensor("y", (T, dim), dt)},
                      {"mode": "sum"})["y"].set_output(True).set_name("loss")
        loss_kernel = eagle.planned_kernel(loss_graph, **planning(self.cfg))
        x, cu, wqkv, wo = share(self.x), share(self.cu), share(self.wqkv), share(self.wo)

        def step(r):
            wv = [r.param("wqkv", wqkv), r.param("wo", wo)]
            xv, cuv = r.param("x", x), r.param("cu_seqlens", cu)
            heads = qkv_proj(xv, wv[0]).reshape((T, 3 * H, D))
            q, k, v = (heads.slice(1, i * H, (i + 1) * H) for i in range(3))
            o = attention(r, q, k, v, cuv)
            loss = loss_kernel(out_proj(o.reshape((T, dim)), wv[1]))
            r.result([loss, *eagle.diff.gradients(r, [loss], wv)])

        return build_step(step, self.cfg)

    def compare(self, eagle_out, torch_out) -> dict:
        if self.cfg.packed_qkv:
            loss, dwqkv, dwo = (to_torch(a) for a in eagle_out)
            tloss, tqkv, two = torch_out
            return {"loss": rel_diff(loss, tloss), "dwqkv": rel_diff(dwqkv, tqkv),
                    "dwo": rel_diff(dwo, two)}
        loss, dq, dk, dv, dwo = (to_torch(a) for a in eagle_out)
        tloss, dwqkv, two = torch_out
        d = {"loss": rel_diff(loss, tloss), "dwo": rel_diff(dwo, two)}
        for i, (n, g) in enumerate(zip(("dwq", "dwk", "dwv"), (dq, dk, dv))):
            d[n] = rel_diff(g, dwqkv[:, i * self.dim:(i + 1) * self.dim])
        return d

    def shapes(self) -> dict:
        return {"tokens": self.cfg.tokens, "seqs": self.cfg.seqs, "dim": self.dim,
                "heads": self.heads, "head_dim": self.hd, "max_seqlen": self.max_len,
                "causal": True}


# ---- running a case -----------------------------------------------------------------------------


def check(case, cfg: Config) -> tuple[object, tuple, dict, float]:
    """Builds eagle's graph, runs eagle and torch once on the same data; returns the graph, torch's
    outputs, the differences and the largest one."""
    sync(cfg)  # torch made the data on its stream; eagle reads it on its own
    g = case.eagle_graph()
    eagle_out = g()
    torch_out = case.torch_step()
    sync(cfg)
    diffs = case.compare(eagle_out, torch_out)
    return g, torch_out, diffs, max(diffs.values())


@contextlib.contextmanager
def nvtx_range(cfg: Config, name: str):
    """An NVTX range around a timed loop on a GPU, so that a profiler can take one side alone
    (scripts/device_run.sh profile: ncu --nvtx-include "eagle_step/")."""
    if not cfg.cuda:
        yield
        return
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def write_trace(g, cfg: Config, stem: str, launches: int = 3) -> None:
    """A few replays of g with tracing on: their trace-event JSON into cfg.trace_dir/stem.json
    (tools/plot_trace.py draws one) and the last replay's nodes printed in order of start, each
    with its start and length (us): where the step's wall time goes, overlap included."""
    g.set_tracing(True)
    g(launches)
    sync(cfg)
    events = g.trace()
    g.set_tracing(False)
    os.makedirs(cfg.trace_dir, exist_ok=True)
    with open(os.path.join(cfg.trace_dir, stem + ".json"), "w") as f:
        f.write(eagle.chrome_trace_json(events, stem))
    last = max(e["launch"] for e in events)
    mine = sorted((e for e in events if e["launch"] == last), key=lambda e: e["begin_ns"])
    t0 = mine[0]["begin_ns"]
    span = (max(e["end_ns"] for e in mine) - t0) / 1e3
    busy = sum(e["end_ns"] - e["begin_ns"] for e in mine) / 1e3
    print(f"[{stem}] trace of replay {last}: {len(mine)} records over {span:.1f} us "
          f"(busy {busy:.1f} us summed over streams)", flush=True)
    for e in mine:
        print(f"  {(e['begin_ns'] - t0) / 1e3:8.1f} +{(e['end_ns'] - e['begin_ns']) / 1e3:6.1f} "
              f"t{e['thread']} {e['scope'] or '-'} | {e['label']} | {e['device_kernel'][:70]}",
              flush=True)


def run_case(name: str, case, cfg: Config, time_it: bool = True) -> CaseResult:
    g, torch_out, diffs, worst = check(case, cfg)
    tol = TOLERANCE[case.dtype]
    res = CaseResult(name, case.dim, case.dtype, case.shapes(), worst, tol, worst <= tol, diffs)
    res.eagle_nodes = len(g.nodes)
    detail = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
    print(f"[{name} dim {case.dim} {case.dtype}] check: max rel diff {worst:.2e} "
          f"(tolerance {tol:.0e}) {'ok' if res.ok else 'FAILED'}: {detail}; eagle's step graph "
          f"{res.eagle_nodes} nodes", flush=True)
    if not res.ok or not time_it:
        return res
    with nvtx_range(cfg, "eagle_step"):
        res.eagle_us = eagle_step_us(g, cfg)
    with nvtx_range(cfg, "torch_eager_step"):
        res.torch_eager_us = torch_step_us(case.torch_step, cfg)
    if cfg.cuda:
        graph = capture(case.torch_step)
        with nvtx_range(cfg, "torch_graph_step"):
            res.torch_graph_us = torch_step_us(graph.replay, cfg)
        res.speedup_vs_torch_graph = res.torch_graph_us / res.eagle_us
        res.goal = GOALS.get(case.dim)
    if cfg.trace_dir:
        write_trace(g, cfg, f"{name}-{case.dim}")
    line = (f"[{name} dim {case.dim} {case.dtype}] eagle one graph {res.eagle_us:.1f} us, "
            f"torch eager {res.torch_eager_us:.1f} us")
    if res.torch_graph_us is not None:
        goal = f"goal >= {res.goal:.1f}x" if res.goal else "no goal at this dim"
        line += (f", torch graph {res.torch_graph_us:.1f} us; eagle / torch graph = "
                 f"{res.eagle_us / res.torch_graph_us:.2f} (time), speedup torch graph / eagle "
                 f"= {res.speedup_vs_torch_graph:.2f}x ({goal})")
    else:
        line += (f"; torch eager / eagle = {res.torch_eager_us / res.eagle_us:.2f}x "
                 "(CPU: no torch graph, no goal)")
    print(line, flush=True)
    return res


# ---- case (c): the reverse of a capped loop -----------------------------------------------------


class Loop:
    def __init__(self, cfg: Config):
        self.cfg, self.dtype = cfg, cfg.loop_dtype
        R, dim, dt, dev = cfg.loop_rows, cfg.loop_dim, TORCH_DTYPES[self.dtype], cfg.device
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + 7)
        self.h0 = torch.randn(R, dim, generator=gen).to(dev, dt).requires_grad_()
        # small weights: h grows by about (1 + |W|/2) a turn, ~2x over 100 turns
        self.w = (0.01 * torch.randn(dim, dim, generator=gen) / math.sqrt(dim)).to(dev, dt)
        self.w.requires_grad_()

    def torch_step(self):
        h = self.h0
        for _ in range(self.cfg.turns):
            h = h + F.gelu(h @ self.w)
        loss = h.sum()
        return (loss.detach(), *torch.autograd.grad(loss, (self.h0, self.w)))  # as Mlp's

    def eagle_graph(self, mode: str):
        """mode: 'plain' (forward, record=False), 'forward' (the same forward with record=True:
        its tapes), 'reverse' (forward and reverse as one graph)."""
        R, dim, dt = self.cfg.loop_rows, self.cfg.loop_dim, EAGLE_DTYPES[self.dtype]
        og = eagle.op.Graph("turn")
        th, tw = og.tensor("h", (R, dim), dt), og.tensor("w", (dim, dim), dt)
        tg = og.pointwise("gelu", og.matmul(th, tw)).set_output(True).set_name("g")
        segments = eagle.planned_segments(og, **planning(self.cfg))  # matmul, then gelu
        loss_graph = eagle.op.Graph("loss")
        loss_graph.op("reduction", {"x": loss_graph.tensor("y", (R, dim), dt)},
                      {"mode": "sum"})["y"].set_output(True).set_name("loss")
        loss_kernel = eagle.planned_kernel(loss_graph, **planning(self.cfg))
        h0, w = share(self.h0), share(self.w)

        def step(r):
            h0v, wv = r.param("h0", h0), r.param("w", w)
            box = [K.copy(h0v, label="h")]

            def turn():
                values = {th.uid: box[0], tw.uid: wv}
                call_segments(segments, values)
                # h += g in place: a planned kernel may not write what it reads (its output
                # could race with its input), the standard axpy (per element) may
                K.axpy(values[tg.uid], box[0], 1.0, buffer=box[0])

            r.for_(self.cfg.turns, turn)
            loss = loss_kernel(box[0])
            if mode == "reverse":
                r.result([loss, *eagle.diff.gradients(r, [loss], [h0v, wv])])
            else:
                r.result(loss)

        device = eagle.Device(self.cfg.device)
        return eagle.Graph.record(step, record=mode != "plain").build(device)


def run_loop(cfg: Config, time_it: bool = True) -> dict:
    loop = Loop(cfg)
    sync(cfg)
    g = loop.eagle_graph("reverse")
    out = g()
    ref = loop.torch_step()
    sync(cfg)
    diffs = {n: rel_diff(to_torch(e), t) for n, e, t in zip(("loss", "dh0", "dw"), out, ref)}
    worst, tol = max(diffs.values()), TOLERANCE[loop.dtype]
    res = {"case": "loop", "dtype": loop.dtype, "turns": cfg.turns,
           "shapes": {"rows": cfg.loop_rows, "dim": cfg.loop_dim}, "max_rel_diff": worst,
           "tolerance": tol, "ok": worst <= tol, "diffs": diffs, "saved_bytes": g.saved_bytes}
    detail = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
    print(f"[loop {cfg.turns} turns, h [{cfg.loop_rows}, {cfg.loop_dim}] {loop.dtype}] check: "
          f"max rel diff {worst:.2e} (tolerance {tol:.0e}) {'ok' if res['ok'] else 'FAILED'}: "
          f"{detail}; tapes {g.saved_bytes} bytes", flush=True)
    if not res["ok"] or not time_it:
        return res
    plain_us = eagle_step_us(loop.eagle_graph("plain"), cfg)
    forward_us = eagle_step_us(loop.eagle_graph("forward"), cfg)
    both_us = eagle_step_us(g, cfg)
    n = cfg.turns
    res.update(plain_forward_us_per_turn=plain_us / n, forward_us_per_turn=forward_us / n,
               reverse_us_per_turn=(both_us - forward_us) / n, forward_reverse_us=both_us,
               reverse_over_forward=(both_us - forward_us) / forward_us)
    print(f"[loop] per turn: forward {forward_us / n:.2f} us (with tapes; "
          f"{plain_us / n:.2f} us recorded without record=True), reverse "
          f"{(both_us - forward_us) / n:.2f} us (forward+reverse {both_us / n:.2f} us "
          f"- forward); reverse / forward = {res['reverse_over_forward']:.2f}", flush=True)
    return res


def guarded(label: str, meta: dict, fn) -> dict:
    """fn() as a dict; an error (an engine declining a piece on this device, torch refusing a
    shape) fails this case only, so the other cases of the run still report."""
    try:
        out = fn()
        return asdict(out) if isinstance(out, CaseResult) else out
    except RuntimeError as e:  # eagle.Error is one
        print(f"[{label}] FAILED: {type(e).__name__}: {e}", flush=True)
        return {**meta, "ok": False, "error": f"{type(e).__name__}: {e}"}


def run(cfg: Config, time_it: bool = True) -> dict:
    """Every case of cfg: the check, then (time_it) the timings. Returns the JSON summary."""
    torch.manual_seed(cfg.seed)
    results = []
    for dim in cfg.dims:
        for name, make in (("mlp", Mlp), ("attention", Attention)):
            if name in cfg.cases:
                results.append(guarded(
                    f"{name} dim {dim} {cfg.dtype}", {"case": name, "dim": dim, "dtype": cfg.dtype},
                    lambda: run_case(name, make(cfg, dim, cfg.dtype), cfg, time_it)))
    if "loop" in cfg.cases:
        results.append(guarded("loop", {"case": "loop", "dtype": cfg.loop_dtype},
                               lambda: run_loop(cfg, time_it)))
    summary = {"device": cfg.device, "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name() if cfg.cuda else None,
               "config": asdict(cfg), "cases": results,
               "ok": all(r["ok"] for r in results)}
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cuda = eagle.cuda_available() and torch.cuda.is_available()
    p.add_argument("--device", default="cuda:0" if cuda else "cpu")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="small shapes (default on the CPU)")
    size.add_argument("--full", action="store_true", help="the issue's shapes (default on a GPU)")
    p.add_argument("--dims", help="comma-separated model dims (overrides the size's)")
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), help="mlp and attention dtype")
    p.add_argument("--cases", default="mlp,attention,loop")
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--iters", type=int)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check-only", action="store_true", help="the correctness checks, no timing")
    p.add_argument("--autotune", action="store_true",
                   help="plan eagle's pieces by timing their entries on the device first")
    p.add_argument("--fuse-epilogues", action="store_true",
                   help="the MLP's segments with matmul epilogues (PlanningOptions::fuse_epilogues)")
    p.add_argument("--prefer", default="",
                   help="comma-separated engine names eagle's planned pieces try first, e.g. "
                        "native_attention,native_attention_bwd or cudnn (PlanningOptions::prefer)")
    p.add_argument("--prioritize-chains", action="store_true",
                   help="build eagle's steps with node priorities: the calls later calls wait on "
                        "start before the graph's sinks (BuildOptions::prioritize_chains)")
    p.add_argument("--defer-side-roots", action="store_true",
                   help="build eagle's steps with the calls that wait on nothing started after "
                        "the heaviest of them (BuildOptions::defer_side_roots)")
    p.add_argument("--mlp-lse", action="store_true",
                   help="the MLP's loss keeps its rows' logsumexp (output_lse) for its backward, "
                        "which then waits for the forward loss's total")
    p.add_argument("--keep-memset-nodes", action="store_true",
                   help="keep the memset nodes of libraries' graphs (cuDNN's attention) as "
                        "memset nodes (BuildOptions::memsets_as_kernels off; on by default)")
    p.add_argument("--separate-qkv", action="store_true",
                   help="attention: eagle holds three [dim, dim] weights for q, k and v (three "
                        "projections, three weight gradients) instead of torch's one qkv weight "
                        "[dim, 3 dim] (the default: q, k and v strided slices of one "
                        "projection's output, read by the attention where they lie)")
    p.add_argument("--max-seqlen", choices=("capacity", "exact", "switch"), default="capacity",
                   help="attention: each sequence's bound in eagle's sdpa (cuDNN sizes its grids "
                        "by it): capacity (T, none given), exact (the batch's longest, as torch "
                        "is given), switch (a device switch over seqlen_buckets(T, 256))")
    p.add_argument("--json", help="write the summary here (for bench/RESULTS.md)")
    p.add_argument("--trace", metavar="DIR",
                   help="after timing, trace a few replays of each eagle step (CUPTI on a GPU): "
                        "DIR/<case>-<dim>.json and the last replay's nodes printed")
    a = p.parse_args()
    on_gpu = a.device.startswith("cuda")
    shapes = dict(FULL if (a.full or (on_gpu and not a.small)) else SMALL)
    if a.dims:
        shapes["dims"] = tuple(int(d) for d in a.dims.split(","))
    if a.dtype:
        shapes["dtype"] = a.dtype
    if a.iters:
        shapes["iters"] = a.iters
    cfg = Config(device=a.device, turns=a.turns, repeats=a.repeats, seed=a.seed,
                 cases=tuple(a.cases.split(",")), autotune=a.autotune,
                 fuse_epilogues=a.fuse_epilogues, trace_dir=a.trace,
                 prefer=tuple(n for n in a.prefer.split(",") if n),
                 prioritize_chains=a.prioritize_chains, defer_side_roots=a.defer_side_roots,
                 memsets_as_kernels=not a.keep_memset_nodes,
                 mlp_lse=a.mlp_lse,
                 packed_qkv=not a.separate_qkv, max_seqlen=a.max_seqlen, **shapes)
    print(f"eagle gradients benchmark on {cfg.device} (torch {torch.__version__}); "
          f"T {cfg.tokens}, N {cfg.seqs}, dims {cfg.dims}, {cfg.dtype}"
          f"{'; eagle autotuned' if cfg.autotune else ''}"
          f"{'; matmul epilogues fused' if cfg.fuse_epilogues else ''}"
          f"{'; engines preferred: ' + ','.join(cfg.prefer) if cfg.prefer else ''}"
          f"{'; chains prioritized' if cfg.prioritize_chains else ''}"
          f"{'; side roots deferred' if cfg.defer_side_roots else ''}"
          f"{'; memset nodes kept' if not cfg.memsets_as_kernels else ''}"
          f"{'; mlp loss keeps lse' if cfg.mlp_lse else ''}"
          f"{'; attention with three q, k, v weights' if not cfg.packed_qkv else ''}"
          f"{'; attention max_seqlen ' + cfg.max_seqlen if cfg.max_seqlen != 'capacity' else ''}",
          flush=True)
    if cfg.cuda and torch_varlen_attn() is None:
        print("note: this torch has no torch.nn.attention.varlen; torch's attention runs per "
              "sequence (scaled_dot_product_attention)", flush=True)
    summary = run(cfg, time_it=not a.check_only)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
