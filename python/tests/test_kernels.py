"""Kernels from Python: eager calls, recorded calls, user kernels from a shared library."""

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def test_eager_calls_return_complete_outputs(rng):
    x = random_values(rng, (3, 4), np.float64)
    y = random_values(rng, (3, 4), np.float64)
    np.testing.assert_allclose(K.axpy(x, y, 0.5).numpy(), 0.5 * x + y)
    np.testing.assert_allclose(K.mul(x, y).numpy(), x * y)
    np.testing.assert_allclose(K.sum(x).numpy(), [x.sum()])


def test_eager_buffer_writes_in_place(rng):
    x = random_values(rng, (5,))
    out = eagle.empty((5,), eagle.f32)
    got = K.scale(x, 3.0, buffer=out)
    assert got.data_ptr == out.data_ptr
    np.testing.assert_allclose(out.numpy(), 3.0 * x, rtol=1e-6)
    target = np.full(5, np.nan, np.float32)
    K.copy(x, buffer=target)  # a numpy array as the output: written without a copy
    np.testing.assert_array_equal(target, x)


def test_strided_view_kernels_in_a_graph(rng):
    x = random_values(rng, (3, 4), np.float64)
    c = random_values(rng, (3, 2), np.float64)

    def body(r):
        xv = r.param("x", x)
        h = K.copy(xv)
        K.add_to_view(h.slice(1, 0, 2), r.param("c", c))  # columns 0, 1 += c, where they lie
        K.zero_view(h.slice(1, 2, 4))
        r.result([K.gather_view(xv.transpose(0, 1)), h])

    transposed, h = eagle.Graph.record(body).build()()
    np.testing.assert_array_equal(transposed.numpy(), x.T)
    np.testing.assert_array_equal(h.numpy()[:, :2], x[:, :2] + c)
    np.testing.assert_array_equal(h.numpy()[:, 2:], 0)


def test_a_broadcast_view_is_read_and_never_written(rng):
    row = random_values(rng, (1, 4), np.float64)

    def body(r):
        b = r.param("row", row).broadcast_to((3, 4))
        assert b.shape == (3, 4) and b.strides == (0, 1)
        with pytest.raises(eagle.InvalidArgument, match="broadcast view"):
            K.zero_view(b)
        r.result(K.gather_view(b))

    np.testing.assert_array_equal(eagle.Graph.record(body).build()().numpy(), np.repeat(row, 3, 0))


def test_kernel_metadata():
    assert K.axpy.name == "axpy"
    assert [p[0] for p in K.axpy.params] == ["x", "y", "out"]
    assert K.axpy.scalars == ["alpha"]
    assert K.axpy.num_inputs == 2 and K.axpy.num_outputs == 1
    assert repr(K.fill) == "eagle.Kernel('fill')"


def test_bad_calls_name_the_argument(rng):
    x = random_values(rng, (3,))
    with pytest.raises(eagle.InvalidArgument, match="argument 1"):
        K.scale(x, "two")
    with pytest.raises(eagle.InvalidArgument, match="shape"):
        K.add(x, random_values(rng, (4,)))
    with pytest.raises(eagle.NotSupported):
        K.sum(eagle.full((3,), 1, eagle.u8))


def test_user_kernels_from_a_shared_library(rng, user_kernels_path):
    lib = eagle.load_kernels(user_kernels_path)
    lerp = lib["user_lerp"]
    a = random_values(rng, (6,), np.float64)
    b = random_values(rng, (6,), np.float64)
    np.testing.assert_allclose(lerp(a, b, 0.25).numpy(), a + 0.25 * (b - a))

    def body(r):
        r.result(lerp(r.param("a", a), r.param("b", b), 0.75))

    g = eagle.Graph.record(body).build()
    np.testing.assert_allclose(g().numpy(), a + 0.75 * (b - a))


def test_load_kernels_errors(tmp_path):
    with pytest.raises(eagle.InvalidArgument, match="cannot open"):
        eagle.load_kernels(tmp_path / "missing.so")
    import ctypes.util

    libm = ctypes.util.find_library("m")
    with pytest.raises(eagle.InvalidArgument, match="eagle_export_kernels"):
        eagle.load_kernels(libm)
