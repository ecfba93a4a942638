"""The Python surface on a GPU: CUDA graphs from Python, DLPack with torch and cupy on CUDA
(streams honoured), eagle.torch under torch.cuda.graph and torch.compile. Skipped without one."""

import math

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels
pytestmark = pytest.mark.skipif(not eagle.cuda_available(), reason="no CUDA device")
CUDA = eagle.Device("cuda:0") if eagle.cuda_available() else None


def test_a_cuda_graph_from_python(rng):
    x = random_values(rng, (1024,))
    xa = eagle.asarray(x, device=CUDA)

    def body(r):
        r.result(K.axpy(r.param("x", xa), r.param("y", xa.to(CUDA)), 2.0))

    g = eagle.Graph.record(body).build()
    assert g.backend == "cuda-graph" and g.native_graph_exec != 0
    np.testing.assert_allclose(g().numpy(), 3 * x, rtol=1e-6)
    x2 = random_values(rng, (1024,))
    g.bind(x=eagle.asarray(x2, device=CUDA))
    np.testing.assert_allclose(g(5).numpy(), 2 * x2 + x, rtol=1e-6)
    assert g.rebuild_count == 0


def test_a_cuda_graph_with_prioritized_chains(rng):
    x = random_values(rng, (1024,))
    xa = eagle.asarray(x, device=CUDA)

    def body(r):
        h = K.scale(r.param("x", xa), 2.0)  # waited on: the greatest priority
        r.result([K.axpy(h, h, 1.0), K.scale(h, 3.0)])  # sinks: the least

    g = eagle.Graph.record(body).build(CUDA, prioritize_chains=True)
    y, z = g()
    np.testing.assert_allclose(y.numpy(), 4 * x, rtol=1e-6)  # 1.0 * h + h
    np.testing.assert_allclose(z.numpy(), 6 * x, rtol=1e-6)


def test_a_cuda_graph_with_side_roots_deferred(rng):
    x, w = random_values(rng, (4096,)), random_values(rng, (16,))
    xa, wa = eagle.asarray(x, device=CUDA), eagle.asarray(w, device=CUDA)

    def body(r):
        h = K.scale(r.param("x", xa), 2.0)  # the heavier root: it starts first
        seed = K.scale(r.param("w", wa), 3.0)  # a light root: after it
        r.result([K.axpy(h, h, 1.0), seed])

    g = eagle.Graph.record(body).build(CUDA, defer_side_roots=True)
    y, s = g()
    np.testing.assert_allclose(y.numpy(), 4 * x, rtol=1e-6)
    np.testing.assert_allclose(s.numpy(), 3 * w, rtol=1e-6)


def test_builder_on_the_gpu(rng):
    x = eagle.asarray(random_values(rng, (64,)), device=CUDA)

    @eagle.Graph.builder
    def f(x, c):
        y = K.copy(x)
        if c:
            y = K.scale(y, 2.0)
        else:
            y = K.scale(y, -1.0)
        return y

    cell = lambda v: eagle.asarray(np.full(1, v, np.uint32), device=CUDA)  # noqa: E731
    g = f(x, cell(1))
    assert g.device == CUDA
    np.testing.assert_allclose(g().numpy(), 2 * x.numpy(), rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), -x.numpy(), rtol=1e-6)


def test_torch_cuda_round_trip_and_stream_order():
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        t.mul_(3.0)  # pending on the side stream when eagle imports it
        s = eagle.Stream(CUDA)
        a = eagle.asarray(t, stream=s)  # torch orders the side stream's work before s
    assert a.data_ptr == t.data_ptr() and a.device == CUDA
    s.synchronize()  # s waited (on the device) for the side stream's multiply
    assert a.numpy()[-1] == 3.0 * ((1 << 20) - 1)
    back = torch.from_dlpack(a)
    assert back.data_ptr() == t.data_ptr() and back.device.type == "cuda"
    bf = torch.randn(8, device="cuda", dtype=torch.bfloat16)
    assert eagle.asarray(bf).dtype == eagle.bf16


def test_graph_bind_with_torch_cuda_tensors():
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, device="cuda")
    g = eagle.Graph.record(lambda r: r.result(K.scale(r.param("x", x), 2.0))).build()
    torch.testing.assert_close(torch.from_dlpack(g()), 2 * x)
    x2 = torch.randn(4096, device="cuda")
    g.bind(x=x2)
    torch.testing.assert_close(torch.from_dlpack(g()), 2 * x2)


