#!/usr/bin/env python3
"""The torch peer of `eagle train` (issue 13's training benchmark): loads what
`eagle train --export DIR` wrote, builds the same model in torch with the same initial params,
runs the same batches with the same AdamW, and prints its per-step loss beside eagle's (the max
relative difference) and its step time beside eagle's (the speedup torch / eagle, and the goal:
eagle >= 1.3x faster than the torch graph).

The model is what DIR/config.json's "semantics" says (tools/train/export.cpp writes it from
tools/train/model.cpp): projections y = x @ W with W [in, out], rms_norm eps 1e-5 with a gain,
q/k/v and the attention output zeroed on rows >= L = cu_seqlens[N] (a gradient barrier too),
causal softmax attention per sequence with scale 1/sqrt(head_dim) in the export's attention dtype,
MLP silu, an untied LM head, cross entropy (labels -100 give 0) averaged over the loss mask
(sum / max(sum(mask), 1)); AdamW (torch.optim.AdamW: decoupled decay p *= 1 - lr wd, bias
corrections 1 - beta^t; eagle's kernel/optim.hpp update is the same formula) on every param.

Modes (--modes):
- eager: one forward, backward and optimizer step per batch.
- graph (CUDA only): the step captured once with torch.cuda.graph (static input buffers, warm-up
  on a side stream, params and optimizer state restored to their initial values after it), then
  per step: copy_ of the batch into the static buffers, replay, the loss read.

--dtype: what the projections (matmuls) compute in: f32, or bf16 (operands cast to bf16, the
product rounded to bf16 and returned as f32; params, moments, norms and the residual stream stay
f32). Default: the export's matmul_dtype (`eagle train --matmul-dtype`), so both sides match.
Attention always computes in the export's attention_dtype (f32 on the CPU, bf16 on a GPU).

--attention: varlen (torch.nn.attention.varlen.varlen_attn, CUDA, 16-bit), loop (SDPA per
sequence, reading cu_seqlens on the host: eager only), dense (SDPA over all T rows with a
same-sequence causal mask built on the device: graph-safe, any dtype, O(T^2) memory). auto:
varlen on CUDA with a 16-bit attention dtype; else loop for eager and dense for graph.

Timing: per step, the wall time (perf_counter) of the batch copy, the step and the loss read
(what eagle's step_seconds measures), and on CUDA the device time between CUDA events around the
copy and the step. Medians over steps 2.. (step 1 pays first-touch costs in both). The speedup is
torch's median wall time / eagle's (from the export's log.json, when the run was timed on the
same machine).

Needs numpy and torch. --json OUT writes everything printed."""
import argparse
import inspect
import json
import math
import pathlib
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

GOAL = 1.3  # eagle's step >= 1.3x faster than the torch graph's (issue 13)
BATCH_FIELDS = ("input_ids", "labels", "loss_mask", "cu_seqlens")


# ------------------------------------------------------------------------------ the export

def load_export(root):
    root = pathlib.Path(root)
    config = json.loads((root / "config.json").read_text())
    if config.get("format") != "eagle-train-export/1":
        raise SystemExit(f"{root}/config.json: unknown format {config.get('format')!r}")
    params = []
    for p in config["params"]:
        a = np.load(root / p["file"])
        if list(a.shape) != p["shape"] or a.dtype != np.float32:
            raise SystemExit(f"{p['file']}: {a.dtype}{list(a.shape)}, config says f32{p['shape']}")
        params.append((p["name"], a))
    batches = []
    step = 1
    while (root / f"batches/step_{step:05d}.input_ids.npy").exists():
        batches.append({f: np.load(root / f"batches/step_{step:05d}.{f}.npy") for f in BATCH_FIELDS})
        step += 1
    log_path = root / "log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else None
    return config, params, batches, log


# ------------------------------------------------------------------------------ the model

def torch_dtype(name):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]


