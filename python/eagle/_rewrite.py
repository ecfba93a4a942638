"""The one source rewrite behind ``@eagle.Graph.builder``.

``rewrite(fn)`` reads ``fn``'s source once, turns every ``if``, ``while``, capped ``for``,
``match`` and ``with eagle.parallel()`` into a call on the builder's runtime (eagle.builder),
and compiles the result once. Each arm or loop body becomes a nested function; the names a
construct assigns are ``nonlocal`` there, made locals of the enclosing function by an
unreachable ``if False: name = None``. Whether a construct is decided in Python (at record time)
or on the device is left to the runtime: it looks at the condition's value when it runs.

Arm and body functions hand ``return`` / ``break`` / ``continue`` back as signals (the
runtime's Signal objects); the code after each construct call passes a signal on to where the
statement belongs (a native loop of the same function, or the caller).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import types

RT = "_eagle_rt"  # the runtime, a free variable of the rewritten function
SIG = "_eagle_s"  # what the last construct call handed back (None or a Signal)

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def _error(filename, lineno, message):
    from .builder import BuildError

    return BuildError(message, filename, lineno)


# ---------------------------------------------------------------- what statements bind and do


def stored_names(nodes):
    """Names the statements bind in their own scope (not in nested functions or classes)."""
    out: dict[str, None] = {}

    def visit(n, in_comp=False):
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, (ast.Store, ast.Del)) and not in_comp:
                out[n.id] = None
            return
        if isinstance(n, ast.NamedExpr):
            out[n.target.id] = None  # binds in the enclosing scope, comprehension or not
            visit(n.value, in_comp)
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[n.name] = None
            for d in n.decorator_list:
                visit(d, in_comp)
            if not isinstance(n, ast.ClassDef):
                for d in n.args.defaults + [d for d in n.args.kw_defaults if d]:
                    visit(d, in_comp)
            return
        if isinstance(n, ast.Lambda):
            for d in n.args.defaults + [d for d in n.args.kw_defaults if d]:
                visit(d, in_comp)
            return
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out[(a.asname or a.name).split(".")[0]] = None
            return
        if isinstance(n, ast.ExceptHandler) and n.name:
            out[n.name] = None
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out[n.name] = None
        if isinstance(n, ast.MatchMapping) and n.rest:
            out[n.rest] = None
        comp = in_comp or isinstance(n, _COMPS)
        for c in ast.iter_child_nodes(n):
            visit(c, comp)

    for n in nodes:
        visit(n)
    return list(out)


def declared(body, kind):
    """Names a function body declares ``global`` (kind ast.Global) or ``nonlocal``."""
    out = set()
    for n in _walk_scope(body):
        if isinstance(n, kind):
            out.update(n.names)
    return out


def _walk_scope(nodes):
    """Every node of the statements, not descending into nested functions or classes."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        todo.extend(ast.iter_child_nodes(n))


def escapes(nodes):
    """(return, break, continue): which of them in the statements leave them (a break or
    continue inside a nested loop's body belongs to that loop)."""
    found = [False, False, False]

    def visit(n):
        if isinstance(n, _SCOPES):
            return
        if isinstance(n, ast.Return):
            found[0] = True
        elif isinstance(n, ast.Break):
            found[1] = True
        elif isinstance(n, ast.Continue):
            found[2] = True
        if isinstance(n, _LOOPS):
            for c in n.body:
                _returns_only(c, found)
            for c in n.orelse:
                visit(c)
            return
        for c in ast.iter_child_nodes(n):
            visit(c)

    for n in nodes:
        visit(n)
    return tuple(found)


def _returns_only(n, found):
    for m in _walk_scope([n]):
        if isinstance(m, ast.Return):
            found[0] = True


def reads(nodes, name):
    """Whether the name is read anywhere in the statements (nested functions included)."""
    for n in nodes:
        for m in ast.walk(n):
            if isinstance(m, ast.Name) and m.id == name and isinstance(m.ctx, ast.Load):
                return True
    return False


def is_guard(s):
    """``if cond: break`` / ``if cond: continue``: a capped loop's guard."""
    return (
        isinstance(s, ast.If)
        and not s.orelse
        and len(s.body) == 1
        and isinstance(s.body[0], (ast.Break, ast.Continue))
    )


