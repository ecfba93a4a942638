"""Ragged batches and capacity buckets from Python."""

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def test_capacity_bounds():
    assert eagle.ragged.chunk_capacity(10, 4, 4) == 4 + (10 - 4) // 4
    assert eagle.ragged.max_sequences(3, 8) == 3
    with pytest.raises(eagle.InvalidArgument, match="chunk"):
        eagle.ragged.chunk_capacity(10, 4, 0)


def test_the_seqlen_bucket_switch_runs_the_arm_the_longest_sequence_fits():
    T = 64
    bounds = eagle.ragged.seqlen_buckets(T, 8)
    assert bounds == [8, 16, 32, 64]
    with pytest.raises(eagle.InvalidArgument, match="smallest"):
        eagle.ragged.seqlen_buckets(T, 0)

    def body(r):
        cu = r.param("cu", np.array([0, 3, 8, 8], np.int32))
        y = K.fill(0.0, buffer=r.empty((1,), eagle.f32))
        r.switch_(K.seqlen_bucket(cu, T, 8),
                  [lambda b=b: K.fill(float(b), buffer=y) for b in bounds])
        r.result(y)

    g = eagle.Graph.record(body).build()
    assert g().numpy()[0] == 8  # the longest is 5
    for cu, want in (([0, 9, 10, 12], 16), ([0, 1, 2, 40], 64), ([0, 0, 0, 0], 8)):
        g.bind(cu=np.array(cu, np.int32))
        assert g().numpy()[0] == want


def test_validate_raises_from_g_on_a_bad_batch(rng):
    if not eagle.ragged.checks_enabled():
        pytest.skip("built with EAGLE_RAGGED_CHECKS=OFF")
    T = 8
    x = random_values(rng, (T, 2))
    good = np.array([0, 3, 8], np.int32)

    def body(r):
        cu = r.param("cu", good)
        eagle.ragged.validate(r, cu, T)
        r.result(K.mask_rows(r.param("x", x), cu))

    g = eagle.Graph.record(body).build()
    np.testing.assert_array_equal(g().numpy(), x)
    g.bind(cu=np.array([0, 5, 3], np.int32))
    with pytest.raises(eagle.InvalidArgument, match="cu_seqlens"):
        g()
    g.bind(cu=np.array([0, 2, 5], np.int32))
    out = g().numpy()
    np.testing.assert_array_equal(out[:5], x[:5])
    np.testing.assert_array_equal(out[5:], 0)


def test_bucket_set_picks_the_smallest_capacity(rng):
    def body(r, b):
        x = r.param("x", b.input("x"))
        r.result(K.scale(x, 2.0))

    buckets = eagle.BucketSet([4, 8], [("x", (8, 3), eagle.f32)], eagle.cpu, body)
    assert buckets.select(3) == 0 and buckets.select(5) == 1
    x = random_values(rng, (8, 3))
    buckets.backing("x").copy_from(x)
    small = buckets.run(3)
    assert small.bucket == 0 and small.capacity == 4 and small[0].shape == (4, 3)
    np.testing.assert_allclose(small[0].numpy(), 2 * x[:4], rtol=1e-6)
    big = buckets.run(7)
    assert big[0].shape == (8, 3) and not small.valid
    with pytest.raises(eagle.InvalidArgument, match="launch"):
        small[0]
    with pytest.raises(eagle.InvalidArgument, match="active"):
        buckets.run(9)
    assert buckets.graph(0).built and buckets.arena_bytes > 0
    assert buckets.graph(1).workspace_bytes == 0  # a scale asks for no workspace
    # One stream for the set: a launch of one bucket is ordered after the other's.
    assert buckets.stream() is not None and buckets.graph(0).stream.device == eagle.cpu
