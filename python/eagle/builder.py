"""``@eagle.Graph.builder``: ordinary Python whose ``if`` / ``while`` / ``for`` / ``match`` on
device cells become graph constructs.

The decorator reads and rewrites the function once (eagle._rewrite; ``.source`` shows the
result); calling it records a Graph (each array argument, positional or keyword, becomes
``r.param(name, array)``; other arguments stay Python values), makes the returned Value or tuple
of Values the result, builds it on the arguments' device and returns it: ``g()``,
``g.bind(x=...)`` follow. ``@eagle.Graph.builder(record=True)`` records for reverse mode.

A condition decides by its value when the construct runs:

- a Python value decides once, at record time: only the chosen path is recorded (``for`` over a
  list, ``while n > 0`` with ``n -= 1``, ``if debug:``); print works;
- a one-cell u32 ``eagle.Value`` is a device condition: every arm is recorded and the device
  decides at each launch:

  ``if c: ... else: ...``            Recorder.if_ (``not``, ``and``, ``or`` on cells work)
  ``if a: ... elif b: ... else:``    Recorder.if_chain, decided once at the head
  ``match k: case 0: ... case 1 | 2: ... case _: pass``   Recorder.switch_ (no arm runs for
                                     other values; ``case _:`` with a body is refused)
  ``while c: ...``                   Recorder.while_ (a condition that is not a bare name is
                                     recomputed at the end of each turn into the cell)
  ``for _ in range(N): ... if c: break / if not c: continue``   Recorder.for_ with break_if /
                                     continue_if, which guard the rest of the body
  ``with eagle.parallel() as (b1, b2): with b1: ... with b2: b2.wait(y) ...``
                                     Recorder.parallel; branches run concurrently

A ``for _ in range(N)`` holding ``if c: break`` / ``continue`` is tried as a device loop; when
its first guard's condition is a Python value, that recording is undone (the names restored)
and the loop runs as Python: other Python side effects made before that guard in the first turn
happen twice.

A name rebound inside a device arm or loop body to a new Value is merged into the array it held
before (Recorder.assign), so it keeps one array across the construct and across a loop's turns.
The runtime here does that: it snapshots the names a construct assigns, runs an arm, and assigns
each rebound name (at the end of the arm, and before each break_if / continue_if, which guard the
rest of a loop body). A Value first made inside an arm is readable only there.

What cannot be recorded is a BuildError (an eagle.RecordError) naming the file and line: a
device condition in ``x if c else y`` or a comprehension, ``return`` / ``break`` / ``continue``
inside a device arm other than the guard forms, a ``while`` on a Python value that never
changes, a name holding a Value rebound to a Python value in a device arm, a malformed
``eagle.parallel()`` block, a generator.
"""

from __future__ import annotations

import functools
import inspect

from . import _rewrite


def _api():
    import eagle

    return eagle


def _record_error():
    try:
        return _api().RecordError
    except AttributeError:  # the extension is not there: a plain exception base
        return RuntimeError


class BuildError(_record_error()):
    """A builder function that cannot be recorded as written; names the file and line."""

    def __init__(self, message, filename=None, lineno=None):
        self.message, self.filename, self.lineno = message, filename, lineno
        where = f"{filename}:{lineno}: " if filename else ""
        super().__init__(where + message)


class Signal:
    """What an arm or loop body hands back for a ``return``, ``break`` or ``continue``."""

    __slots__ = ("kind", "value", "line")

    def __init__(self, kind, value, line):
        self.kind, self.value, self.line = kind, value, line

    brk = property(lambda self: self.kind == "break")
    cont = property(lambda self: self.kind == "continue")


class _Unbound:
    def __repr__(self):
        return "<unbound>"


UNBOUND = _Unbound()
_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None), frozenset, range)


class _PythonLoop(Exception):
    """A capped loop's guard turned out to be a Python value: record the loop as Python."""

    def __init__(self, frame):
        super().__init__("internal: not a device loop")
        self.frame = frame


class _Loop:
    def __init__(self, mode, recorder, snap, base):
        self.mode, self.recorder, self.snap, self.base = mode, recorder, snap, base


def _noop():
    pass