def varlen_causal_kwargs():
    """varlen_attn's causal flag: is_causal=True (torch 2.9-2.11) or window_size=(-1, 0)."""
    from torch.nn.attention.varlen import varlen_attn

    params = inspect.signature(varlen_attn).parameters
    if "is_causal" in params:
        return {"is_causal": True}
    if "window_size" in params:
        return {"window_size": (-1, 0)}
    raise SystemExit("varlen_attn takes neither is_causal nor window_size: cannot ask for causal")


class Peer:
    """The model of config.json over `params` (name -> f32 leaf tensor on the device)."""

    def __init__(self, config, params, matmul_dtype, attention):
        m = config["model"]
        self.dim, self.heads, self.head_dim = m["dim"], m["heads"], m["head_dim"]
        self.layers, self.eps, self.scale = m["layers"], m["rms_norm_eps"], m["attention_scale"]
        self.attention_dtype = torch_dtype(m["attention_dtype"])
        self.ignore_index = m["ignore_index"]
        self.p = params
        self.matmul_dtype = matmul_dtype
        self.attention = attention
        self.max_seqlen = None  # set per batch for varlen (eager: the real longest; graph: T)
        if attention == "varlen":
            from torch.nn.attention.varlen import varlen_attn

            self.varlen_attn = varlen_attn
            self.causal = varlen_causal_kwargs()

    def mm(self, x, w):
        if self.matmul_dtype == torch.float32:
            return x @ w
        return (x.to(self.matmul_dtype) @ w.to(self.matmul_dtype)).float()

    def rms_norm(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * g

    def attend(self, q, k, v, cu, active):
        t = q.shape[0]
        ad = self.attention_dtype
        q, k, v = (a.view(t, self.heads, self.head_dim).to(ad) for a in (q, k, v))
        if self.attention == "varlen":
            o = self.varlen_attn(q, k, v, cu, cu, self.max_seqlen, self.max_seqlen,
                                 scale=self.scale, **self.causal)
        elif self.attention == "loop":
            bounds = cu.tolist()  # a host read: eager only
            pieces = []
            for s, e in zip(bounds[:-1], bounds[1:]):
                if e > s:
                    y = F.scaled_dot_product_attention(
                        q[s:e].transpose(0, 1), k[s:e].transpose(0, 1), v[s:e].transpose(0, 1),
                        is_causal=True, scale=self.scale)
                    pieces.append(y.transpose(0, 1))
            pieces.append(q.new_zeros(t - bounds[-1], self.heads, self.head_dim))
            o = torch.cat(pieces)
        else:  # dense: one masked SDPA over all rows; padding rows see only themselves
            rows = torch.arange(t, device=q.device, dtype=cu.dtype)
            doc = torch.searchsorted(cu[1:].contiguous(), rows, right=True)  # sequence of row
            doc = torch.where(active[:, 0], doc, -1 - rows.long())  # padding: a sequence alone
            mask = (doc[:, None] == doc[None, :]) & (rows[None, :] <= rows[:, None])
            o = F.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask,
                scale=self.scale).transpose(0, 1)
        return o.float().reshape(t, self.dim)

    def loss(self, ids, labels, loss_mask, cu):
        p = self.p
        t = ids.shape[0]
        active = (torch.arange(t, device=ids.device, dtype=cu.dtype) < cu[-1])[:, None]
        zero = torch.zeros((), device=ids.device)
        x = F.embedding(ids.long(), p["embed"])
        for l in range(self.layers):
            w = lambda name: p[f"l{l}.{name}"]  # noqa: E731
            h = self.rms_norm(x, w("g1"))
            q, k, v = (torch.where(active, self.mm(h, w(n)), zero) for n in ("wq", "wk", "wv"))
            o = self.attend(q, k, v, cu, active)
            x1 = x + self.mm(torch.where(active, o, zero), w("wo"))
            x = x1 + self.mm(F.silu(self.mm(self.rms_norm(x1, w("g2")), w("w1"))), w("w2"))
        logits = self.mm(self.rms_norm(x, p["gf"]), p["head"])
        ce = F.cross_entropy(logits, labels.long(), reduction="none",
                             ignore_index=self.ignore_index)
        return (ce * loss_mask).sum() / loss_mask.sum().clamp_min(1.0)