def test_a_graph_launched_on_torchs_stream_is_ordered_with_torchs_work():
    torch = pytest.importorskip("torch")
    x = torch.zeros(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    g = eagle.Graph.record(lambda r: r.result(K.scale(r.param("x", x), 2.0)))
    g.build(CUDA, stream=side)
    assert g.stream.borrowed and g.stream.handle == side.cuda_stream
    with torch.cuda.stream(side):
        x.fill_(1.5)  # queued on side: the graph's launch below runs after it, no wait between
        g.launch()
        out = torch.from_dlpack(g.results()[0]) * 1.0  # torch work after the launch, on side
    side.synchronize()
    torch.testing.assert_close(out, torch.full_like(x, 3.0))


def test_cupy_round_trip():
    cp = pytest.importorskip("cupy")
    c = cp.arange(10, dtype=cp.float32)
    a = eagle.asarray(c)
    assert a.data_ptr == c.data.ptr and a.device == CUDA
    back = cp.from_dlpack(a)
    assert int(back.data.ptr) == c.data.ptr
    cp.testing.assert_array_equal(back, c)


def reference_attention(torch, q, k, v, cu, causal):
    out, b = [], cu.tolist()
    for s, e in zip(b[:-1], b[1:]):
        out.append(torch.nn.functional.scaled_dot_product_attention(
            *(t[s:e].transpose(0, 1) for t in (q, k, v)), is_causal=causal).transpose(0, 1))
    return torch.cat(out)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_attention_bf16_against_torch(causal):
    torch = pytest.importorskip("torch")
    import eagle.torch as et

    gen = torch.Generator(device="cuda").manual_seed(1)
    lengths = [1, 127, 128, 129, 500]
    cu = torch.tensor([0] + np.cumsum(lengths).tolist(), dtype=torch.int32, device="cuda")
    T, H, D = sum(lengths) + 64, 8, 128
    q, k, v = (torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16, generator=gen)
               .requires_grad_() for _ in range(3))
    o = et.varlen_attn(q, k, v, cu, cu, is_causal=causal)
    active = sum(lengths)
    ref = reference_attention(torch, q.float(), k.float(), v.float(), cu, causal)
    torch.testing.assert_close(o[:active].float(), ref, rtol=2e-2, atol=2e-2)
    assert (o[active:] == 0).all()
    o[:active].float().square().sum().backward()
    assert all(torch.isfinite(t.grad).all() and (t.grad[active:] == 0).all() for t in (q, k, v))


def test_eagle_ops_under_torch_cuda_graph_and_compile():
    torch = pytest.importorskip("torch")
    import eagle.torch as et

    T, H, D = 1024, 4, 64
    cu = torch.tensor([0, 100, 700, 1000], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    et.varlen_attn(q, k, v, cu, cu)  # warm-up: plans and allocates before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = et.varlen_attn(q, k, v, cu, cu)
    q.copy_(torch.randn_like(q))
    cu.copy_(torch.tensor([0, 1, 512, 1024], dtype=torch.int32, device="cuda"))
    graph.replay()
    torch.testing.assert_close(out, et.varlen_attn(q, k, v, cu, cu))

    compiled = torch.compile(lambda q, k, v: et.varlen_attn(q, k, v, cu, cu).sum(), fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), et.varlen_attn(q, k, v, cu, cu).sum(),
                               rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_delta_rules_on_the_gpu_match_the_cpu(op):
    torch = pytest.importorskip("torch")
    import eagle.torch as et

    gen = torch.Generator().manual_seed(2)
    lengths, T, H, Kd = [3, 64, 65, 200], 340, 2, 64
    cu = torch.tensor([0] + np.cumsum(lengths).tolist(), dtype=torch.int32)
    # bf16 q, k, v (the GPU kernels serve bf16 and f16; f32 is declined on the GPU), f32 gates.
    q, k, v = ((torch.randn(T, H, Kd, generator=gen) * 0.3).bfloat16() for _ in range(3))
    g = -torch.rand(T, H, *((Kd,) if op == "kda" else ()), generator=gen) * 0.1
    beta = torch.rand(T, H, generator=gen)
    fn = et.chunk_kda if op == "kda" else et.chunk_gated_delta_rule
    args = dict(cu_seqlens=cu, use_qk_l2norm_in_kernel=True, output_final_state=True)
    o_cpu, s_cpu = fn(q, k, v, g, beta, **args)
    o_gpu, s_gpu = fn(*(t.cuda() for t in (q, k, v, g, beta)),
                      **{**args, "cu_seqlens": cu.cuda()})
    active = sum(lengths)
    torch.testing.assert_close(o_gpu[:active].cpu().float(), o_cpu[:active].float(), rtol=3e-2,
                               atol=3e-2)
    torch.testing.assert_close(s_gpu.cpu().float(), s_cpu.float(), rtol=3e-2, atol=3e-2)
    assert math.isfinite(float(o_gpu.float().abs().sum()))