class Runtime:
    """The calls the rewritten function makes (one runtime per builder function)."""

    UNBOUND = UNBOUND

    def __init__(self, filename):
        self.filename = filename
        self.loops: list[_Loop] = []

    # ---- small helpers the rewritten code calls
    @staticmethod
    def peek(read):
        try:
            return read()
        except NameError:
            return UNBOUND

    @staticmethod
    def ret(value, line):
        return Signal("return", value, line)

    @staticmethod
    def brk(line):
        return Signal("break", None, line)

    @staticmethod
    def cont(line):
        return Signal("continue", None, line)

    @staticmethod
    def is_cell(v):
        return isinstance(v, _api().Value)

    def error(self, line, message):
        return BuildError(message, self.filename, line)

    def py_cond(self, v, line, what):
        if self.is_cell(v):
            raise self.error(line, f"a device condition ({v!r}) in {what}: it is decided on the "
                             "device at every launch, so Python cannot pick a branch here; "
                             "write an if statement (both arms are recorded)")
        return v

    def not_(self, v, line):
        if not self.is_cell(v):
            return not v
        self.check_cell(line, v, "the operand of `not`")
        with self.at(line):
            return _api().kernels.cell_none(v, v)

    def and_(self, a, rest, line):
        if not self.is_cell(a):
            return rest() if a else a
        b = rest()
        if not self.is_cell(b):
            return a if b else False
        k = _api().kernels
        with self.at(line):
            return k.cell_none(k.cell_none(a, a), k.cell_none(b, b))

    def or_(self, a, rest, line):
        if not self.is_cell(a):
            return a if a else rest()
        b = rest()
        if not self.is_cell(b):
            return True if b else a
        with self.at(line):
            return _api().kernels.cell_or(a, b)

    def check_cell(self, line, v, what):
        api = _api()
        shape = tuple(v.shape)
        n = 1
        for d in shape:
            n *= d
        if n != 1 or v.dtype != api.u32:
            raise self.error(line, f"{what} is {v!r} ({v.dtype}, shape {shape}): a device "
                             "condition must be a one-cell u32 array")

    def recorder(self, line):
        r = _api().current_recorder()
        if r is None:
            raise self.error(line, "a device condition outside a recording (call the builder "
                             "function, which records)")
        return r

    def at(self, line, what=None):
        return _At(self, line, what)

    # ---- names across device arms
    def _merge(self, r, line, snap, base, after):
        """Assigns each rebound name's new Value to its old one (Recorder.assign)."""
        names = snap[0]
        out = list(after)
        for i, (b, a) in enumerate(zip(base, after)):
            if a is b:
                continue
            if self.is_cell(b):
                if a is UNBOUND or not self.is_cell(a):
                    raise self.error(line, f"`{names[i]}` held a device array before this "
                                     f"construct and is rebound to {a!r} inside a device arm or "
                                     "loop body: a name must keep holding an eagle.Value there")
                if a.id == b.id:
                    continue
                with self.at(line, f"rebinding `{names[i]}`"):
                    out[i] = r.assign(b, a)
        return out

    def _arm(self, r, line, fn, snap, state, restore, what, *args):
        """A recorded arm: runs fn with the names as they were before the construct (restore)
        or as the previous arm left them, then merges what it rebound."""

        def run(*branch):
            if snap is not None:
                base = state["before"] if restore else snap[1]()
                if restore:
                    snap[2](base)
            s = _user(fn, *branch)
            if s is not None:
                raise self.error(s.line, f"`{s.kind}` inside {what}: " + _SIGNAL_HELP[s.kind])
            if snap is not None:
                merged = self._merge(r, line, snap, base, snap[1]())
                snap[2](merged)
                for i, (b, m) in enumerate(zip(base, merged)):
                    if m is not b:
                        state["final"][i] = m

        return run

    def _device(self, line, snap, record):
        """Runs record(state) (which calls the recorder with arms from _arm), then leaves
        every name as the arms left it."""
        state = {}
        if snap is not None:
            before = snap[1]()
            state = {"before": before, "final": list(before)}
        with self.at(line):
            record(state)
        if snap is not None:
            snap[2](state["final"])

    # ---- if / elif / else
    def if_(self, lines, first, rest, arms, else_fn, snap):
        device = []  # (cell, arm) decided on the device
        for k, arm in enumerate(arms):
            c = first if k == 0 else rest[k - 1]()
            if self.is_cell(c):
                self.check_cell(lines[k], c, "the condition")
                device.append((c, arm))
                continue
            if c:
                if not device:
                    return arm()  # decided here, in Python
                else_fn = arm  # a true Python condition after device ones: the chain's else
                break
        if not device:
            return else_fn() if else_fn is not None else None
        line = lines[0]
        r = self.recorder(line)
        what = "a device branch (an if on a device cell)"

        def record(state):
            wrap = [self._arm(r, line, a, snap, state, True, what) for _, a in device]
            other = self._arm(r, line, else_fn, snap, state, True, what) if else_fn else None
            if len(device) == 1:
                r.if_(device[0][0], wrap[0], other)
            else:
                r.if_chain([(c, w) for (c, _), w in zip(device, wrap)], other)

        self._device(line, snap, record)
        return None

    # ---- match
    def switch_(self, line, cell, table, snap):
        if table and isinstance(table[0], str):  # (why not, the case's line)
            raise self.error(table[1], table[0])
        self.check_cell(line, cell, "the match subject")
        n = 1 + max((v for values, _ in table for v in values), default=-1)
        if n == 0:
            return None
        arms = [None] * n
        for values, fn in table:
            for v in values:
                if arms[v] is None:  # the first case that names a value wins, as in Python
                    arms[v] = fn
        r = self.recorder(line)
        what = "a device switch (a match on a device cell)"

        def record(state):
            r.switch_(cell, [self._arm(r, line, a or _noop, snap, state, True, what)
                             for a in arms])

        self._device(line, snap, record)
        return None

    # ---- while
    def while_(self, line, cond, body, else_fn, snap, simple, probe):
        c = cond()
        if self.is_cell(c):
            return self._device_while(line, c, cond, body, else_fn, snap, simple)
        turns = 0
        while True:
            if self.is_cell(c):
                raise self.error(line, f"the condition of this while became a device cell after "
                                 f"{turns} Python turns; a loop is either decided in Python or "
                                 "on the device from its first test")
            if not c:
                return else_fn() if else_fn is not None else None
            if turns == 0 and probe is not None and all(
                    isinstance(v, _IMMUTABLE) for v in probe()):
                raise self.error(line, "a while on a Python value that never changes: the body "
                                 "rebinds none of the names its condition reads and cannot leave "
                                 "the loop, so it would never end. A device loop needs a one-cell "
                                 "u32 eagle.Value as its condition")
            s = body()
            turns += 1
            if s is not None:
                if s.brk:
                    return None
                if not s.cont:
                    return s
            c = cond()

    def _device_while(self, line, cell, cond, body, else_fn, snap, simple):
        self.check_cell(line, cell, "the condition of this while")
        r = self.recorder(line)
        what = "a device while loop"

        def record(state):
            arm = self._arm(r, line, body, snap, state, False, what)

            def turn():
                arm()
                if not simple:  # a condition computed from the names: recompute into the cell
                    c = cond()
                    if not self.is_cell(c):
                        raise self.error(line, "the condition of this device while turned into "
                                         f"the Python value {c!r} after its body")
                    if c.id != cell.id:
                        with self.at(line, "updating the loop's condition cell"):
                            r.assign(cell, c)

            r.while_(cell, turn)

        self._device(line, snap, record)
        return else_fn() if else_fn is not None else None

    # ---- for _ in range(N): ... if c: break
    def for_(self, line, iterable, body, snap):
        r = _api().current_recorder()
        if r is not None and isinstance(iterable, range):
            before = snap[1]() if snap is not None else None
            frame = _Loop("device", r, snap, before)
            self.loops.append(frame)
            try:
                self._device_for(line, len(iterable), body, frame)
                return None
            except _PythonLoop as e:
                if e.frame is not frame:
                    raise
                if snap is not None:
                    snap[2](before)
            finally:
                self.loops.pop()
        self.loops.append(_Loop("python", r, snap, None))
        try:
            for i in iterable:
                s = body(i)
                if s is not None:
                    if s.brk:
                        break
                    if not s.cont:
                        return s
        finally:
            self.loops.pop()
        return None

    def _device_for(self, line, n, body, frame):
        r = frame.recorder
        snap = frame.snap
        start = frame.base

        def turn():
            frame.base = start
            s = _user(body, None)
            if s is not None:
                raise self.error(s.line, f"`{s.kind}` inside a device loop: "
                                 + _SIGNAL_HELP[s.kind])
            self._rebase(frame, line)

        with self.at(line):
            r.for_(n, turn)
        if snap is not None:
            snap[2](frame.base)

    def _rebase(self, frame, line):
        if frame.snap is not None:
            merged = self._merge(frame.recorder, line, frame.snap, frame.base, frame.snap[1]())
            frame.snap[2](merged)
            frame.base = merged

    def break_if(self, line, c):
        return self._guard(line, c, "break")

    def continue_if(self, line, c):
        return self._guard(line, c, "continue")

    def _guard(self, line, c, kind):
        frame = self.loops[-1] if self.loops else None
        if frame is None or frame.mode == "python":
            if self.is_cell(c):
                raise self.error(line, f"a device `if c: {kind}` in a loop recorded as Python: "
                                 "a device break or continue needs `for _ in range(N):` (N a "
                                 "Python int, the loop variable unused) whose every guard "
                                 "condition is a device cell")
            return bool(c)
        if not self.is_cell(c):
            raise _PythonLoop(frame)
        self.check_cell(line, c, f"the condition of `if ...: {kind}`")
        self._rebase(frame, line)
        with self.at(line):
            (frame.recorder.break_if if kind == "break" else frame.recorder.continue_if)(c)
        return False

    # ---- with eagle.parallel() as (b1, b2):
    def parallel(self, line, branches, snap):
        r = self.recorder(line)
        what = "a fork branch (with eagle.parallel())"

        def record(state):
            r.parallel([self._arm(r, line, fn, snap, state, False, what) for fn in branches])

        self._device(line, snap, record)
        return None


