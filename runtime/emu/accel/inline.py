"""Call inlining for the speed layer's hottest loops: a rule written once as an ordinary method (e.g. the cycle model's
SFPU issue rule, cycles.TensixTiming.issue_sfpu) is expanded in place where a measured benchmark shows the call itself
costs too much, so the one definition stays the only one.

`inline_calls(fn, callees)` recompiles `fn` with every statement `target = recv.name(args)` (or `recv.name(args)` on
its own) whose `name` is in `callees` replaced by the callee's body: its parameters bound to the arguments, its locals
renamed apart, `self` standing for the receiver, and its final `return value` assigned to the target. A callee
qualifies when its only `return` is its last statement and it has no nested functions; the expansion keeps the call
site's line number, so a traceback still points at the call. The recompiled function lives in the caller's module
globals (module-level names the callee's body uses are added there when missing, and must not mean anything else), so
a test patching a module constant reaches it as before. A caller that uses `super()` must spell it with arguments.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Callable

_MISSING = object()


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(why)


def _parse(fn: Callable) -> ast.FunctionDef:
    """The function's definition, with line numbers of its source file."""
    lines, first = inspect.getsourcelines(fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    node = tree.body[0]
    _require(isinstance(node, ast.FunctionDef), f"{fn!r} is not a plain function")
    return node


def _locals(fdef: ast.FunctionDef) -> set[str]:
    """Parameter names and every name the function assigns."""
    names = {a.arg for a in fdef.args.args}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.expr:
        new = self.mapping.get(node.id)
        if new is None:
            return node
        if isinstance(new, ast.Name):
            return ast.copy_location(ast.Name(new.id, node.ctx), node)
        _require(isinstance(node.ctx, ast.Load), f"the inlined body assigns its parameter {node.id}")
        return ast.copy_location(new, node)


class _Callee:
    """A callee prepared for expansion: its body (without the final return), the returned expression, its locals."""

    def __init__(self, fn: Callable) -> None:
        fdef = _parse(fn)
        *body, last = fdef.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]                              # the docstring
        _require(isinstance(last, ast.Return) and last.value is not None, f"{fn.__qualname__}: must end in `return x`")
        for stmt in body:
            for node in ast.walk(stmt):
                _require(not isinstance(node, (ast.Return, ast.FunctionDef, ast.Lambda, ast.Yield)),
                         f"{fn.__qualname__}: only a final return can be inlined")
        self.name = fn.__name__
        self.params = [a.arg for a in fdef.args.args]
        self.body, self.value = body, last.value
        self.locals = _locals(fdef)
        self.globals = fn.__globals__

    def expand(self, call: ast.Call, n: int) -> tuple[list[ast.stmt], ast.expr]:
        """Statements binding the arguments plus the renamed body, and the renamed return value, for call site n."""
        args = [call.func.value] + list(call.args)
        _require(not call.keywords and len(args) == len(self.params), f"{self.name}: positional arguments only")
        mapping: dict[str, ast.expr] = {v: ast.Name(f"_{self.name}{n}_{v}", ast.Load()) for v in self.locals}
        bind = []
        for p, a in zip(self.params, args):
            if isinstance(a, (ast.Name, ast.Constant)) and not self._assigned(p):
                mapping[p] = a                           # no side effect to preserve: substitute directly
            else:
                bind.append(ast.Assign([ast.Name(mapping[p].id, ast.Store())], a))
        ren = _Rename(mapping)
        body = [ren.visit(ast.parse(ast.unparse(s)).body[0]) for s in self.body]
        value = ren.visit(ast.parse(ast.unparse(self.value), mode="eval").body)
        return bind + body, value

    def _assigned(self, name: str) -> bool:
        return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
                   for stmt in self.body for node in ast.walk(stmt))


