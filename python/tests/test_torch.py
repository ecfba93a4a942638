"""eagle.torch: the custom operators against torch's own attention and a naive delta-rule
recurrence, under autograd, torch.library.opcheck and torch.compile."""

import math

import pytest

torch = pytest.importorskip("torch")
import eagle  # noqa: E402
import eagle.torch as et  # noqa: E402


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def packed(gen, lengths, tail, *shape, dtype=torch.float64):
    """A [T, *shape] tensor for sequences of `lengths` plus `tail` padding rows set to NaN."""
    active = sum(lengths)
    x = torch.randn(active + tail, *shape, generator=gen, dtype=dtype)
    x[active:] = float("nan")
    return x


def cu_seqlens(lengths):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)


def reference_attention(q, k, v, lengths, causal, scale):
    outs, start = [], 0
    group = q.shape[1] // k.shape[1]
    for n in lengths:
        qs, ks, vs = (t[start:start + n].transpose(0, 1) for t in (q, k, v))
        ks, vs = ks.repeat_interleave(group, 0), vs.repeat_interleave(group, 0)
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, is_causal=causal, scale=scale).transpose(0, 1))
        start += n
    return torch.cat(outs)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads", [(2, 2), (4, 1)])
def test_varlen_attention_matches_torch_with_nan_padding(gen, causal, heads):
    lengths, tail, (h, hk), d = [3, 1, 7], 2, heads, 8
    q = packed(gen, lengths, tail, h, d).requires_grad_()
    k = packed(gen, lengths, tail, hk, d).requires_grad_()
    v = packed(gen, lengths, tail, hk, d).requires_grad_()
    cu = cu_seqlens(lengths)
    active = sum(lengths)
    o = et.varlen_attn(q, k, v, cu, cu, max(lengths), max(lengths), is_causal=causal)
    ref = reference_attention(q, k, v, lengths, causal, 1 / math.sqrt(d))
    torch.testing.assert_close(o[:active], ref, rtol=1e-10, atol=1e-10)
    assert (o[active:] == 0).all()  # padding rows: exactly 0 (inputs there are NaN)
    w = torch.randn(o.shape, generator=gen, dtype=torch.float64)
    w[active:] = float("nan")  # the cotangent of padding rows is never read
    (o * w).sum().backward()
    w = w[:active]
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    (ref * w).sum().backward()
    # the backward reads the forward's logsumexp, which is f32 (as cuDNN's and FlashAttention's
    # stats are): gradients agree to f32 rounding of lse, not to f64's
    for got, want in zip(grads, (q.grad, k.grad, v.grad)):
        assert torch.isfinite(got[:active]).all() and (got[active:] == 0).all()
        torch.testing.assert_close(got[:active], want[:active], rtol=1e-5, atol=1e-6)