_SIGNAL_HELP = {
    "return": "every arm is recorded and the device picks one at each launch, so the function "
              "cannot return from inside one; assign the result to a name made before the "
              "construct and return after it",
    "break": "a device loop breaks only with `if c: break` directly in the body of a capped "
             "`for _ in range(N):` (c a one-cell u32 device cell)",
    "continue": "a device loop continues only with `if c: continue` directly in the body of a "
                "capped `for _ in range(N):` (c a one-cell u32 device cell)",
}


def _user(fn, *args):
    """Calls user code; marks what it raises so the construct around does not re-label it."""
    try:
        return fn(*args)
    except BaseException as e:
        try:
            e._eagle_user = True
        except AttributeError:
            pass
        raise


class _At:
    """Turns an eagle error from the recorder into a BuildError naming the line."""

    def __init__(self, rt, line, what=None):
        self.rt, self.line, self.what = rt, line, what

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if e is None or isinstance(e, (BuildError, _PythonLoop)) or getattr(e, "_eagle_user",
                                                                              False):
            return False
        api = _api()
        if not isinstance(e, getattr(api, "Error", ())) and not isinstance(e, ValueError):
            return False
        what = f"{self.what}: " if self.what else ""
        raise self.rt.error(self.line, what + str(e)) from e


# ---------------------------------------------------------------- the decorator


