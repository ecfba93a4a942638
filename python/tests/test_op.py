"""Op graphs and planning from Python: the plan list, selection, execute with numpy arrays."""

import sys

import numpy as np
import pytest

import eagle
from conftest import random_values


def scale_rows_graph():
    og = eagle.op.Graph("scale_rows")
    ta = og.tensor("a", (2, 3))
    tb = og.tensor("b", (2, 3))
    ty = og.pointwise("mul", ta, tb).set_output(True).set_name("y")
    return og, ta, tb, ty


def test_plan_inspect_and_execute_with_numpy(rng):
    og, ta, tb, ty = scale_rows_graph()
    plans = eagle.plan(og, eagle.cpu)
    assert len(plans) >= 1 and plans.family == "pointwise"
    assert "reference" in plans.describe()
    assert plans.build_plans() == plans.selected == 0
    a, b = random_values(rng, (2, 3)), random_values(rng, (2, 3))
    y = np.full((2, 3), np.nan, np.float32)
    plans.execute({ta: a, tb: b, ty: y})
    np.testing.assert_allclose(y, a * b, rtol=1e-6)
    y2 = np.full((2, 3), np.nan, np.float32)
    plans.execute({"a": b, "b": b, "y": y2})  # operands by name
    np.testing.assert_allclose(y2, b * b, rtol=1e-6)
    assert og.frozen
    with pytest.raises(eagle.InvalidArgument, match="frozen"):
        og.tensor("c", (1,))


def test_execute_reads_foreign_arrays_in_place(rng):
    # A strided numpy view is read through its own strides (no copy); a read-only output is
    # refused; each call hands the arrays' DLPack capsules back (no reference is kept).
    og, ta, tb, ty = scale_rows_graph()
    plans = eagle.plan(og, eagle.cpu)
    plans.build_plans()
    big = random_values(rng, (4, 6))
    a, b = big[1:3, ::2], random_values(rng, (2, 3))
    assert not a.flags["C_CONTIGUOUS"]
    y = np.full((2, 3), np.nan, np.float32)
    plans.execute({ta: a, tb: b, ty: y})
    np.testing.assert_allclose(y, a * b, rtol=1e-6)
    frozen = np.zeros((2, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(eagle.InvalidArgument, match="read-only"):
        plans.execute({ta: a, tb: b, ty: frozen})
    refs = [sys.getrefcount(x) for x in (big, b, y)]
    for _ in range(100):
        plans.execute({ta: a, tb: b, ty: y})
    assert [sys.getrefcount(x) for x in (big, b, y)] == refs


def test_execute_errors(rng):
    og, ta, tb, ty = scale_rows_graph()
    plans = eagle.plan(og, eagle.cpu)
    with pytest.raises(eagle.InvalidArgument, match="build"):
        plans.execute({ta: random_values(rng, (2, 3))})
    plans.build_plans()
    with pytest.raises(eagle.InvalidArgument, match="no operand is named 'q'"):
        plans.execute({"q": random_values(rng, (2, 3))})
    with pytest.raises(eagle.InvalidArgument):
        plans.execute({ta: random_values(rng, (3, 3)), tb: random_values(rng, (2, 3)),
                       ty: np.zeros((2, 3), np.float32)})


def test_op_graph_introspection():
    og = eagle.op.Graph("mlp")
    x = og.tensor("x", (4, 8))
    w = og.tensor("w", (8, 16))
    h = og.matmul(x, w)
    y = og.pointwise("gelu", h).set_output(True)
    assert [n.op for n in og.nodes] == ["matmul", "gelu"]
    assert og.nodes[1].inputs["a"] == h
    assert y.dims == (4, 16) and y.dtype == eagle.f32 and not y.is_virtual
    with pytest.raises(eagle.InvalidArgument, match="nope"):
        og.op("nope", {"a": x})
    with pytest.raises(eagle.InvalidArgument, match="attribute"):
        og.pointwise("gelu", x, approximate=object())


def test_planned_kernel_in_a_recorded_graph(rng):
    og = eagle.op.Graph("mul")
    ta, tb = og.tensor("a", (4,), eagle.f64), og.tensor("b", (4,), eagle.f64)
    og.pointwise("mul", ta, tb).set_output(True)
    k = eagle.planned_kernel(og)
    a, b = random_values(rng, (4,), np.float64), random_values(rng, (4,), np.float64)
    g = eagle.Graph.record(lambda r: r.result(k(r.param("a", a), r.param("b", b)))).build()
    np.testing.assert_allclose(g().numpy(), a * b)


def test_planned_kernel_prefers_named_engines(rng):
    og = eagle.op.Graph("mul")
    ta, tb = og.tensor("a", (4,), eagle.f64), og.tensor("b", (4,), eagle.f64)
    og.pointwise("mul", ta, tb).set_output(True)
    # On the CPU only the reference serves: a named GPU engine leaves the choice to the list.
    k = eagle.planned_kernel(og, prefer=["native_pointwise", "reference"])
    a, b = random_values(rng, (4,), np.float64), random_values(rng, (4,), np.float64)
    g = eagle.Graph.record(lambda r: r.result(k(r.param("a", a), r.param("b", b)))).build()
    np.testing.assert_allclose(g().numpy(), a * b)
    with pytest.raises(eagle.InvalidArgument, match="prefer names 'no_such'"):
        eagle.planned_kernel(og, prefer=["no_such"])
    with pytest.raises(eagle.InvalidArgument, match="prefer names 'no_such'"):
        eagle.planned_segments(og, prefer=["cudnn", "no_such"])


@pytest.mark.parametrize("autotune", [False, True])
def test_planned_segments_recorded_in_order(rng, autotune):
    og = eagle.op.Graph("mlp")
    tx, tw1, tw2 = og.tensor("x", (4, 3), eagle.f64), og.tensor("w1", (3, 5), eagle.f64), \
        og.tensor("w2", (5, 2), eagle.f64)
    ty = og.matmul(og.pointwise("relu", og.matmul(tx, tw1)), tw2).set_output(True)
    # autotune: each piece's plan entries timed on the device first, the fastest kept.
    segments = eagle.planned_segments(og, autotune=autotune)
    assert len(segments) == 3  # matmul, the pointwise run, matmul
    kernel, inputs, outputs = segments[0]
    assert isinstance(kernel, eagle.Kernel) and inputs == [tx.uid, tw1.uid]
    # With epilogues: the first matmul takes relu (and outputs its product too).
    fused = eagle.planned_segments(og, autotune=autotune, fuse_epilogues=True)
    assert len(fused) == 2 and len(fused[0][2]) == 2
    assert segments[-1][2] == [ty.uid]
    x, w1, w2 = (random_values(rng, s, np.float64) for s in ((4, 3), (3, 5), (5, 2)))

    def body(r):
        values = {tx.uid: r.param("x", x), tw1.uid: r.param("w1", w1), tw2.uid: r.param("w2", w2)}
        for k, ins, outs in segments:
            made = r.call_all(k, [values[u] for u in ins])
            values.update(zip(outs, made))
        r.result(values[ty.uid])

    y = eagle.Graph.record(body).build()().numpy()
    np.testing.assert_allclose(y, np.maximum(x @ w1, 0) @ w2, rtol=1e-12)