def has_guard(body):
    """Whether a loop body holds a guard of its own (not one of a nested loop)."""

    def visit(n):
        if is_guard(n):
            return True
        if isinstance(n, _SCOPES + _LOOPS):
            return isinstance(n, _LOOPS) and any(visit(c) for c in n.orelse)
        return any(visit(c) for c in ast.iter_child_nodes(n))

    return any(visit(s) for s in body)


def is_parallel(s):
    """``with eagle.parallel() as (b1, b2):`` (any ``X.parallel()`` or ``parallel()``)."""
    if not isinstance(s, ast.With) or len(s.items) != 1:
        return False
    e = s.items[0].context_expr
    return isinstance(e, ast.Call) and (
        (isinstance(e.func, ast.Attribute) and e.func.attr == "parallel")
        or (isinstance(e.func, ast.Name) and e.func.id == "parallel")
    )


_IMMUTABLE_SAFE = (ast.Name, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp)


def _plain_expression(e):
    """Only names, constants and operators: its value depends on the names' values alone."""
    return all(
        isinstance(n, _IMMUTABLE_SAFE) or isinstance(n, (ast.expr_context, ast.operator,
                                                         ast.boolop, ast.cmpop, ast.unaryop))
        for n in ast.walk(e)
    )


# ---------------------------------------------------------------- code templates


_LOCATED = (ast.stmt, ast.expr, ast.excepthandler, ast.arg, ast.keyword, ast.pattern)


def _at(node, line):
    """Places the generated nodes at `line`; the user's nodes inside keep their own place."""
    for n in ast.walk(node):
        if not isinstance(n, _LOCATED):
            continue
        if getattr(n, "lineno", None) is None:
            n.lineno = line
        if getattr(n, "col_offset", None) is None:
            n.col_offset = 0
        if getattr(n, "end_lineno", None) is None:
            n.end_lineno = n.lineno
        if getattr(n, "end_col_offset", None) is None:
            n.end_col_offset = n.col_offset
    return node


def _name(id_, ctx=None):
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _rt(attr):
    return ast.Attribute(value=_name(RT), attr=attr, ctx=ast.Load())


def _call(func, *args):
    return ast.Call(func=func, args=list(args), keywords=[])


def _const(v):
    return ast.Constant(value=v)


def _lambda(body):
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                           kwarg=None, defaults=[]),
        body=body,
    )


def _def(name, params, body):
    return ast.FunctionDef(
        name=name,
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                           kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_comment=None,
        **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}),
    )


def _assign(target, value):
    return ast.Assign(targets=[_name(target, ast.Store())], value=value)


# ---------------------------------------------------------------- the rewrite


class _Scope:
    """A real (user-written) function: what it declares and what it must pre-bind."""

    def __init__(self, fn):
        self.globals = declared(fn.body, ast.Global)
        self.nonlocals = declared(fn.body, ast.Nonlocal)
        self.prebind: dict[str, None] = {}
        a = fn.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        self.locals = {p.arg for p in params} | set(stored_names(fn.body))
        self.locals -= self.globals | self.nonlocals
        # names some nested function rebinds with nonlocal: a call may change them
        self.shared = set()
        for n in _walk_nested_functions(fn.body):
            self.shared |= declared(n.body, ast.Nonlocal)


def _walk_nested_functions(body):
    for n in body:
        for m in ast.walk(n):
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield m


class _Ctx:
    """Where a statement is: its function (real or generated), and the loop a break belongs
    to (('native', function) for an ordinary loop, ('helper', guards) for a runtime loop)."""

    def __init__(self, scope, fn, gen, loop):
        self.scope, self.fn, self.gen, self.loop = scope, fn, gen, loop

    def arm(self, loop=None):
        return _Ctx(self.scope, object(), True, self.loop if loop is None else loop)


