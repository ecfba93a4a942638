"""Collectives from Python: a CPU group of thread ranks, eager and inside recorded graphs."""

import threading

import numpy as np
import pytest

import eagle
from conftest import random_values

comm = eagle.comm
K = eagle.kernels


def run_ranks(fn, ranks):
    """fn(rank) on one thread per rank; re-raises the first exception."""
    results, errors = [None] * ranks, []

    def target(r):
        try:
            results[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            errors.append(e)

    threads = [threading.Thread(target=target, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_all_reduce_in_recorded_graphs(rng, ranks):
    group = comm.cpu_group(ranks)
    assert [c.rank for c in group] == list(range(ranks)) and group[0].size == ranks
    xs = [random_values(rng, (6, 5), np.float64) for _ in range(ranks)]
    graphs = []
    for r in range(ranks):  # recording runs nothing: one thread records every rank's graph
        k = comm.all_reduce(group[r], comm.ReduceOp.avg)
        graphs.append(eagle.Graph.record(lambda rec, k=k, r=r: rec.result(k(rec.param("x", xs[r])))).build())
    outs = run_ranks(lambda r: graphs[r]().numpy().copy(), ranks)
    want = sum(xs) / ranks  # ranks added in order 0..K-1: the same bits on every rank
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-12)
        assert o.tobytes() == outs[0].tobytes()


def test_gather_scatter_broadcast_eagerly(rng):
    ranks = 3
    group = comm.cpu_group(ranks)
    xs = [random_values(rng, (2, 4)) for _ in range(ranks)]
    gathered = run_ranks(lambda r: comm.all_gather(group[r])(xs[r]).numpy(), ranks)
    for g in gathered:
        np.testing.assert_array_equal(g, np.concatenate(xs))
    big = [random_values(rng, (6, 4)) for _ in range(ranks)]
    scattered = run_ranks(lambda r: comm.reduce_scatter(group[r])(big[r]).numpy(), ranks)
    total = big[0] + big[1] + big[2]
    for r, s in enumerate(scattered):
        np.testing.assert_allclose(s, total[2 * r:2 * r + 2], rtol=1e-6)
    sent = run_ranks(lambda r: comm.broadcast(group[r], 1)(xs[r]).numpy(), ranks)
    for s in sent:
        np.testing.assert_array_equal(s, xs[1])


def test_errors_reach_every_rank_and_timeouts(rng):
    group = comm.cpu_group(2, timeout=0.2)
    shapes = [(4,), (5,)]
    with pytest.raises(eagle.InvalidArgument, match="shape"):
        run_ranks(lambda r: comm.all_reduce(group[r])(random_values(rng, shapes[r])), 2)
    lonely = comm.cpu_group(2, timeout=0.1)
    with pytest.raises(comm.TimeoutError):
        comm.all_reduce(lonely[0])(random_values(rng, (3,)))  # rank 1 never comes
    with pytest.raises(eagle.InvalidArgument, match="root"):
        comm.broadcast(group[0], 5)
    with pytest.raises(eagle.InvalidArgument):
        comm.cpu_group(0)


def test_nccl_status_is_a_sentence():
    assert isinstance(comm.nccl_status(), str) and comm.nccl_status()
    if not eagle.cuda_available():
        with pytest.raises((eagle.NotSupported, eagle.InvalidArgument)):
            comm.nccl(b"\0" * 128, 0, 1, eagle.cpu)
    with pytest.raises(eagle.InvalidArgument, match="128 bytes"):
        comm.nccl(b"short", 0, 1, eagle.cpu)
