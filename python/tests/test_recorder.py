"""The Recorder's device constructs called directly (the builder decorator rewrites into these)."""

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def cell(v):
    return np.full(1, v, np.uint32)


def test_if_else_decided_on_the_device(rng):
    x = random_values(rng, (16,))

    def body(r):
        c = r.param("c", cell(1))
        xv = r.param("x", x)
        y = r.empty(xv.shape, eagle.f32, "y")
        r.if_(c, lambda: K.scale(xv, 2.0, buffer=y), lambda: K.scale(xv, -3.0, buffer=y))
        r.result(y)

    g = eagle.Graph.record(body).build()
    assert [n["kind"] for n in g.nodes if n["parent"] == -1][-1] == "if"
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), -3 * x, rtol=1e-6)


def test_switch_and_elif_chain(rng):
    x = random_values(rng, (8,))

    def body(r):
        k = r.param("k", cell(2))
        xv = r.param("x", x)
        y = r.empty(xv.shape, eagle.f32, "y")
        r.switch_(k, [lambda s=s: K.scale(xv, float(s + 1), buffer=y) for s in range(3)])
        a, b = r.param("a", cell(0)), r.param("b", cell(1))
        z = r.empty(xv.shape, eagle.f32, "z")
        r.if_chain([(a, lambda: K.scale(xv, 10.0, buffer=z)), (b, lambda: K.scale(xv, 20.0, buffer=z))],
                   lambda: K.scale(xv, 30.0, buffer=z))
        r.result([y, z])

    g = eagle.Graph.record(body).build()
    y, z = g()
    np.testing.assert_allclose(y.numpy(), 3 * x, rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), 20 * x, rtol=1e-6)
    g.bind(k=cell(0), b=cell(0))
    y, z = g()
    np.testing.assert_allclose(y.numpy(), x, rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), 30 * x, rtol=1e-6)


def test_capped_loop_with_break(rng):
    x = random_values(rng, (4,), np.float64)

    def body(r):
        xv = r.param("x", x)
        acc = K.fill(0.0, buffer=r.empty((4,), eagle.f64, "acc"))
        turns = K.fill(0, buffer=r.empty((1,), eagle.u32, "turns"))
        stop_at = r.param("stop_at", cell(3))

        def turn():
            K.add(acc, xv, buffer=acc)
            K.cell_increment(turns, buffer=turns)
            done = K.equal_mask(turns, stop_at)
            r.break_if(done)

        r.for_(10, turn)
        r.result(acc)

    g = eagle.Graph.record(body).build()
    np.testing.assert_allclose(g().numpy(), 3 * x)
    g.bind(stop_at=cell(50))  # never reached: the cap of 10 ends it
    np.testing.assert_allclose(g().numpy(), 10 * x)


def test_while_loop(rng):
    def body(r):
        remaining = K.copy(r.param("n", cell(4)), label="remaining")
        going = K.copy(remaining, label="going")
        count = K.fill(0.0, buffer=r.empty((1,), eagle.f64, "count"))
        stop = K.fill(0, buffer=r.empty((1,), eagle.u32, "stop"))

        def turn():
            K.add(count, K.fill(1.0, buffer=r.empty((1,), eagle.f64)), buffer=count)
            K.loop_next(remaining, stop, buffer=going)

        r.while_(going, turn, max_turns=100)
        r.result(count)

    g = eagle.Graph.record(body).build()
    assert g().numpy()[0] == 4
    g.bind(n=cell(9))
    assert g().numpy()[0] == 9


def test_fork_with_wait(rng):
    x = random_values(rng, (32,))

    def body(r):
        xv = r.param("x", x)
        out = {}

        def first(b):
            out["y"] = K.scale(xv, 2.0, label="first")

        def second(b):
            b.wait(out["y"])
            out["z"] = K.add(out["y"], xv, label="second")

        r.parallel([first, second])
        r.result(out["z"])

    g = eagle.Graph.record(body).build()
    fork = [n for n in g.nodes if n["kind"] == "parallel"][0]
    assert len(fork["bodies"]) == 2
    np.testing.assert_allclose(g().numpy(), 3 * x, rtol=1e-6)


def test_assign_merges_a_rebound_name_in_a_loop(rng):
    x = random_values(rng, (8,), np.float64)

    def body(r):
        y = K.copy(r.param("x", x), label="y")
        box = [y]

        def turn():
            box[0] = r.assign(box[0], K.scale(box[0], 2.0))

        r.for_(3, turn)
        r.result(box[0])

    g = eagle.Graph.record(body).build()
    np.testing.assert_allclose(g().numpy(), 8 * x)


def test_constants_are_shared_in_an_arm_and_read_only(rng):
    x = random_values(rng, (8,))

    def body(r):
        a, b = r.constant(0.5), r.constant(0.5)
        assert a.buffer == b.buffer and r.constant(0.5, eagle.f64).buffer != a.buffer
        with pytest.raises(eagle.InvalidArgument, match="read only"):
            K.fill(2.0, buffer=a)
        r.result([K.scale(r.param("x", x), 2.0), b])

    g = eagle.Graph.record(body).build()
    assert sum(n["kernel"] == "fill" for n in g.nodes) == 2
    y, half = g()
    np.testing.assert_allclose(y.numpy(), 2 * x, rtol=1e-6)
    assert half.numpy().tolist() == 0.5