# ------------------------------------------------------------------------------ running

class Runner:
    """Params, optimizer and static batch buffers on `device`; one step = copy, step, loss."""

    def __init__(self, config, params, batches, device, matmul_dtype, attention, capturable):
        self.device = device
        self.cuda = device.type == "cuda"
        self.initial = [(n, torch.from_numpy(a)) for n, a in params]
        self.params = {n: a.to(device).requires_grad_(True) for n, a in self.initial}
        self.model = Peer(config, self.params, matmul_dtype, attention)
        a = config["adamw"]
        self.opt = torch.optim.AdamW(
            list(self.params.values()), lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
            weight_decay=a["weight_decay"], capturable=capturable)
        # Host batches (pinned on CUDA: the copies run asynchronously, as eagle's staging).
        self.host = []
        for b in batches:
            hb = {f: torch.from_numpy(b[f]) for f in BATCH_FIELDS}
            if self.cuda:
                hb = {f: v.pin_memory() for f, v in hb.items()}
            self.host.append(hb)
        self.static = {f: v.to(device).clone() for f, v in self.host[0].items()}
        self.capacity = int(self.static["input_ids"].shape[0])

    def step_body(self):
        s = self.static
        # Inside the capture the grads are None already: backward allocates them in the
        # graph's pool, at the addresses every replay writes.
        self.opt.zero_grad(set_to_none=True)
        loss = self.model.loss(s["input_ids"], s["labels"], s["loss_mask"], s["cu_seqlens"])
        loss.backward()
        self.opt.step()
        return loss

    def load(self, i):
        for f in BATCH_FIELDS:
            self.static[f].copy_(self.host[i][f], non_blocking=True)

    def restore(self):
        """Params back to their initial values, moments and step counters to zero."""
        with torch.no_grad():
            for n, a in self.initial:
                self.params[n].copy_(a)
            for st in self.opt.state.values():
                for key in ("exp_avg", "exp_avg_sq"):
                    st[key].zero_()
                if torch.is_tensor(st["step"]):
                    st["step"].zero_()
                else:
                    st["step"] = 0.0

    def capture(self, warmup=3):
        """The seed's capture: warm-up on a side stream, one capture; then the initial state."""
        self.load(0)
        self.model.max_seqlen = self.capacity  # the worst case: the graph serves every batch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.step_body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.step_body()
        torch.cuda.synchronize()
        self.restore()
        torch.cuda.synchronize()

    def run(self, mode, steps):
        losses, wall, device_ms = [], [], []
        if mode == "graph":
            self.capture()
        for i in range(steps):
            if self.cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            if self.cuda:
                start.record()
            self.load(i)
            if mode == "graph":
                self.graph.replay()
                loss = self.static_loss
            else:
                if self.model.attention == "varlen":
                    cu = self.host[i]["cu_seqlens"]
                    self.model.max_seqlen = max(1, int((cu[1:] - cu[:-1]).max()))
                loss = self.step_body()
            if self.cuda:
                stop.record()
            value = float(loss.item())
            wall.append(time.perf_counter() - t0)
            if self.cuda:
                device_ms.append(start.elapsed_time(stop))
            losses.append(value)
        return losses, wall, device_ms