class _Inliner(ast.NodeTransformer):
    def __init__(self, callees: dict[str, _Callee]):
        self.callees = callees
        self.count = 0

    def _callee(self, value) -> _Callee | None:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            return self.callees.get(value.func.attr)
        return None

    def _expand(self, stmt: ast.stmt, call: ast.Call, targets: list | None) -> list[ast.stmt]:
        self.count += 1
        body, value = self.callees[call.func.attr].expand(call, self.count)
        out = body + [ast.Assign(targets, value) if targets is not None else ast.Expr(value)]
        for s in out:                                    # every expanded line reports the call site's line
            for node in ast.walk(s):
                if "lineno" in node._attributes:
                    node.lineno = node.end_lineno = stmt.lineno
                    node.col_offset = node.end_col_offset = stmt.col_offset
        return out

    def visit_Assign(self, node: ast.Assign):
        if self._callee(node.value) is not None:
            return self._expand(node, node.value, node.targets)
        return node

    def visit_Expr(self, node: ast.Expr):
        if self._callee(node.value) is not None:
            return self._expand(node, node.value, None)
        return node


class _Hoist(ast.NodeTransformer):
    """`recv.attr` loads (attr in `fixed`) -> a local bound once after `recv`'s one assignment."""

    def __init__(self, recv: str, fixed: frozenset[str]):
        self.recv, self.fixed, self.used = recv, fixed, set()

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == self.recv and node.attr in self.fixed \
                and isinstance(node.ctx, ast.Load):
            self.used.add(node.attr)
            return ast.copy_location(ast.Name(f"_{self.recv}_{node.attr}", ast.Load()), node)
        return node


def _hoist(fdef: ast.FunctionDef, recv: str, fixed: frozenset[str]) -> None:
    """Load the `fixed` attributes of `recv` once, right after the function's one top-level `recv = ...`."""
    sets = [n for n in ast.walk(fdef) if isinstance(n, ast.Name) and n.id == recv and isinstance(n.ctx, ast.Store)]
    at = [i for i, s in enumerate(fdef.body) if isinstance(s, ast.Assign) and len(s.targets) == 1
          and isinstance(s.targets[0], ast.Name) and s.targets[0].id == recv]
    _require(len(sets) == 1 and len(at) == 1, f"{fdef.name}: `{recv}` must be assigned once, at the top level")
    h = _Hoist(recv, fixed)
    fdef.body = [h.visit(s) for s in fdef.body]
    binds = [ast.Assign([ast.Name(f"_{recv}_{a}", ast.Store())], ast.Attribute(ast.Name(recv, ast.Load()), a,
                                                                                ast.Load()))
             for a in sorted(h.used)]
    for b in binds:
        ast.copy_location(b, fdef.body[at[0]])
    fdef.body[at[0] + 1:at[0] + 1] = binds


def inline_calls(fn: Callable, callees: dict[str, Callable], hoist: tuple[str, frozenset[str]] | None = None) \
        -> Callable:
    """`fn` recompiled with the calls of `callees` (method name -> function) expanded in place (see the module
    docstring). `hoist` = (receiver name, attribute names): attributes of that receiver bound once and never rebound
    (containers mutated in place), loaded once into locals after the receiver's one assignment instead of at every
    use - what a hand-written hot loop would do. ValueError when a callee does not qualify or is never called."""
    prepared = {name: _Callee(c) for name, c in callees.items()}
    fdef = _parse(fn)
    fdef.decorator_list = []
    inliner = _Inliner(prepared)
    fdef = inliner.visit(fdef)
    if hoist is not None:
        _hoist(fdef, *hoist)
    found = {n.func.attr for n in ast.walk(_parse(fn)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    _require(set(callees) <= found, f"{fn.__qualname__}: no call of {set(callees) - found} to inline")
    namespace = fn.__globals__       # the caller module's own globals: what tests patch there stays in force
    for c in prepared.values():       # the module-level names the callees' bodies use must mean the same there
        for node in ast.walk(ast.Module(c.body + [ast.Expr(c.value)], [])):
            if isinstance(node, ast.Name) and node.id in c.globals and node.id not in c.locals:
                _require(namespace.setdefault(node.id, c.globals[node.id]) is c.globals[node.id],
                         f"{fn.__qualname__}: {node.id} means something else in {fn.__module__}")
    module = ast.fix_missing_locations(ast.Module([fdef], []))
    before = namespace.get(fn.__name__, _MISSING)
    exec(compile(module, inspect.getsourcefile(fn), "exec"), namespace)
    new = namespace.pop(fn.__name__)
    if before is not _MISSING:
        namespace[fn.__name__] = before
    new.__qualname__, new.__doc__ = fn.__qualname__, fn.__doc__
    return new
