"""eagle's kernels inside PyTorch: custom operators for varlen attention and the gated delta
rules (gdn, kda), forward and backward, on the tensors torch users already hold (THD packing
with cu_seqlens).

Each operator is a ``torch.library`` custom op with a fake (meta) implementation, so it traces
under ``torch.compile`` and captures under ``torch.cuda.graph``; autograd calls the backward
operator. A call plans an eagle op graph for its shapes once (cached), then executes the built
plan on torch's current stream with the tensors shared through DLPack: no copy, no host sync.
(Capture under torch.cuda.graph after one warm-up call per shape, as for any library that
allocates its workspace on first use.)

Padding rows (rows past cu_seqlens[-1] of a batch captured at capacity) of every output and
gradient are exactly 0; FlashAttention leaves them unspecified. eagle zeroes them so that a
capacity-sized batch never leaks a NaN into a weight gradient.

``varlen_attn`` follows torch's and FlashAttention's varlen signature (max_seqlen is accepted
and not needed); ``chunk_gated_delta_rule`` and ``chunk_kda`` follow fla's.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from . import _eagle

Tensor = torch.Tensor

_DTYPES = {
    torch.float64: _eagle.DType.f64,
    torch.float32: _eagle.DType.f32,
    torch.float16: _eagle.DType.f16,
    torch.bfloat16: _eagle.DType.bf16,
    torch.int64: _eagle.DType.i64,
    torch.int32: _eagle.DType.i32,
    torch.uint8: _eagle.DType.u8,
    torch.bool: _eagle.DType.bool_,
}
_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}

_streams: dict = {}


def _device(t: Tensor) -> _eagle.Device:
    if t.device.type == "cpu":
        return _eagle.Device("cpu")
    if t.device.type == "cuda":
        return _eagle.Device(f"cuda:{t.device.index or 0}")
    raise _eagle.NotSupported(f"eagle.torch: tensors on {t.device} (cpu and cuda only)")


def _stream(t: Tensor, device: _eagle.Device):
    """torch's current stream as an eagle Stream (borrowed; one per raw stream, so the library
    handles eagle binds to it are made once)."""
    if device.is_cpu:
        return None
    handle = torch.cuda.current_stream(t.device).cuda_stream
    key = (device.ordinal, handle)
    s = _streams.get(key)
    if s is None:
        s = _streams[key] = _eagle.Stream.borrow(device, handle)
    return s


class _Planned:
    """One eagle op graph of one op, planned and built for one set of shapes and attributes."""

    def __init__(self, op: str, inputs: dict, attrs: dict, outputs: tuple, device):
        og = _eagle.op.Graph(op)
        self.inputs = {
            name: og.tensor(name, tuple(t.shape), _dtype(name, t)) for name, t in inputs.items()
        }
        outs = og.op(op, self.inputs, attrs)
        self.outputs = {}
        for port in outputs:
            if port in outs:
                self.outputs[port] = outs[port].set_output(True).set_name(port)
        self.plans = _eagle.plan(og, device)
        self.plans.build_plans()
        self.device = device

    def __call__(self, like: Tensor, inputs: dict) -> dict:
        outs = {
            port: torch.empty(t.dims, dtype=_TORCH_DTYPES[t.dtype], device=like.device)
            for port, t in self.outputs.items()
        }
        operands = {self.inputs[name]: t for name, t in inputs.items()}
        for port, t in outs.items():
            operands[self.outputs[port]] = t
        self.plans.execute(operands, _stream(like, self.device))
        return outs


_plans: dict = {}


def _dtype(name: str, t: Tensor):
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise _eagle.InvalidArgument(f"eagle.torch: {name} has dtype {t.dtype}, not one eagle takes")


def _run(op: str, inputs: dict, attrs: dict, outputs: tuple) -> dict:
    """Runs op on torch tensors through a plan cached per (op, shapes, dtypes, device, attrs)."""
    # detach: torch refuses to export a tensor that requires grad (the op is below autograd here)
    inputs = {k: v.detach().contiguous() for k, v in inputs.items() if v is not None}
    like = next(iter(inputs.values()))
    device = _device(like)
    key = (op, device.kind, device.ordinal, tuple(sorted(attrs.items())), outputs,
           tuple((k, tuple(v.shape), v.dtype) for k, v in inputs.items()))
    planned = _plans.get(key)
    if planned is None:
        planned = _plans[key] = _Planned(op, inputs, attrs, outputs, device)
    return planned(like, inputs)


def _zero_padding(cu_seqlens: Tensor, *tensors: Tensor) -> None:
    """Sets the padding rows (row >= cu_seqlens[-1]) of eagle's fresh outputs to 0, on the device
    (no host read): eagle's kernels leave them unspecified, and a NaN there would reach a weight
    gradient through the projection that produced the rows."""
    rows = tensors[0].shape[0]
    active = torch.arange(rows, device=tensors[0].device) < cu_seqlens[-1]
    for t in tensors:
        t.masked_fill_(~active.view(-1, *([1] * (t.dim() - 1))), 0)


# ---- varlen attention ------------------------------------------------------------------------


@torch.library.custom_op("eagle::varlen_attention", mutates_args=())
def varlen_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                     scale: float, causal: bool) -> tuple[Tensor, Tensor]:
    """softmax(scale q k^T) v per sequence of a packed batch: q [Tq, H, D], k [Tk, Hk, D],
    v [Tk, Hk, Dv], cu_seqlens [B+1] i32 -> (o [Tq, H, Dv], lse [Tq, H] f32)."""
    out = _run("sdpa", {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q,
                        "cu_seqlens_kv": cu_seqlens_k},
               {"scale": float(scale), "causal": bool(causal), "generate_stats": True},
               ("o", "stats"))
    _zero_padding(cu_seqlens_q, out["o"], out["stats"])
    return out["o"], out["stats"]


@varlen_attention.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, scale, causal):
    return (q.new_empty((*q.shape[:-1], v.shape[-1])),
            q.new_empty(q.shape[:-1], dtype=torch.float32))


@torch.library.custom_op("eagle::varlen_attention_bwd", mutates_args=())
def varlen_attention_bwd(q: Tensor, k: Tensor, v: Tensor, o: Tensor, d_o: Tensor, lse: Tensor,
                         cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, scale: float,
                         causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of varlen_attention w.r.t. q, k, v from its o and lse."""
    out = _run("sdpa_bwd", {"q": q, "k": k, "v": v, "o": o, "d_o": d_o, "stats": lse,
                            "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_kv": cu_seqlens_k},
               {"scale": float(scale), "causal": bool(causal)}, ("dq", "dk", "dv"))
    _zero_padding(cu_seqlens_q, out["dq"])
    _zero_padding(cu_seqlens_k, out["dk"], out["dv"])
    return out["dq"], out["dk"], out["dv"]