class Rewriter:
    def __init__(self, filename):
        self.filename = filename
        self.ids = itertools.count()

    def err(self, node, message):
        return _error(self.filename, node.lineno, message)

    # -- functions
    def function(self, fn):
        """Rewrites a real function in place (its body, and nested functions in it)."""
        for n in _walk_scope(fn.body):
            if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
                raise self.err(n, "a builder function (or a function defined in one) cannot be "
                               "a generator or a coroutine: its arms and loop bodies become "
                               "functions of their own")
        scope = _Scope(fn)
        ctx = _Ctx(scope, object(), False, None)
        body = self.block(fn.body, ctx)
        if scope.prebind:
            line = fn.body[0].lineno
            pre = ast.If(test=_const(False),
                         body=[_assign(n, _const(None)) for n in scope.prebind], orelse=[])
            _at(pre, line)
            first = body[0] if body else None
            doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                   and isinstance(first.value.value, str))
            body = body[:1] + [pre] + body[1:] if doc else [pre] + body
        fn.body = body

    # -- statements
    def block(self, stmts, ctx):
        out = []
        for s in stmts:
            out.extend(self.stmt(s, ctx))
        return out

    def stmt(self, s, ctx):
        if isinstance(s, ast.If):
            if ctx.loop and ctx.loop[0] == "helper" and ctx.loop[1] and is_guard(s):
                return self.guard(s, ctx)
            return self.if_(s, ctx)
        if isinstance(s, ast.While):
            return self.while_(s, ctx)
        if isinstance(s, ast.For):
            if self.capped_for(s):
                return self.for_(s, ctx)
            s.target = self.expr(s.target, ctx)
            s.iter = self.expr(s.iter, ctx)
            s.body = self.block(s.body, _Ctx(ctx.scope, ctx.fn, ctx.gen, ("native", ctx.fn)))
            s.orelse = self.block(s.orelse, ctx)
            return [s]
        if isinstance(s, ast.Match):
            return self.match(s, ctx)
        if isinstance(s, ast.With):
            if is_parallel(s):
                return self.parallel(s, ctx)
            s.items = [self.expr(i, ctx) for i in s.items]
            s.body = self.block(s.body, ctx)
            return [s]
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            s.body = self.block(s.body, ctx)
            for h in s.handlers:
                h.body = self.block(h.body, ctx)
            s.orelse = self.block(s.orelse, ctx)
            s.finalbody = self.block(s.finalbody, ctx)
            return [s]
        if isinstance(s, ast.FunctionDef):
            s.decorator_list = [self.expr(d, ctx) for d in s.decorator_list]
            self.function(s)
            return [s]
        if isinstance(s, (ast.AsyncFunctionDef, ast.ClassDef, ast.AsyncFor, ast.AsyncWith)):
            return [s]  # left as written
        if isinstance(s, ast.Return):
            if s.value is not None:
                s.value = self.expr(s.value, ctx)
            if ctx.gen:
                value = s.value if s.value is not None else _const(None)
                return [_at(ast.Return(value=_call(_rt("ret"), value, _const(s.lineno))), s.lineno)]
            return [s]
        if isinstance(s, (ast.Break, ast.Continue)):
            kind = "brk" if isinstance(s, ast.Break) else "cont"
            if ctx.loop is None or (ctx.loop[0] == "native" and ctx.loop[1] is ctx.fn):
                return [s]
            return [_at(ast.Return(value=_call(_rt(kind), _const(s.lineno))), s.lineno)]
        return [self.expr(s, ctx)]

    def expr(self, node, ctx):
        """Checks no device condition reaches a conditional expression or a comprehension."""
        return _ExprChecks(self).visit(node)

    def cond(self, e, ctx):
        """A construct's condition: ``not``, ``and``, ``or`` work on device cells too."""
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return _at(_call(_rt("not_"), self.cond(e.operand, ctx), _const(e.lineno)), e.lineno)
        if isinstance(e, ast.BoolOp):
            fn = "and_" if isinstance(e.op, ast.And) else "or_"
            values = [self.cond(v, ctx) for v in e.values]
            acc = values[-1]
            for v in reversed(values[:-1]):
                acc = _at(_call(_rt(fn), v, _lambda(acc), _const(e.lineno)), e.lineno)
            return acc
        return self.expr(e, ctx)

    def snapshot(self, names, ctx, line):
        """(names, getter, setter) for the names a construct assigns, or None."""
        if not names:
            return [], _const(None)
        n = next(self.ids)
        setter = f"_eagle_set_{n}"
        decl = self.declare(names, ctx)
        body = list(decl)
        for i, name in enumerate(names):
            v = ast.Subscript(value=_name("_eagle_v"), slice=_const(i), ctx=ast.Load())
            body.append(ast.If(
                test=ast.Compare(left=v, ops=[ast.Is()], comparators=[_rt("UNBOUND")]),
                body=[ast.Try(body=[ast.Delete(targets=[_name(name, ast.Del())])],
                              handlers=[ast.ExceptHandler(type=_name("NameError"), name=None,
                                                          body=[ast.Pass()])],
                              orelse=[], finalbody=[])],
                orelse=[_assign(name, v)]))
        setter_def = _at(_def(setter, ["_eagle_v"], body), line)
        getter = _lambda(ast.Tuple(
            elts=[_call(_rt("peek"), _lambda(_name(name))) for name in names], ctx=ast.Load()))
        snap = ast.Tuple(elts=[ast.Tuple(elts=[_const(x) for x in names], ctx=ast.Load()),
                               getter, _name(setter)], ctx=ast.Load())
        return [setter_def], _at(snap, line)

    def declare(self, names, ctx):
        """nonlocal / global statements for the names in a generated function; pre-binds them."""
        scope = ctx.scope
        glob = [x for x in names if x in scope.globals]
        nonl = [x for x in names if x not in scope.globals]
        for x in nonl:
            if x not in scope.nonlocals:
                scope.prebind[x] = None
        out = []
        if glob:
            out.append(ast.Global(names=glob))
        if nonl:
            out.append(ast.Nonlocal(names=nonl))
        return out

    def gen_def(self, name, params, names, body, ctx, line, prologue=()):
        d = _def(name, params, [])
        d.body = self.declare(names, ctx) + list(prologue) + body
        if not d.body:
            d.body = [ast.Pass()]
        _at_header(d, line)
        return d

    def after(self, s, ctx, kinds, line):
        """``_eagle_s = call`` then passing on what it handed back."""
        ret, brk, cont = kinds
        if not (ret or brk or cont):
            return []
        body = []
        native = ctx.loop is not None and ctx.loop[0] == "native" and ctx.loop[1] is ctx.fn
        if native and brk:
            body.append(ast.If(test=ast.Attribute(value=_name(SIG), attr="brk", ctx=ast.Load()),
                               body=[ast.Break()], orelse=[]))
        if native and cont:
            body.append(ast.If(test=ast.Attribute(value=_name(SIG), attr="cont", ctx=ast.Load()),
                               body=[ast.Continue()], orelse=[]))
        if ctx.gen:
            body.append(ast.Return(value=_name(SIG)))
        elif ret:
            body.append(ast.Return(value=ast.Attribute(value=_name(SIG), attr="value",
                                                       ctx=ast.Load())))
        if not body:
            return []
        test = ast.Compare(left=_name(SIG), ops=[ast.IsNot()], comparators=[_const(None)])
        return [_at(ast.If(test=test, body=body, orelse=[]), line)]

    def construct_call(self, call, line):
        return _at(ast.Assign(targets=[_name(SIG, ast.Store())], value=call, lineno=line), line)

    # -- if / elif / else
    def if_(self, s, ctx):
        line = s.lineno
        tests, bodies = [s.test], [s.body]
        cur = s
        while len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
            cur = cur.orelse[0]
            tests.append(cur.test)
            bodies.append(cur.body)
        else_body = cur.orelse
        names = stored_names([x for b in bodies for x in b] + else_body)
        n = next(self.ids)
        defs = []
        arms = []
        for k, b in enumerate(bodies):
            a = ctx.arm()
            defs.append(self.gen_def(f"_eagle_arm_{n}_{k}", [], names, self.block(b, a), ctx,
                                     b[0].lineno))
            arms.append(_name(defs[-1].name))
        else_fn = _const(None)
        if else_body:
            a = ctx.arm()
            defs.append(self.gen_def(f"_eagle_else_{n}", [], names, self.block(else_body, a), ctx,
                                     else_body[0].lineno))
            else_fn = _name(defs[-1].name)
        snap_defs, snap = self.snapshot(names, ctx, line)
        first = self.cond(tests[0], ctx)
        rest = ast.Tuple(elts=[_lambda(self.cond(t, ctx)) for t in tests[1:]], ctx=ast.Load())
        lines = ast.Tuple(elts=[_const(t.lineno) for t in tests], ctx=ast.Load())
        call = _call(_rt("if_"), lines, first, rest, ast.Tuple(elts=arms, ctx=ast.Load()),
                     else_fn, snap)
        kinds = escapes([x for b in bodies for x in b] + else_body)
        return defs + snap_defs + [self.construct_call(call, line)] + self.after(s, ctx, kinds,
                                                                                   line)

    def guard(self, s, ctx):
        line = s.lineno
        kind = "break_if" if isinstance(s.body[0], ast.Break) else "continue_if"
        sig = "brk" if kind == "break_if" else "cont"
        test = _call(_rt(kind), _const(line), self.cond(s.test, ctx))
        ret = ast.Return(value=_call(_rt(sig), _const(s.body[0].lineno)))
        return [_at(ast.If(test=test, body=[ret], orelse=[]), line)]

    # -- while
    def while_(self, s, ctx):
        line = s.lineno
        names = stored_names(s.body + s.orelse)
        body_names = stored_names(s.body)
        n = next(self.ids)
        cond_def = _at(_def(f"_eagle_cond_{n}", [], [ast.Return(value=self.cond(s.test, ctx))]),
                       line)
        body_def = self.gen_def(f"_eagle_body_{n}", [], names,
                                self.block(s.body, ctx.arm(("helper", False))), ctx,
                                s.body[0].lineno)
        defs = [cond_def, body_def]
        else_fn = _const(None)
        if s.orelse:
            defs.append(self.gen_def(f"_eagle_else_{n}", [], names,
                                     self.block(s.orelse, ctx.arm()), ctx, s.orelse[0].lineno))
            else_fn = _name(defs[-1].name)
        snap_defs, snap = self.snapshot(names, ctx, line)
        # A Python condition that can never change: only plain names and operators, names
        # local to this function that the body never rebinds, and no way out of the body.
        probe = _const(None)
        cond_names = sorted({m.id for m in ast.walk(s.test) if isinstance(m, ast.Name)})
        sc = ctx.scope
        ret, brk, _ = escapes(s.body)
        leaves = ret or brk or any(isinstance(m, ast.Raise) for m in _walk_scope(s.body))
        if (_plain_expression(s.test) and not leaves
                and all(x in sc.locals and x not in sc.shared for x in cond_names)
                and not set(cond_names) & set(body_names)):
            probe = _lambda(ast.Tuple(elts=[_name(x) for x in cond_names], ctx=ast.Load()))
        call = _call(_rt("while_"), _const(line), _name(cond_def.name), _name(body_def.name),
                     else_fn, snap, _const(isinstance(s.test, ast.Name)), probe)
        kinds = (escapes(s.body)[0] or escapes(s.orelse)[0],) + escapes(s.orelse)[1:]
        return defs + snap_defs + [self.construct_call(call, line)] + self.after(s, ctx, kinds,
                                                                                   line)

    # -- for
    @staticmethod
    def capped_for(s):
        """``for _ in range(...):`` holding a guard of its own and not reading its target."""
        it = s.iter
        return (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and isinstance(s.target, ast.Name)
            and not s.orelse
            and not reads(s.body, s.target.id)
            and has_guard(s.body)
        )

    def for_(self, s, ctx):
        line = s.lineno
        names = stored_names([s.target] + s.body)
        n = next(self.ids)
        pro = [_at(_assign(s.target.id, _name("_eagle_i")), line)]
        body_def = self.gen_def(f"_eagle_body_{n}", ["_eagle_i"], names,
                                self.block(s.body, ctx.arm(("helper", True))), ctx,
                                s.body[0].lineno, prologue=pro)
        snap_defs, snap = self.snapshot(names, ctx, line)
        call = _call(_rt("for_"), _const(line), self.expr(s.iter, ctx), _name(body_def.name),
                     snap)
        kinds = (escapes(s.body)[0], False, False)
        return [body_def] + snap_defs + [self.construct_call(call, line)] + self.after(
            s, ctx, kinds, line)

    # -- match
    def match(self, s, ctx):
        line = s.lineno
        n = next(self.ids)
        subj = f"_eagle_subject_{n}"
        names = stored_names([s])  # bodies and pattern captures
        defs, natives = [], []
        for k, case in enumerate(s.cases):
            d = self.gen_def(f"_eagle_case_{n}_{k}", [], names,
                             self.block(case.body, ctx.arm()), ctx, case.body[0].lineno)
            defs.append(d)
            natives.append(ast.match_case(
                pattern=case.pattern, guard=case.guard and self.expr(case.guard, ctx),
                body=[_at(ast.Assign(targets=[_name(SIG, ast.Store())],
                                     value=_call(_name(d.name)), lineno=case.body[0].lineno),
                          case.body[0].lineno)]))
        table = self.switch_table(s, defs)
        snap_defs, snap = self.snapshot(names, ctx, line)
        head = [_at(_assign(subj, self.expr(s.subject, ctx)), line),
                _at(_assign(SIG, _const(None)), line)]
        device = self.construct_call(
            _call(_rt("switch_"), _const(line), _name(subj), table, snap), line)
        native = ast.Match(subject=_name(subj), cases=natives)
        _at_header(native, line)
        branch = _at(ast.If(test=_call(_rt("is_cell"), _name(subj)), body=[device],
                            orelse=[native]), line)
        branch.orelse = [native]
        kinds = escapes([x for c in s.cases for x in c.body])
        return head + defs + snap_defs + [branch] + self.after(s, ctx, kinds, line)

    def switch_table(self, s, defs):
        """((values, arm), ...) for a switch on a device cell, or (why not, line)."""
        rows = []

        def refuse(case, why):
            return ast.Tuple(elts=[_const(why), _const(case.pattern.lineno)], ctx=ast.Load())

        for k, case in enumerate(s.cases):
            p = case.pattern
            if case.guard is not None:
                return refuse(case, "a case with a guard (`case 0 if ...:`) cannot be a switch "
                              "arm of a device cell")
            if isinstance(p, ast.MatchAs) and p.pattern is None and p.name is None:
                if k != len(s.cases) - 1:
                    continue
                if all(isinstance(b, ast.Pass) for b in case.body):
                    continue  # a no-op default: the switch runs no arm for other values
                return refuse(case, "`case _:` with a body is not a switch arm: a device switch "
                              "runs no arm when the cell holds none of the cases' values; list "
                              "the values (`case 2 | 3:`), or write `case _: pass`")
            values = _int_values(p)
            if values is None:
                return refuse(case, "a switch on a device cell takes only non-negative int "
                              "literals as cases (`case 0:`, `case 1 | 2:`) and a final "
                              "`case _: pass`")
            rows.append(ast.Tuple(elts=[ast.Tuple(elts=[_const(v) for v in values],
                                                  ctx=ast.Load()), _name(defs[k].name)],
                                  ctx=ast.Load()))
        return ast.Tuple(elts=rows, ctx=ast.Load())

    # -- with eagle.parallel() as (b1, b2):
    def parallel(self, s, ctx):
        line = s.lineno
        item = s.items[0]
        v = item.optional_vars
        targets = [v] if isinstance(v, ast.Name) else (
            list(v.elts) if isinstance(v, (ast.Tuple, ast.List)) else None)
        if not targets or not all(isinstance(t, ast.Name) for t in targets):
            raise self.err(s, "write a fork as `with eagle.parallel() as (b1, b2):` naming "
                           "each branch")
        if item.context_expr.args or item.context_expr.keywords:
            raise self.err(s, "eagle.parallel() takes no arguments: the branches are the "
                           "names after `as`")
        branch_names = [t.id for t in targets]
        bodies = {}
        for b in s.body:
            ok = (isinstance(b, ast.With) and len(b.items) == 1
                  and isinstance(b.items[0].context_expr, ast.Name)
                  and b.items[0].optional_vars is None
                  and b.items[0].context_expr.id in branch_names
                  and b.items[0].context_expr.id not in bodies)
            if not ok:
                raise self.err(b, "inside `with eagle.parallel() as (" + ", ".join(branch_names)
                               + "):` every statement must be one `with <branch>:` block per "
                               "branch, e.g. `with " + branch_names[0] + ":`")
            bodies[b.items[0].context_expr.id] = b.body
        missing = [x for x in branch_names if x not in bodies]
        if missing:
            raise self.err(s, f"branch {missing[0]} of the fork has no `with {missing[0]}:` "
                           "block")
        names = stored_names(s.body) + branch_names
        n = next(self.ids)
        defs = []
        for k, b in enumerate(branch_names):
            pro = [_at(_assign(b, _name("_eagle_b")), line)]
            defs.append(self.gen_def(f"_eagle_branch_{n}_{k}", ["_eagle_b"], names,
                                     self.block(bodies[b], ctx.arm()), ctx, bodies[b][0].lineno,
                                     prologue=pro))
        snap_defs, snap = self.snapshot(names, ctx, line)
        call = _call(_rt("parallel"), _const(line),
                     ast.Tuple(elts=[_name(d.name) for d in defs], ctx=ast.Load()), snap)
        kinds = escapes(s.body)
        return defs + snap_defs + [self.construct_call(call, line)] + self.after(s, ctx, kinds,
                                                                                   line)