def median_after_first(xs):
    xs = xs[1:] if len(xs) > 1 else xs
    return statistics.median(xs) if xs else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", help="the folder `eagle train --export` wrote")
    ap.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when present)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default=None,
                    help="what the matmuls compute in (default: the export's matmul_dtype)")
    ap.add_argument("--modes", default=None, help="eager,graph (default: eager; +graph on CUDA)")
    ap.add_argument("--attention", choices=("auto", "varlen", "loop", "dense"), default="auto")
    ap.add_argument("--steps", type=int, default=0, help="run the first N batches (0: all)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--rtol", type=float, default=0.0,
                    help="exit 1 when a mode's max relative loss difference exceeds this")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    config, params, batches, log = load_export(args.export)
    if not batches:
        raise SystemExit(f"{args.export}: no batches/step_00001.*.npy")
    steps = min(len(batches), args.steps) if args.steps > 0 else len(batches)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    # Like for like by default: the export's matmul_dtype (what eagle's projections multiply in).
    dtype_name = args.dtype or config["model"].get("matmul_dtype", "f32")
    modes = (args.modes or ("eager,graph" if cuda else "eager")).split(",")
    if "graph" in modes and not cuda:
        raise SystemExit("--modes graph needs CUDA (torch.cuda.graph)")
    attention_dtype = config["model"]["attention_dtype"]
    eagle_loss = log["loss"][:steps] if log else None
    eagle_ms = median_after_first(log["step_seconds"][:steps]) * 1e3 if log else None

    m = config["model"]
    print(f"train_step.py: torch {torch.__version__} on {device}; export {args.export} "
          f"(eagle on {config['device']}): vocab {m['vocab']}, dim {m['dim']}, heads {m['heads']}, "
          f"layers {m['layers']}, mlp {m['mlp']}, T={config['capacity']['tokens']}, "
          f"N={config['capacity']['slots']}, {steps} steps; matmuls {dtype_name}, "
          f"attention {attention_dtype}")
    results = {"torch": torch.__version__, "device": str(device), "dtype": dtype_name,
               "attention_dtype": attention_dtype, "steps": steps, "eagle_device": config["device"],
               "eagle_loss": eagle_loss, "eagle_median_step_ms": eagle_ms, "modes": {},
               "goal": f"eagle's step >= {GOAL}x faster than the torch graph's"}
    failed = False
    for mode in modes:
        attention = args.attention
        if attention == "auto":
            sixteen = attention_dtype in ("bf16", "f16")
            attention = "varlen" if cuda and sixteen else ("dense" if mode == "graph" else "loop")
        if mode == "graph" and attention == "loop":
            raise SystemExit("--attention loop reads cu_seqlens on the host: not for --modes graph")
        torch.manual_seed(0)
        runner = Runner(config, params, batches, device, torch_dtype(dtype_name), attention,
                        capturable=(mode == "graph"))
        losses, wall, device_ms = runner.run(mode, steps)
        r = {"attention": attention, "loss": losses, "step_wall_ms": [w * 1e3 for w in wall],
             "median_wall_ms": median_after_first(wall) * 1e3}
        if device_ms:
            r["step_device_ms"] = device_ms
            r["median_device_ms"] = median_after_first(device_ms)
        print(f"\n== {mode} (attention {attention})")
        if eagle_loss:
            rel = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, eagle_loss)]
            r["rel_diff"] = rel
            r["max_rel_diff"] = max(rel)
            print(f"{'step':>5} {'eagle loss':>12} {'torch loss':>12} {'rel diff':>10}")
            for i, (a, b, d) in enumerate(zip(eagle_loss, losses, rel)):
                print(f"{i + 1:5d} {a:12.6f} {b:12.6f} {d:10.2e}")
            print(f"max relative difference {r['max_rel_diff']:.3e}")
            if args.rtol > 0 and r["max_rel_diff"] > args.rtol:
                print(f"FAIL: above --rtol {args.rtol}")
                failed = True
        else:
            print("(no log.json in the export: torch's losses alone)", losses)
        line = f"torch {mode}: median step {r['median_wall_ms']:.3f} ms wall"
        if device_ms:
            line += f", {r['median_device_ms']:.3f} ms between CUDA events"
        if eagle_ms:
            r["speedup_eagle_vs_torch"] = r["median_wall_ms"] / eagle_ms
            line += (f"; eagle {eagle_ms:.3f} ms: eagle is {r['speedup_eagle_vs_torch']:.2f}x "
                     f"torch {mode}'s speed")
            if mode == "graph":
                ok = r["speedup_eagle_vs_torch"] >= GOAL
                line += f" (goal >= {GOAL}x: {'met' if ok else 'not met'})"
            if config["device"].split(":")[0] != device.type:
                line += f" [eagle ran on {config['device']}: not comparable]"
        print(line)
        results["modes"][mode] = r
        del runner  # one mode's params, moments and graph pool at a time
        if cuda:
            torch.cuda.empty_cache()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