@varlen_attention_bwd.register_fake
def _(q, k, v, o, d_o, lse, cu_seqlens_q, cu_seqlens_k, scale, causal):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _attention_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, scale, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
    ctx.scale, ctx.causal = scale, causal
    ctx.mark_non_differentiable(lse)


def _attention_backward(ctx, d_o, d_lse):
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = varlen_attention_bwd(q, k, v, o, d_o.contiguous(), lse, cu_q, cu_k, ctx.scale,
                                      ctx.causal)
    return dq, dk, dv, None, None, None, None


varlen_attention.register_autograd(_attention_backward, setup_context=_attention_setup)


def varlen_attn(q: Tensor, k: Tensor, v: Tensor, cu_seq_q: Tensor, cu_seq_k: Tensor,
                max_q: Optional[int] = None, max_k: Optional[int] = None, *,
                scale: Optional[float] = None, is_causal: bool = False) -> Tensor:
    """Attention over a packed (THD) batch, torch's varlen_attn signature: q [T, H, D], k and
    v [T, Hk, D], cu_seq_q / cu_seq_k [B+1] int32 -> out [T, H, D]. max_q and max_k are
    accepted for compatibility and unused (eagle's kernels are sized by the capacity)."""
    del max_q, max_k
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return varlen_attention(q, k, v, cu_seq_q, cu_seq_k, scale, is_causal)[0]


# ---- gated delta rules (gdn: scalar decay per token and head; kda: decay per key channel) ----


def _delta_attrs(scale, use_qk_l2norm, output_final_state):
    return {"scale": float(scale), "use_qk_l2norm": bool(use_qk_l2norm),
            "output_final_state": bool(output_final_state)}