def _int_values(p):
    if isinstance(p, ast.MatchOr):
        out = []
        for q in p.patterns:
            v = _int_values(q)
            if v is None:
                return None
            out += v
        return out
    if (isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant)
            and type(p.value.value) is int and p.value.value >= 0):
        return [p.value.value]
    return None


def _at_header(node, line):
    """Locates a generated compound statement (not the user statements inside it)."""
    node.lineno = node.end_lineno = line
    node.col_offset = node.end_col_offset = 0
    if isinstance(node, ast.FunctionDef):
        _at(node.args, line)
    return node


class _ExprChecks(ast.NodeTransformer):
    """``x if c else y`` and comprehension ``if``s take Python values only: a device cell there
    raises a BuildError naming the line."""

    def __init__(self, rw):
        self.rw = rw

    def visit_IfExp(self, node):
        self.generic_visit(node)
        node.test = _at(_call(_rt("py_cond"), node.test, _const(node.lineno),
                              _const("a conditional expression (x if c else y)")), node.lineno)
        return node

    def visit_comprehension(self, node):
        self.generic_visit(node)
        node.ifs = [_at(_call(_rt("py_cond"), c, _const(c.lineno), _const("a comprehension's if")),
                        c.lineno) for c in node.ifs]
        return node

    def visit_Lambda(self, node):
        self.generic_visit(node)
        return node