def naive_delta_rule(q, k, v, g, beta, lengths, scale, l2norm, per_channel, initial=None):
    """fla's recurrence token by token, independently of eagle: per head h, S [K, V];
    S <- exp(g_t) S (g per key channel for kda); S <- S + k (beta (v - S^T k))^T; o = scale S^T q."""
    if l2norm:  # fla's l2norm: x / sqrt(sum x^2 + 1e-6)
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    hv, kd, vd = v.shape[1], q.shape[2], v.shape[2]
    group = hv // q.shape[1]
    outs, finals, start = [], [], 0
    for b, n in enumerate(lengths):
        S = [initial[b, h].clone() if initial is not None else
             torch.zeros(kd, vd, dtype=q.dtype) for h in range(hv)]
        for t in range(start, start + n):
            row = []
            for h in range(hv):
                qh, kh = q[t, h // group], k[t, h // group]
                decay = torch.exp(g[t, h])
                S[h] = (decay[:, None] if per_channel else decay) * S[h]
                S[h] = S[h] + torch.outer(kh, beta[t, h] * (v[t, h] - S[h].T @ kh))
                row.append(scale * S[h].T @ qh)
            outs.append(torch.stack(row))
        finals.append(torch.stack(S))
        start += n
    return torch.stack(outs), torch.stack(finals)


@pytest.mark.parametrize("op", ["gdn", "kda"])
@pytest.mark.parametrize("l2norm", [False, True])
def test_delta_rules_match_the_recurrence_forward_and_backward(gen, op, l2norm):
    lengths, tail, h, hv, kd, vd = [4, 1, 6], 1, 1, 2, 4, 3
    per_channel = op == "kda"
    q = packed(gen, lengths, tail, h, kd).requires_grad_()
    k = packed(gen, lengths, tail, h, kd).requires_grad_()
    v = packed(gen, lengths, tail, hv, vd).requires_grad_()
    gshape = (hv, kd) if per_channel else (hv,)
    g = (-torch.rand(sum(lengths) + tail, *gshape, generator=gen, dtype=torch.float64)).requires_grad_()
    beta = torch.rand(sum(lengths) + tail, hv, generator=gen, dtype=torch.float64).requires_grad_()
    init = torch.randn(len(lengths), hv, kd, vd, generator=gen, dtype=torch.float64).requires_grad_()
    cu = cu_seqlens(lengths)
    fla = et.chunk_kda if per_channel else et.chunk_gated_delta_rule
    o, final = fla(q, k, v, g, beta, scale=0.5, initial_state=init, output_final_state=True,
                   cu_seqlens=cu, use_qk_l2norm_in_kernel=l2norm)
    active = sum(lengths)
    ro, rfinal = naive_delta_rule(q, k, v, g, beta, lengths, 0.5, l2norm, per_channel, init)
    torch.testing.assert_close(o[:active], ro, rtol=1e-8, atol=1e-8)
    assert (o[active:] == 0).all()
    torch.testing.assert_close(final, rfinal.to(final.dtype), rtol=1e-6, atol=1e-6)
    w = torch.randn(ro.shape, generator=gen, dtype=torch.float64)
    leaves = (q, k, v, g, beta, init)
    (o[:active] * w).sum().backward()
    got = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    (ro * w).sum().backward()
    for name, a, b in zip("q k v g beta init".split(), got, [t.grad for t in leaves]):
        rows = a if name == "init" else a[:active]
        want = b if name == "init" else b[:active]
        assert torch.isfinite(rows).all(), name
        assert name == "init" or (a[active:] == 0).all(), name
        torch.testing.assert_close(rows, want.to(rows.dtype), rtol=1e-6, atol=1e-6, msg=name)


def test_fla_batch_layout_and_errors(gen):
    q = torch.randn(1, 5, 1, 4, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 5, 1, 4, generator=gen, dtype=torch.float64)
    g = -torch.rand(1, 5, 1, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 5, 1, generator=gen, dtype=torch.float64)
    o, final = et.chunk_gated_delta_rule(q, q, v, g, beta, cu_seqlens=torch.tensor([0, 2, 5]))
    assert o.shape == (1, 5, 1, 4) and final is None
    with pytest.raises(eagle.InvalidArgument, match="batch dimension must be 1"):
        et.chunk_gated_delta_rule(q.expand(2, -1, -1, -1), q, v, g, beta,
                                  cu_seqlens=torch.tensor([0, 5]))
    with pytest.raises(eagle.InvalidArgument):  # eagle's own shape rule, named
        et.varlen_attn(q[0], q[0, :4], q[0], torch.tensor([0, 5], dtype=torch.int32),
                       torch.tensor([0, 5], dtype=torch.int32))


def test_opcheck_and_torch_compile(gen):
    q = packed(gen, [3, 4], 0, 2, 8, dtype=torch.float32)
    k, v = torch.randn_like(q), torch.randn_like(q)
    cu = cu_seqlens([3, 4])
    torch.library.opcheck(torch.ops.eagle.varlen_attention.default,
                          (q, k, v, cu, cu, 0.3, True),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    g = -torch.rand(7, 2, generator=gen)
    beta = torch.rand(7, 2, generator=gen)
    torch.library.opcheck(torch.ops.eagle.gdn.default, (q, k, v, g, beta, cu, None, 0.3, False, True),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))

    def block(q, k, v):
        return et.varlen_attn(q, k, v, cu, cu, is_causal=True).square().sum()

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    qs = [t.clone().requires_grad_() for t in (q, k, v)]
    qc = [t.clone().requires_grad_() for t in (q, k, v)]
    block(*qs).backward()
    compiled(*qc).backward()
    for a, b in zip(qs, qc):
        torch.testing.assert_close(a.grad, b.grad)


def test_plans_are_cached_per_shape(gen):
    et.clear_plan_cache()
    q = packed(gen, [2, 2], 0, 1, 4, dtype=torch.float32)
    cu = cu_seqlens([2, 2])
    et.varlen_attn(q, q, q, cu, cu)
    et.varlen_attn(q + 1, q, q, cu, cu)
    assert len(et._plans) == 1
    et.varlen_attn(q[:3], q[:3], q[:3], torch.tensor([0, 3], dtype=torch.int32),
                   torch.tensor([0, 3], dtype=torch.int32))
    assert len(et._plans) == 2


def test_torch_tensors_are_shared_both_ways(gen):
    t = torch.randn(4, 3, generator=gen)
    a = eagle.asarray(t)  # the fast export (no __dlpack__ handshake on the CPU)
    assert a.data_ptr == t.data_ptr() and a.shape == (4, 3) and a.dtype == eagle.f32
    back = torch.from_dlpack(a)
    assert back.data_ptr() == t.data_ptr()
    t[0, 0] = 42.0
    assert a.numpy()[0, 0] == 42.0
    b = eagle.full((2,), 1.5, eagle.bf16)
    tb = torch.from_dlpack(b)
    assert tb.dtype == torch.bfloat16 and tb.tolist() == [1.5, 1.5]
    strided = t[:, 1]
    s = eagle.asarray(strided)
    assert s.strides == (3,) and s.data_ptr == strided.data_ptr()
