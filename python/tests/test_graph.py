"""Graphs from Python: record, build, g(), g(n), bind, introspection, errors, traces."""

import json

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def scale_add_graph(x, y):
    def body(r):
        xs = K.scale(r.param("x", x), 2.0, label="twice")
        r.result(K.add(xs, r.param("y", y)))

    return eagle.Graph.record(body)


def test_record_build_run_bind(rng):
    x, y = random_values(rng, (8,)), random_values(rng, (8,))
    g = scale_add_graph(x, y)
    assert not g.built
    g.build()
    assert g.built and g.device == eagle.cpu and g.backend == "cpu-host-schedule"
    np.testing.assert_allclose(g().numpy(), 2 * x + y, rtol=1e-6)
    x2 = random_values(rng, (8,))
    g.bind(x=x2)
    np.testing.assert_allclose(g().numpy(), 2 * x2 + y, rtol=1e-6)
    g.bind("y", eagle.asarray(x2.copy()))
    np.testing.assert_allclose(g(3).numpy(), 3 * x2, rtol=1e-6)
    assert g.param_names == ["x", "y"]


def test_bind_refuses_and_keeps_the_graph(rng):
    x, y = random_values(rng, (8,)), random_values(rng, (8,))
    g = scale_add_graph(x, y).build()
    with pytest.raises(eagle.InvalidArgument, match="shape"):
        g.bind(x=random_values(rng, (9,)))
    with pytest.raises(eagle.InvalidArgument, match="nope"):
        g.bind(nope=x)
    np.testing.assert_allclose(g().numpy(), 2 * x + y, rtol=1e-6)  # unchanged, still runs


def test_introspection(rng):
    x, y = random_values(rng, (8,)), random_values(rng, (8,))
    g = scale_add_graph(x, y).build()
    labels = [n["label"] for n in g.nodes]
    assert labels == ["twice", "add"]
    assert g.edges == [(0, 1)]
    assert json.loads(g.to_json())["nodes"][0]["label"] == "twice"
    assert "digraph" in g.to_dot()
    assert g.native_node_count >= 2 and g.allocated_bytes > 0
    assert "2 nodes" in repr(g)


def test_a_graph_built_on_a_borrowed_stream(rng):
    x, y = random_values(rng, (8,)), random_values(rng, (8,))
    g = scale_add_graph(x, y).build(eagle.cpu, stream=eagle.Stream.borrow(eagle.cpu, 0))
    assert g.stream.device == eagle.cpu  # on the CPU a stream holds no handle to borrow
    np.testing.assert_allclose(g().numpy(), 2 * x + y, rtol=1e-6)
    g2 = scale_add_graph(x, y)
    with pytest.raises(eagle.InvalidArgument, match="needs a device"):
        g2.build(stream=0)
    with pytest.raises(eagle.InvalidArgument, match="need a device"):
        g2.build(prioritize_chains=True)
    with pytest.raises(eagle.InvalidArgument, match="need a device"):
        g2.build(defer_side_roots=True)
    # defer_side_roots is a GPU option: the CPU builds the same graph with it.
    g5 = scale_add_graph(x, y).build(eagle.cpu, defer_side_roots=True)
    np.testing.assert_allclose(g5().numpy(), 2 * x + y, rtol=1e-6)
    # memsets_as_kernels is on by default and a GPU option: the CPU ignores it, either way.
    for on in (True, False):
        g3 = scale_add_graph(x, y).build(memsets_as_kernels=on)
        np.testing.assert_allclose(g3().numpy(), 2 * x + y, rtol=1e-6)
        g4 = scale_add_graph(x, y).build(eagle.cpu, memsets_as_kernels=on)
        np.testing.assert_allclose(g4().numpy(), 2 * x + y, rtol=1e-6)
    with pytest.raises(eagle.InvalidArgument):
        g2.build(eagle.cpu, stream=12345)  # a CPU stream has no cudaStream_t
    assert not g2.built


def test_a_race_is_refused_and_python_errors_pass_through(rng):
    x = random_values(rng, (8,))

    def racy(r):
        a = r.external(eagle.asarray(x), "a")
        with r.scope("fork"):
            r.parallel([lambda b: K.scale(a, 2.0, buffer=a), lambda b: K.scale(a, 3.0, buffer=a)])

    with pytest.raises(eagle.RecordError, match="race|concurrent|branch"):
        eagle.Graph.record(racy)

    class Mine(Exception):
        pass

    def raises(r):
        r.param("x", x)
        raise Mine("from the body")

    with pytest.raises(Mine, match="from the body"):
        eagle.Graph.record(raises)


def test_recorder_is_dead_after_recording(rng):
    kept = []
    eagle.Graph.record(lambda r: kept.append(r))
    with pytest.raises(eagle.InvalidArgument, match="finished"):
        kept[0].empty((1,))
    assert eagle.current_recorder() is None


def test_arrays_from_outside_must_come_in_as_params(rng):
    x = random_values(rng, (4,))
    with pytest.raises(eagle.InvalidArgument, match="r.param"):
        eagle.Graph.record(lambda r: K.scale(x, 2.0))


def test_value_cannot_be_tested_in_python(rng):
    def body(r):
        c = r.param("c", np.ones(1, np.uint32))
        if c:  # a device value: Python cannot decide it
            pass

    with pytest.raises(eagle.RecordError, match="decided on the device"):
        eagle.Graph.record(body)


def test_device_check_raises_from_g_and_the_graph_runs_again():
    flags_in = np.zeros(1, np.uint32)

    def raise_(flags):
        if flags.numpy()[0] != 0:
            raise ValueError(f"flag {flags.numpy()[0]}")

    def body(r):
        flags = K.copy(r.param("f", flags_in))
        r.check(flags, raise_)
        r.result(flags)

    g = eagle.Graph.record(body).build()
    g()
    g.bind(f=np.full(1, 7, np.uint32))
    with pytest.raises(ValueError, match="flag 7"):
        g()
    g.bind(f=flags_in)
    g()


def test_traces_on_the_cpu(rng):
    x = random_values(rng, (64,))

    def body(r):
        with r.scope("block0"):
            y = K.scale(r.param("x", x), 2.0, label="double")
        r.result(K.add(y, y))

    g = eagle.Graph.record(body).build()
    g.set_tracing(True)
    g(2)
    events = g.trace()
    assert {e["label"] for e in events} == {"double", "add"}
    assert {e["launch"] for e in events} == {0, 1}
    assert [e["scope"] for e in events if e["label"] == "double"][0] == "block0"
    trace = json.loads(g.chrome_trace("step"))
    assert any(e.get("name") == "double" for e in trace["traceEvents"])
    g.clear_trace()
    assert g.trace() == []