# ---------------------------------------------------------------- entry point


def rewrite(fn):
    """Reads and rewrites ``fn`` once; returns (make, source): ``make(runtime)`` builds the
    rewritten function (sharing fn's globals and closure cells), ``source`` is the rewritten
    code as text (for reading)."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"@eagle.Graph.builder takes a plain Python function, got {fn!r}")
    try:
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise TypeError(f"@eagle.Graph.builder needs the source of {fn.__qualname__}: {e}") from e
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not defs or defs[0].name != fn.__name__:
        raise TypeError(f"@eagle.Graph.builder: could not find `def {fn.__name__}` in its source")
    fdef = defs[0]
    fdef.decorator_list = []
    # Defaults and annotations come from the function object: never evaluated again.
    fdef.args.defaults = [_const(None) for _ in fdef.args.defaults]
    fdef.args.kw_defaults = [None if d is None else _const(None) for d in fdef.args.kw_defaults]
    fdef.returns = None
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
        a.annotation = None
    Rewriter(filename).function(fdef)
    freevars = list(fn.__code__.co_freevars)
    factory = _def("_eagle_factory", freevars + [RT], [fdef, ast.Return(value=_name(fdef.name))])
    _at_header(factory, fdef.lineno)
    factory.body[-1] = _at(factory.body[-1], fdef.lineno)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in inner.co_consts if isinstance(c, types.CodeType)
                 and c.co_name == fdef.name)
    cells = dict(zip(freevars, fn.__closure__ or ()))
    source = ast.unparse(fdef)

    def make(runtime):
        closure = tuple(cells[v] if v in cells else types.CellType(runtime)
                        for v in inner.co_freevars)
        f = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
        f.__kwdefaults__ = fn.__kwdefaults__
        f.__qualname__ = fn.__qualname__
        return f

    return make, source
