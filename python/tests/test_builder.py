"""@eagle.Graph.builder: every form of the rewrite, each recorded, built on the CPU and run
against numpy on fresh random inputs; the one parse; errors that name the line."""

import ast
import inspect

import numpy as np
import pytest

import eagle
from conftest import random_values

K = eagle.kernels


def cell(v):
    return np.full(1, v, np.uint32)


def kinds(g):
    return [n["kind"] for n in g.nodes]


def line_of(fn, text):
    """The file line of the first source line of fn holding text."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


# ---------------------------------------------------------------- if


def test_python_condition_decides_once(rng):
    x = random_values(rng, (16,))

    @eagle.Graph.builder
    def f(x, double):
        if double:
            y = K.scale(x, 2.0)
        else:
            y = K.scale(x, -1.0)
        return y

    g = f(x, True)
    assert "if" not in kinds(g)  # only the chosen path was recorded
    assert kinds(g).count("kernel") == 1
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(f(x, False)().numpy(), -x, rtol=1e-6)


def test_device_if_else_records_both_arms(rng):
    x = random_values(rng, (16,))

    @eagle.Graph.builder
    def f(x, c):
        y = K.copy(x)
        if c:
            y = K.scale(y, 2.0)  # rebound in the arm: merged into y's array
        else:
            y = K.scale(y, -3.0)
        return y

    g = f(x, cell(1))
    assert "if" in kinds(g)
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), -3 * x, rtol=1e-6)
    g.bind(c=cell(7))
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)


def test_device_if_without_else_keeps_the_old_value(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, c):
        y = K.scale(x, 1.0)
        if c:
            y = K.add(y, x)
            y = K.add(y, x)  # rebound twice: the last value is merged
        return y

    g = f(x, cell(0))
    np.testing.assert_allclose(g().numpy(), x, rtol=1e-6)
    g.bind(c=cell(1))
    np.testing.assert_allclose(g().numpy(), 3 * x, rtol=1e-6)


def test_device_if_with_not_and_or(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, a, b):
        y = K.copy(x)
        if not a:
            y = K.scale(y, 2.0)
        z = K.copy(x)
        if a and b:
            z = K.scale(z, 3.0)
        w = K.copy(x)
        if a or b:
            w = K.scale(w, 5.0)
        return y, z, w

    g = f(x, cell(0), cell(0))
    for a, b in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        g.bind(a=cell(a), b=cell(b))
        y, z, w = g()
        np.testing.assert_allclose(y.numpy(), (1 if a else 2) * x, rtol=1e-6)
        np.testing.assert_allclose(z.numpy(), (3 if a and b else 1) * x, rtol=1e-6)
        np.testing.assert_allclose(w.numpy(), (5 if a or b else 1) * x, rtol=1e-6)


def test_elif_chain_on_cells_decides_once_at_the_head(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, a, b):
        y = K.copy(x)
        if a:
            y = K.scale(y, 10.0)
        elif b:
            y = K.scale(y, 20.0)
        else:
            y = K.scale(y, 30.0)
        return y

    g = f(x, cell(1), cell(1))
    assert kinds(g).count("switch") == 1  # one decision for the whole chain
    for a, b, want in [(1, 1, 10), (1, 0, 10), (0, 1, 20), (0, 0, 30)]:
        g.bind(a=cell(a), b=cell(b))
        np.testing.assert_allclose(g().numpy(), want * x, rtol=1e-6)


def test_elif_with_a_true_python_condition_after_a_cell_is_the_else(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, a, fallback):
        y = K.copy(x)
        if a:
            y = K.scale(y, 2.0)
        elif fallback:
            y = K.scale(y, 4.0)
        else:
            y = K.scale(y, 8.0)  # never recorded when fallback is true
        return y

    g = f(x, cell(0), True)
    assert kinds(g).count("if") == 1
    np.testing.assert_allclose(g().numpy(), 4 * x, rtol=1e-6)
    g.bind(a=cell(1))
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)
    g = f(x, cell(0), False)
    np.testing.assert_allclose(g().numpy(), 8 * x, rtol=1e-6)


def test_name_first_bound_in_a_python_arm(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, mode):
        if mode == "double":
            y = K.scale(x, 2.0)
        elif mode == "negate":
            y = K.scale(x, -1.0)
        return y

    np.testing.assert_allclose(f(x, "double")().numpy(), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(f(x, "negate")().numpy(), -x, rtol=1e-6)
    with pytest.raises(NameError):  # as in plain Python: y was never bound
        f(x, "other")


# ---------------------------------------------------------------- match


def test_match_on_a_cell_is_a_switch(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, k):
        y = K.copy(x)
        match k:
            case 0:
                y = K.scale(y, 2.0)
            case 1 | 2:
                y = K.scale(y, 3.0)
            case 4:
                y = K.scale(y, 5.0)
            case _:
                pass  # other values: no arm runs
        return y

    g = f(x, cell(0))
    assert "switch" in kinds(g)
    for k, want in [(0, 2), (1, 3), (2, 3), (3, 1), (4, 5), (9, 1), (0, 2)]:
        g.bind(k=cell(k))
        np.testing.assert_allclose(g().numpy(), want * x, rtol=1e-6)


def test_match_on_a_python_value_keeps_python_patterns(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, spec):
        match spec:
            case ("scale", s):
                y = K.scale(x, s)
            case {"add": n}:
                y = x
                for _ in range(n):
                    y = K.add(y, x)
            case _:
                y = K.copy(x)
        return y

    np.testing.assert_allclose(f(x, ("scale", 4.0))().numpy(), 4 * x, rtol=1e-6)
    g = f(x, {"add": 2})
    assert kinds(g).count("kernel") == 2 and "switch" not in kinds(g)
    np.testing.assert_allclose(g().numpy(), 3 * x, rtol=1e-6)
    np.testing.assert_allclose(f(x, None)().numpy(), x, rtol=1e-6)


# ---------------------------------------------------------------- while


def test_while_on_a_cell_is_a_loop_node(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, n):
        y = K.copy(x)
        remaining = K.copy(n)
        stop = K.fill(0, buffer=eagle.current_recorder().empty((1,), eagle.u32))
        going = K.cell_or(remaining, remaining)
        while going:
            y = K.scale(y, 2.0)
            going, remaining = K.loop_next(remaining, stop)
        return y

    g = f(x, cell(3))
    assert kinds(g).count("while") == 1
    np.testing.assert_allclose(g().numpy(), 8 * x, rtol=1e-6)
    g.bind(n=cell(5))
    np.testing.assert_allclose(g().numpy(), 32 * x, rtol=1e-6)
    g.bind(n=cell(0))
    np.testing.assert_allclose(g().numpy(), x, rtol=1e-6)


def test_while_not_recomputes_its_condition_each_turn(rng):
    x = random_values(rng, (8,), np.float64)

    @eagle.Graph.builder
    def f(x, stop_at):
        r = eagle.current_recorder()
        acc = K.copy(x)
        turns = K.fill(0, buffer=r.empty((1,), eagle.u32, "turns"))
        done = K.equal_mask(turns, stop_at, buffer=r.empty((1,), eagle.u32, "done"))
        while not done:
            acc = K.add(acc, x)
            K.cell_increment(turns, buffer=turns)
            K.equal_mask(turns, stop_at, buffer=done)
        return acc

    g = f(x, cell(4))
    np.testing.assert_allclose(g().numpy(), 5 * x)
    g.bind(stop_at=cell(1))
    np.testing.assert_allclose(g().numpy(), 2 * x)


def test_while_on_a_python_value_unrolls(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, n):
        y = x
        while n > 0:
            y = K.add(y, x)
            n -= 1
        else:
            y = K.scale(y, 0.5)
        return y

    g = f(x, 3)
    assert "while" not in kinds(g) and kinds(g).count("kernel") == 4
    np.testing.assert_allclose(g().numpy(), 2 * x, rtol=1e-6)


def test_python_while_with_break_and_continue(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x):
        y = x
        i = 0
        while True:
            i += 1
            if i == 2:
                continue
            if i > 4:
                break
            y = K.add(y, x)
        return y

    g = f(x)
    assert kinds(g).count("kernel") == 3  # turns 1, 3 and 4
    np.testing.assert_allclose(g().numpy(), 4 * x, rtol=1e-6)


# ---------------------------------------------------------------- for


def test_capped_for_with_if_not_cell_break(rng):
    x = random_values(rng, (8,), np.float64)

    @eagle.Graph.builder
    def f(x, n):
        stop = K.fill(0, buffer=eagle.current_recorder().empty((1,), eagle.u32))
        remaining = K.copy(n)
        y = K.copy(x)
        for _ in range(10):
            y = K.scale(y, 2.0)  # rebound before the guard: merged there
            going, remaining = K.loop_next(remaining, stop)
            if not going:
                break
        return y

    g = f(x, cell(3))
    assert kinds(g).count("while") == 1
    np.testing.assert_allclose(g().numpy(), 8 * x)
    g.bind(n=cell(50))  # the cap of 10 ends it
    np.testing.assert_allclose(g().numpy(), 1024 * x)
    g.bind(n=cell(1))
    np.testing.assert_allclose(g().numpy(), 2 * x)


def test_capped_for_with_continue_and_break(rng):
    x = random_values(rng, (8,), np.float64)

    @eagle.Graph.builder
    def f(x, skip_at, stop_at):
        r = eagle.current_recorder()
        turns = K.fill(0, buffer=r.empty((1,), eagle.u32, "turns"))
        acc = K.scale(x, 0.0)
        for _ in range(6):
            K.cell_increment(turns, buffer=turns)
            if K.equal_mask(turns, stop_at):
                break
            if K.equal_mask(turns, skip_at):
                continue
            acc = K.add(acc, x)  # guarded by both
        return acc

    g = f(x, cell(2), cell(100))
    np.testing.assert_allclose(g().numpy(), 5 * x)  # turns 1, 3, 4, 5, 6
    g.bind(stop_at=cell(4))
    np.testing.assert_allclose(g().numpy(), 2 * x)  # turns 1, 3
    g.bind(skip_at=cell(9), stop_at=cell(9))
    np.testing.assert_allclose(g().numpy(), 6 * x)


def test_for_over_python_values_unrolls(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, steps, factors):
        y = x
        for k in steps:
            y = k(y, x)
        for i in range(len(factors)):
            y = K.scale(y, factors[i])
        return y

    g = f(x, [K.add, K.mul], [2.0, 3.0])
    assert kinds(g) == ["kernel"] * 4
    np.testing.assert_allclose(g().numpy(), 6 * (x + x) * x, rtol=1e-5)


def test_range_loop_with_a_python_break_is_python(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, limit):
        # Tried as a device loop first: the guard's Python value undoes that (names are
        # restored; other Python side effects before the first guard would happen twice).
        y = x
        k = 0
        for _ in range(10):
            y = K.add(y, x)
            k += 1
            if k >= limit:
                break
        return y

    g = f(x, 3)
    assert "while" not in kinds(g) and kinds(g).count("kernel") == 3
    np.testing.assert_allclose(g().numpy(), 4 * x, rtol=1e-6)


# ---------------------------------------------------------------- nesting


def test_nested_device_constructs(rng):
    x = random_values(rng, (8,), np.float64)

    @eagle.Graph.builder
    def f(x, n, c, k):
        stop = K.fill(0, buffer=eagle.current_recorder().empty((1,), eagle.u32))
        remaining = K.copy(n)
        y = K.copy(x)
        for _ in range(8):
            if c:
                y = K.scale(y, 2.0)
                match k:
                    case 0:
                        y = K.add(y, x)
                    case 1:
                        y = K.scale(y, -1.0)
            else:
                y = K.add(y, x)
            going, remaining = K.loop_next(remaining, stop)
            if not going:
                break
        return y

    def reference(n, c, k):
        y = x.copy()
        for _ in range(min(max(n, 1), 8)):
            if c:
                y = 2 * y
                y = y + x if k == 0 else (-y if k == 1 else y)
            else:
                y = y + x
        return y

    g = f(x, cell(3), cell(1), cell(0))
    for n, c, k in [(3, 1, 0), (2, 1, 1), (4, 0, 1), (20, 1, 2), (1, 0, 0)]:
        g.bind(n=cell(n), c=cell(c), k=cell(k))
        np.testing.assert_allclose(g().numpy(), reference(n, c, k))


def test_nested_function_and_closure(rng):
    x = random_values(rng, (8,))
    factor = 3.0

    @eagle.Graph.builder
    def f(x, c):
        def twice_if(v, cond):
            out = K.copy(v)
            if cond:
                out = K.scale(out, 2.0)
            return out

        y = twice_if(x, c)
        return K.scale(y, factor)  # factor: a closure cell of the test

    g = f(x, cell(1))
    np.testing.assert_allclose(g().numpy(), 6 * x, rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), 3 * x, rtol=1e-6)
    factor = 5.0  # the closure is read when recording, as in plain Python
    np.testing.assert_allclose(f(x, cell(0))().numpy(), 5 * x, rtol=1e-6)


COUNT = 0


def test_python_loops_and_globals_inside_device_arms(rng):
    x = random_values(rng, (8,))

    @eagle.Graph.builder
    def f(x, c, factors):
        global COUNT
        y = K.copy(x)
        if c:
            for s in factors:  # an ordinary loop in a device arm, with a Python break
                if s > 4.0:
                    break
                COUNT += 1
                y = K.scale(y, s)
        else:
            y = K.scale(y, -1.0)
        return y

    g = f(x, cell(1), [2.0, 3.0, 5.0, 7.0])
    assert COUNT == 2
    np.testing.assert_allclose(g().numpy(), 6 * x, rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), -x, rtol=1e-6)


def test_builder_as_a_method(rng):
    x = random_values(rng, (8,))

    class Model:
        def __init__(self, alpha):
            self.alpha = alpha

        @eagle.Graph.builder
        def forward(self, x, c):
            y = K.copy(x)
            if c:
                y = K.scale(y, self.alpha)
            return y

    g = Model(4.0).forward(x, cell(1))
    np.testing.assert_allclose(g().numpy(), 4 * x, rtol=1e-6)
    g.bind(c=cell(0))
    np.testing.assert_allclose(g().numpy(), x, rtol=1e-6)


# ---------------------------------------------------------------- parallel


def test_parallel_branches_and_wait(rng):
    x = random_values(rng, (32,))

    @eagle.Graph.builder
    def f(x):
        with eagle.parallel() as (b1, b2, b3):
            with b1:
                y1 = K.scale(x, 2.0)
            with b2:
                y2 = K.scale(x, 3.0)
            with b3:
                b3.wait(y1)
                y3 = K.add(y1, x)
        return K.add(K.add(y1, y2), y3)

    g = f(x)
    fork = [n for n in g.nodes if n["kind"] == "parallel"]
    assert len(fork) == 1 and len(fork[0]["bodies"]) == 3
    np.testing.assert_allclose(g().numpy(), 8 * x, rtol=1e-6)


# ---------------------------------------------------------------- buffer=, record=True, print


def test_buffer_keyword_writes_the_callers_array(rng):
    x = random_values(rng, (8,))
    out = eagle.empty((8,), eagle.f32)

    @eagle.Graph.builder
    def f(x, c):
        K.scale(x, 2.0, buffer=out)
        if c:
            K.scale(x, 7.0, buffer=out)
        return None

    g = f(x, cell(1))
    g()
    np.testing.assert_allclose(out.numpy(), 7 * x, rtol=1e-6)
    g.bind(c=cell(0))
    g()
    np.testing.assert_allclose(out.numpy(), 2 * x, rtol=1e-6)


def test_record_true_keeps_what_reverse_mode_needs(rng):
    x = random_values(rng, (6,), np.float64)
    w = random_values(rng, (6,), np.float64)

    @eagle.Graph.builder(record=True)
    def f(x, w):
        y = K.mul(x, w)
        return K.sum(K.mul(y, y))

    g = f(x, w)
    np.testing.assert_allclose(g().numpy()[0], np.sum((x * w) ** 2))
    back = eagle.diff.reverse(g, "result", ["x"])
    g()
    np.testing.assert_allclose(back().numpy(), 2 * x * w * w, rtol=1e-12)

    @eagle.Graph.builder
    def plain(x, w):
        return K.mul(x, w)

    with pytest.raises(eagle.Error):
        eagle.diff.reverse(plain(x, w), "result", ["x"])


def test_print_works_and_arguments_by_keyword(rng, capsys):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, alpha=2.0, *, beta):
        print("recording with", alpha, beta)
        return K.scale(x, alpha * beta)

    g = f(beta=3.0, x=x)
    assert "recording with 2.0 3.0" in capsys.readouterr().out
    g()
    assert capsys.readouterr().out == ""  # nothing runs Python again
    np.testing.assert_allclose(g().numpy(), 6 * x, rtol=1e-6)
    assert g.param_names == ["x"]


def test_var_arguments_become_params(rng):
    x, v, u, w = (random_values(rng, (8,)) for _ in range(4))

    @eagle.Graph.builder
    def f(a, b, *more, **named):
        y = K.add(a, b)
        for m in more:
            y = K.add(y, m)
        return K.mul(y, named["w"])

    g = f(x, v, u, w=w)
    assert g.param_names == ["a", "b", "more0", "w"]
    np.testing.assert_allclose(g().numpy(), (x + v + u) * w, rtol=1e-5)
    v2 = random_values(rng, (8,))
    g.bind(b=v2)
    np.testing.assert_allclose(g().numpy(), (x + v2 + u) * w, rtol=1e-5)


def test_a_builder_returning_something_else_is_refused(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x):
        return 3.0

    with pytest.raises(eagle.BuildError, match="returned 3.0"):
        f(x)


# ---------------------------------------------------------------- the one parse


def test_the_rewrite_is_parsed_once(rng, monkeypatch):
    x = random_values(rng, (4,))
    calls = []
    real_parse = ast.parse

    def counting_parse(*args, **kwargs):
        calls.append(1)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting_parse)

    def f(x, c):
        y = K.copy(x)
        if c:
            y = K.scale(y, 2.0)
        return y

    b = eagle.Graph.builder(f)
    assert len(calls) == 1
    g1 = b(x, cell(1))
    g2 = b(x, cell(0))
    assert len(calls) == 1  # calling it parses nothing
    np.testing.assert_allclose(g1().numpy(), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(g2().numpy(), x, rtol=1e-6)
    assert "_eagle_rt.if_" in b.source


# ---------------------------------------------------------------- errors name the line


def raises_at(fn, text, *args, match=None):
    """Calls the builder; expects a BuildError at the line of fn holding text."""
    with pytest.raises(eagle.RecordError) as e:
        fn(*args)
    assert isinstance(e.value, eagle.BuildError)
    assert e.value.lineno == line_of(fn.__wrapped__, text), str(e.value)
    assert f"test_builder.py:{e.value.lineno}:" in str(e.value)
    if match:
        assert match in str(e.value), str(e.value)
    return e.value


def test_error_device_condition_in_a_conditional_expression(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        return K.scale(x, 2.0) if c else x  # here

    raises_at(f, "# here", x, cell(1), match="conditional expression")


def test_error_device_condition_in_a_comprehension(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        ys = [K.scale(x, s) for s in (1.0, 2.0) if c]  # here
        return ys[0]

    raises_at(f, "# here", x, cell(1), match="comprehension")


def test_error_return_inside_a_device_branch(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        if c:
            return K.scale(x, 2.0)  # here
        return x

    raises_at(f, "# here", x, cell(1), match="`return` inside a device branch")


def test_return_inside_a_python_branch_is_fine(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, early):
        for _ in range(3):
            if early:
                return K.scale(x, 2.0)
        return K.scale(x, 3.0)

    np.testing.assert_allclose(f(x, True)().numpy(), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(f(x, False)().numpy(), 3 * x, rtol=1e-6)


def test_error_break_in_a_device_while(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, going):
        while going:
            x = K.scale(x, 2.0)
            if going:
                break  # here
        return x

    raises_at(f, "# here", x, cell(1), match="`break` inside a device branch")


def test_error_plain_break_in_a_device_while(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, going):
        while going:
            x = K.scale(x, 2.0)
            break  # here
        return x

    raises_at(f, "# here", x, cell(1), match="`break` inside a device while loop")


def test_error_break_not_in_guard_form(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c, d):
        for _ in range(4):
            x = K.scale(x, 2.0)
            if d:
                break
            if c:
                x = K.add(x, x)
                break  # here
        return x

    raises_at(f, "# here", x, cell(1), cell(0), match="`break` inside a device branch")


def test_error_device_break_in_a_loop_over_a_list(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        for s in [1.0, 2.0]:
            x = K.scale(x, s)
            if c:  # here
                break
        return x

    raises_at(f, "break", x, cell(1), match="`break` inside a device branch")


def test_error_while_on_a_python_value_that_never_changes(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, n):
        y = x
        while n > 0:  # here
            y = K.add(y, x)
        return y

    raises_at(f, "# here", x, 3, match="never changes")
    np.testing.assert_allclose(f(x, 0)().numpy(), x, rtol=1e-6)  # never entered: fine


def test_error_match_default_with_a_body_on_a_cell(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, k):
        y = K.copy(x)
        match k:
            case 0:
                y = K.scale(y, 2.0)
            case _:  # here
                y = K.scale(y, 3.0)
        return y

    raises_at(f, "# here", x, cell(0), match="case _:")
    np.testing.assert_allclose(f(x, 5)().numpy(), 3 * x, rtol=1e-6)  # a Python subject: fine


def test_error_condition_not_a_cell(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x):
        y = K.copy(x)
        if K.sum(x):  # here
            y = K.scale(y, 2.0)
        return y

    raises_at(f, "# here", x, match="one-cell u32")


def test_error_rebinding_a_device_name_to_a_python_value(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        y = K.copy(x)
        if c:  # here
            y = 3.0
        return y

    raises_at(f, "# here", x, cell(1), match="`y` held a device array")


def test_error_value_made_in_an_arm_read_after_it(rng):
    x = random_values(rng, (4,))

    @eagle.Graph.builder
    def f(x, c):
        if c:
            z = K.scale(x, 2.0)
        return K.add(z, x)

    with pytest.raises(eagle.RecordError, match="made inside arm"):
        f(x, cell(1))


def test_error_generator_at_decoration():
    with pytest.raises(eagle.BuildError, match="generator"):

        @eagle.Graph.builder
        def f(x):
            yield K.copy(x)


def test_error_malformed_parallel_at_decoration():
    with pytest.raises(eagle.BuildError) as e:

        @eagle.Graph.builder
        def f(x):
            with eagle.parallel() as (b1, b2):
                with b1:
                    y = K.copy(x)
                z = K.copy(x)  # here
            return y, z

    assert "every statement must be one `with <branch>:`" in str(e.value)
    assert e.value.lineno == line_of(test_error_malformed_parallel_at_decoration, "# here")
