"""Reverse mode from Python: gradients of recorded graphs against float64 finite differences."""

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def forward_graph(x, w):
    def body(r):
        y = K.mul(r.param("x", x), r.param("w", w))
        z = K.axpy(y, y, 0.5)  # 1.5 * x * w
        r.result(K.sum(K.mul(z, z)))  # sum (1.5 x w)^2

    return eagle.Graph.record(body, record=True).build()


def loss(x, w):
    return float(np.sum((1.5 * x * w) ** 2))


def finite_differences(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def test_reverse_matches_finite_differences(rng):
    x = random_values(rng, (6,), np.float64)
    w = random_values(rng, (6,), np.float64)
    fwd = forward_graph(x, w)
    back = eagle.diff.reverse(fwd, "result", ["x", "w"])
    fwd()
    gx, gw = back()
    np.testing.assert_allclose(gx.numpy(), finite_differences(lambda v: loss(v, w), x), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), finite_differences(lambda v: loss(x, v), w), rtol=1e-6)


def test_a_given_cotangent_is_a_param(rng):
    x = random_values(rng, (6,), np.float64)
    w = random_values(rng, (6,), np.float64)
    fwd = forward_graph(x, w)
    back = eagle.diff.reverse(fwd, [("result", np.full(1, 3.0))], "x")
    fwd()
    np.testing.assert_allclose(back().numpy(), 3 * 2 * (1.5 * w) ** 2 * x, rtol=1e-12)
    back.bind(**{"seed.result": np.full(1, -1.0)})
    np.testing.assert_allclose(back().numpy(), -2 * (1.5 * w) ** 2 * x, rtol=1e-12)


def test_gradients_inside_one_step_graph(rng):
    x = random_values(rng, (5,), np.float64)
    w0 = random_values(rng, (5,), np.float64)
    w = w0.copy()

    def step(r):
        wv = r.external(eagle.asarray(w), "w")
        y = K.mul(r.param("x", x), wv)
        s = K.sum(K.mul(y, y))
        (gw,) = eagle.diff.gradients(r, [s], [wv])
        K.axpy(gw, wv, -0.01, buffer=wv)  # w -= 0.01 * dL/dw, in place
        r.result(s)

    g = eagle.Graph.record(step, record=True).build()
    g()
    np.testing.assert_allclose(w, w0 - 0.01 * 2 * x * x * w0, rtol=1e-12)


def test_unknown_names_are_refused(rng):
    x = random_values(rng, (3,), np.float64)
    fwd = forward_graph(x, x.copy())
    with pytest.raises(eagle.InvalidArgument, match="nope"):
        eagle.diff.reverse(fwd, "result", ["nope"])
    plain = eagle.Graph.record(lambda r: r.result(K.scale(r.param("x", x), 2.0))).build()
    with pytest.raises(eagle.InvalidArgument, match="record"):
        eagle.diff.reverse(plain, "result", ["x"])