def _is_array(v):
    api = _api()
    if isinstance(v, api.Array):
        return True
    if isinstance(v, (api.Value, api.Kernel)):
        return False
    return hasattr(v, "__dlpack__") or hasattr(v, "__cuda_array_interface__")


class _Slot:
    """Where an array argument goes: replaced by its param's Value when recording."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class GraphBuilder:
    """What ``@eagle.Graph.builder`` returns: call it with arrays to record and build a Graph.

    ``.source`` is the rewritten function as text."""

    def __init__(self, fn, record=False):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._record = record
        self._signature = inspect.signature(fn)
        make, self.source = _rewrite.rewrite(fn)  # the one parse
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self._runtime = Runtime(filename)
        self._rewritten = make(self._runtime)
        self._line = fn.__code__.co_firstlineno

    def __call__(self, *args, **kwargs):
        api = _api()
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arrays = []  # (param name, array), in order: each becomes r.param(name, array)

        def slot(name, v):
            arrays.append((name, v if isinstance(v, api.Array) else api.asarray(v)))
            return _Slot(len(arrays) - 1)

        params = self._signature.parameters
        for name, v in list(bound.arguments.items()):
            kind = params[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = tuple(
                    slot(f"{name}{i}", x) if _is_array(x) else x for i, x in enumerate(v))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {k: slot(k, x) if _is_array(x) else x
                                         for k, x in v.items()}
            elif _is_array(v):
                bound.arguments[name] = slot(name, v)

        def body(r):
            values = [r.param(name, a) for name, a in arrays]

            def fill(v):
                return values[v.index] if isinstance(v, _Slot) else v

            call = {}
            for name, v in bound.arguments.items():
                if isinstance(v, tuple) and params[name].kind is inspect.Parameter.VAR_POSITIONAL:
                    call[name] = tuple(fill(x) for x in v)
                elif isinstance(v, dict) and params[name].kind is inspect.Parameter.VAR_KEYWORD:
                    call[name] = {k: fill(x) for k, x in v.items()}
                else:
                    call[name] = fill(v)
            b = inspect.BoundArguments(self._signature, call)
            out = self._rewritten(*b.args, **b.kwargs)
            if out is None:
                return
            if isinstance(out, api.Value):
                r.result(out)
            elif isinstance(out, (tuple, list)) and out and all(
                    isinstance(v, api.Value) for v in out):
                r.result(list(out))
            else:
                raise BuildError(f"{self._fn.__qualname__} returned {out!r}: a builder returns an "
                                 "eagle.Value, a tuple of Values, or None",
                                 self._runtime.filename, self._line)

        g = api.Graph.record(body, record=self._record)
        g.build(arrays[0][1].device if arrays else None)
        return g

    def __get__(self, obj, objtype=None):
        """A builder defined in a class body is a method: obj.f(x) passes obj as self."""
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"<eagle graph builder {self._fn.__qualname__}>"


def builder(fn=None, *, record=False):
    """``@eagle.Graph.builder`` or ``@eagle.Graph.builder(record=True)``."""
    if fn is None:
        return lambda f: GraphBuilder(f, record=record)
    return GraphBuilder(fn, record=record)
