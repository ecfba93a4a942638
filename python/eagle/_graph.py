"""Graph: record once, build for a device, replay; ``Graph.builder`` for the decorator."""

from __future__ import annotations

import contextvars
import warnings

from . import _eagle

_current = contextvars.ContextVar("eagle_recorder", default=None)


class EagleWarning(UserWarning):
    """A warning from eagle's core (e.g. a bind that had to rebuild the graph)."""


def current_recorder():
    """The Recorder of the recording being made on this thread, or None outside one."""
    return _current.get()


def _recording_body(fn):
    def body(r):
        token = _current.set(r)
        try:
            fn(r)
        finally:
            _current.reset(token)

    return body


class parallel:
    """``with eagle.parallel() as (b1, b2): ...`` in a builder function (see Graph.builder)."""

    def __init__(self, *args, **kwargs):
        raise _eagle.RecordError(
            "eagle.parallel() is a form of the @eagle.Graph.builder rewrite; outside a builder "
            "function record a fork with r.parallel([fn(branch), ...])"
        )


class Graph:
    """A recorded graph: built once for a device, replayed by ``g()`` with next to no host cost.

    ``Graph.record(fn)`` runs ``fn(r)`` once with a Recorder; ordinary Python control flow
    inside it decides at record time. ``g.build(device)`` captures it (a CUDA graph on a GPU, a
    host schedule on the CPU); ``g()`` launches it once, waits and returns the result (an Array,
    or a tuple of them: the graph's own arrays, valid until its next launch).
    """

    __slots__ = ("_g", "_results", "_results_key", "__weakref__")

    def __init__(self, native):
        self._g = native
        self._results = None
        self._results_key = None
        native.set_warning_handler(lambda message: warnings.warn(message, EagleWarning, 2))

    @staticmethod
    def record(fn, record: bool = False) -> "Graph":
        """Records ``fn(r)`` (r: a Recorder) into a new, unbuilt graph.

        ``record=True`` keeps what reverse mode needs (eagle.diff.reverse)."""
        return Graph(_eagle._Graph.record(_recording_body(fn), record))

    @staticmethod
    def builder(fn=None, **options):
        """``@eagle.Graph.builder``: a function whose if / while / for / match on device cells
        become graph constructs; calling it records and builds a graph. See eagle.builder."""
        from .builder import builder

        return builder(fn, **options) if fn is not None else builder(**options)

    # ---- build
    def build(self, device=None, threads: int = 0, plain_if_only: bool = False,
              stream=None, prioritize_chains: bool = False,
              memsets_as_kernels: bool = True, defer_side_roots: bool = False) -> "Graph":
        """Builds for ``device`` (default: where the params live, the CPU when there are none).
        Returns the graph, so ``Graph.record(f).build()`` reads naturally.

        ``stream``: launch on the caller's stream instead of one of the graph's own, so the
        graph's launches are ordered with the caller's work without a wait: an eagle.Stream, a
        torch.cuda.Stream (``torch.cuda.current_stream()``) or a cudaStream_t as an int. eagle
        borrows it: keep it alive while the graph is used. Needs ``device``.

        ``prioritize_chains`` (GPU): the calls later calls wait on start before the graph's sinks
        when both are ready (CUDA node priorities; BuildOptions::prioritize_chains). Needs
        ``device``.

        ``defer_side_roots`` (GPU): the calls that wait on nothing start after the heaviest of
        them (by the bytes their arrays span) instead of beside it, so that a training step's
        forward starts first (BuildOptions::defer_side_roots). Needs ``device``.

        ``memsets_as_kernels`` (GPU; on by default, the CPU ignores it): the memset nodes of a
        call's own CUDA graph (cuDNN's attention has one) run as kernel nodes, which start sooner
        after the kernels around them (BuildOptions::memsets_as_kernels; issue 12's attention
        step 175.3 against 184.7 us on an H100)."""
        if device is not None and not isinstance(device, _eagle.Device):
            device = _eagle.Device(str(device))
        handle = None
        if stream is not None:
            handle = stream.handle if isinstance(stream, _eagle.Stream) else stream
            handle = int(getattr(handle, "cuda_stream", handle))
        self._g.build(device, threads, plain_if_only, handle, prioritize_chains,
                      memsets_as_kernels, defer_side_roots)
        self._results = None
        return self

    # ---- run
    def __call__(self, n: int = 1):
        """``n`` launches and one wait, then the device checks; returns the result."""
        g = self._g
        g.run(n)
        key = g.rebuild_count
        if self._results is None or self._results_key != key:
            r = tuple(g.results())
            self._results = r[0] if len(r) == 1 else (None if not r else r)
            self._results_key = key
        return self._results

    def launch(self, n: int = 1) -> None:
        """Issues ``n`` launches on the graph's stream without waiting."""
        self._g.launch(n)

    def synchronize(self) -> None:
        """Waits until every launch issued so far has finished."""
        self._g.synchronize()

    def results(self):
        """The arrays of the last launch's result (the graph's own arrays), as a tuple."""
        return tuple(self._g.results())

    def bind(self, name=None, array=None, /, **arrays) -> None:
        """Swaps the arrays bound to params: ``g.bind(x=new)`` or ``g.bind('x', new)``.

        Same shape, dtype, device and contiguity as before; on a GPU the graph is patched in
        place (no capture). Arrays from other libraries are imported on the graph's stream."""
        if name is not None:
            arrays = {name: array, **arrays}
        for k, v in arrays.items():
            self._g.bind(k, v)
        self._results = None

    # ---- introspection
    def _native(name, doc):  # noqa: N805 (a helper of the class body)
        return property(lambda self: getattr(self._g, name), doc=doc)

    built = _native("built", "Whether build() has run.")
    device = _native("device", "The device the graph was built for.")
    backend = _native("backend", "'cuda-graph' or 'cpu-host-schedule' ('' before build).")
    schedule = _native("schedule", "What the backend built, in words.")
    nodes = _native("nodes", "The recorded nodes as dicts (id, kind, label, kernel, arrays, "
                    "deps, waits, bodies, parent, scope, max_turns).")
    edges = _native("edges", "(from, to) node pairs: the dependencies eagle inferred.")
    buffers = _native("buffers", "The recording's buffers as dicts (id, label, kind, shape, "
                      "dtype, bytes).")
    param_names = _native("param_names", "The names bind() takes, in recording order.")
    native_node_count = _native("native_node_count",
                                "Nodes of the CUDA graph or host schedule built.")
    allocated_bytes = _native("allocated_bytes", "Device bytes of the graph's own arrays.")
    workspace_bytes = _native("workspace_bytes", "Bytes of the workspaces its calls ask for "
                              "(planned operations, library calls).")
    saved_bytes = _native("saved_bytes", "Bytes the forward saves for reverse mode.")
    rebuild_count = _native("rebuild_count", "Rebuilds bind() had to do.")
    native_graph = _native("native_graph", "The cudaGraph_t as an int (0 on the CPU).")
    native_graph_exec = _native("native_graph_exec",
                                "The cudaGraphExec_t as an int (0 on the CPU).")
    del _native

    @property
    def stream(self):
        """The eagle.Stream the graph launches on."""
        return self._g.stream()

    def to_json(self) -> str:
        """The recording (nodes, buffers, edges) as JSON."""
        return self._g.to_json()

    def to_dot(self) -> str:
        """The recording as a Graphviz digraph."""
        return self._g.to_dot()

    # ---- traces
    def set_tracing(self, on: bool = True) -> None:
        """From now on every launch times each node (CPU: the host schedule's timers; GPU:
        CUPTI's activity records, NotSupported with the reason where CUPTI is absent)."""
        self._g.set_tracing(on)

    def trace(self) -> list:
        """The trace events so far (node, label, scope, kernel, launch, thread, begin_ns,
        end_ns, device_kernel: the CUDA kernel on a GPU, "" on the CPU)."""
        return self._g.trace()

    def clear_trace(self) -> None:
        """Drops the trace events so far (tracing stays on)."""
        self._g.clear_trace()

    def chrome_trace(self, process: str = "eagle") -> str:
        """The trace so far as Chrome / Perfetto trace-event JSON."""
        return _eagle.chrome_trace_json(self._g.trace(), process)

    def __repr__(self) -> str:
        where = f"built for {self.device} ({self.backend})" if self.built else "not built"
        return f"<eagle.Graph of {len(self.nodes)} nodes, {where}>"


class BucketSet(_eagle.BucketSet):
    """Graphs recorded from one body for capacities T_1 < ... < T_k, sharing one memory arena;
    ``run(L)`` replays the smallest T_b >= L and returns its results (valid until the set's
    next launch).

    ``inputs`` are (name, shape at the largest capacity, dtype[, follows_capacity]) tuples;
    ``body(r, bucket)`` records one bucket's graph (``r.param(name, bucket.input(name))``), with
    kernel calls recording inside it as in Graph.record."""

    def __init__(self, capacities, inputs, device, body, record: bool = False):
        if not isinstance(device, _eagle.Device):
            device = _eagle.Device(str(device))
        super().__init__(list(capacities), list(inputs), device,
                         lambda r, b: _recording_body(lambda rr: body(rr, b))(r), record)

    def graph(self, bucket: int) -> Graph:
        """Bucket ``bucket``'s built graph."""
        return Graph(super().graph(bucket))