def _define_delta_rule(op: str, g_doc: str):
    """Registers eagle::<op> and eagle::<op>_bwd with their fakes and autograd."""

    @torch.library.custom_op(f"eagle::{op}", mutates_args=())
    def forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor,
                initial_state: Optional[Tensor], scale: float, use_qk_l2norm: bool,
                output_final_state: bool) -> tuple[Tensor, Tensor]:
        out = _run(op, {"q": q, "k": k, "v": v, "g": g, "beta": beta, "cu_seqlens": cu_seqlens,
                        "initial_state": initial_state},
                   _delta_attrs(scale, use_qk_l2norm, output_final_state), ("o", "final_state"))
        _zero_padding(cu_seqlens, out["o"])
        final = out.get("final_state")
        return out["o"], final if final is not None else q.new_empty((0,), dtype=torch.float32)

    forward.__doc__ = (f"fla's chunked {op} on a packed batch: q, k [T, H, K], v [T, HV, V], "
                       f"g {g_doc}, beta [T, HV], cu_seqlens [B+1] i32, initial_state "
                       "[B, HV, K, V] or None -> (o [T, HV, V], final_state [B, HV, K, V] f32, "
                       "empty unless output_final_state).")

    @forward.register_fake
    def _(q, k, v, g, beta, cu_seqlens, initial_state, scale, use_qk_l2norm, output_final_state):
        b = cu_seqlens.shape[0] - 1
        final = (q.new_empty((b, v.shape[1], q.shape[2], v.shape[2]), dtype=torch.float32)
                 if output_final_state else q.new_empty((0,), dtype=torch.float32))
        return v.new_empty(v.shape), final

    @torch.library.custom_op(f"eagle::{op}_bwd", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor,
                    initial_state: Optional[Tensor], d_o: Tensor,
                    d_final_state: Optional[Tensor], scale: float,
                    use_qk_l2norm: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        attrs = {"scale": float(scale), "use_qk_l2norm": bool(use_qk_l2norm)}
        out = _run(f"{op}_bwd", {"q": q, "k": k, "v": v, "g": g, "beta": beta,
                                 "cu_seqlens": cu_seqlens, "initial_state": initial_state,
                                 "d_o": d_o, "d_final_state": d_final_state},
                   attrs, ("dq", "dk", "dv", "dg", "dbeta", "d_initial_state"))
        _zero_padding(cu_seqlens, *(out[p] for p in ("dq", "dk", "dv", "dg", "dbeta")))
        d_init = out.get("d_initial_state")
        return (out["dq"], out["dk"], out["dv"], out["dg"], out["dbeta"],
                d_init if d_init is not None else q.new_empty((0,), dtype=torch.float32))

    @backward_op.register_fake
    def _(q, k, v, g, beta, cu_seqlens, initial_state, d_o, d_final_state, scale, use_qk_l2norm):
        d_init = (torch.empty_like(initial_state, dtype=torch.float32) if initial_state is not None
                  else q.new_empty((0,), dtype=torch.float32))
        return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
                torch.empty_like(g, dtype=torch.float32), torch.empty_like(beta), d_init)

    def setup(ctx, inputs, output):
        q, k, v, g, beta, cu, init, scale, l2, want_final = inputs
        ctx.save_for_backward(q, k, v, g, beta, cu, init)
        ctx.scale, ctx.l2, ctx.want_final = scale, l2, want_final

    def backward(ctx, d_o, d_final):
        q, k, v, g, beta, cu, init = ctx.saved_tensors
        d_final = d_final if ctx.want_final and d_final is not None else None
        dq, dk, dv, dg, dbeta, d_init = backward_op(q, k, v, g, beta, cu, init, d_o.contiguous(),
                                                     d_final, ctx.scale, ctx.l2)
        return (dq, dk, dv, dg.to(g.dtype), dbeta, None,
                d_init if init is not None else None, None, None, None)

    forward.register_autograd(backward, setup_context=setup)
    return forward, backward_op


gdn, gdn_bwd = _define_delta_rule("gdn", "[T, HV] (log space)")
kda, kda_bwd = _define_delta_rule("kda", "[T, HV, K] (log space)")


def _fla_call(op, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
              use_qk_l2norm_in_kernel):
    batched = q.dim() == 4
    if batched:
        if q.shape[0] != 1:
            raise _eagle.InvalidArgument(
                f"{op}: with cu_seqlens the batch dimension must be 1 (fla's packed layout), "
                f"got q {tuple(q.shape)}")
        q, k, v, g, beta = (t[0] for t in (q, k, v, g, beta))
    if cu_seqlens is None:
        cu_seqlens = torch.tensor([0, q.shape[0]], dtype=torch.int32, device=q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    o, final = op(q, k, v, g, beta, cu_seqlens.to(torch.int32), initial_state, scale,
                  use_qk_l2norm_in_kernel, output_final_state)
    return (o.unsqueeze(0) if batched else o), (final if output_final_state else None)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False, cu_seqlens=None,
                           use_qk_l2norm_in_kernel=False):
    """fla's ``chunk_gated_delta_rule`` signature ([1, T, H, K] with cu_seqlens, or [T, H, K]):
    returns (o, final_state or None)."""
    return _fla_call(gdn, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                     use_qk_l2norm_in_kernel)


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    """fla's ``chunk_kda`` signature (g per key channel): returns (o, final_state or None)."""
    return _fla_call(kda, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                     use_qk_l2norm_in_kernel)


def clear_plan_cache() -> None:
    """Drops the plans made so far (each is made again on its next call)."""
    _plans.clear()
