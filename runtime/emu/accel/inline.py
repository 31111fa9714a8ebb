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
import functools
import textwrap
from typing import Callable

_MISSING = object()


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(why)


@functools.cache
def _lines(path: str) -> list[str]:
    with open(path) as f:
        return f.readlines()


def _parse(fn: Callable) -> ast.FunctionDef:
    """A fresh syntax tree of the function's definition, with the line numbers of its source file: its own lines
    (the def line and what is indented deeper), parsed by the C parser. (inspect.getsource tokenizes in Python, and
    walking or copying whole trees in Python is slow: either made importing the emulator ~0.1 s slower.)"""
    code = fn.__code__
    lines = _lines(code.co_filename)
    first = code.co_firstlineno - 1
    indent = len(lines[first]) - len(lines[first].lstrip())
    end = first + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    src = "\n" * first + textwrap.dedent("".join(lines[first:end]))    # line numbers as in the file
    node = ast.parse(src, code.co_filename).body[0]
    _require(isinstance(node, ast.FunctionDef) and node.name == code.co_name, f"{fn!r} is not a plain function")
    return node


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


def _split(fn: Callable) -> tuple[ast.FunctionDef, list[ast.stmt], ast.expr]:
    """(definition, body without docstring and final return, returned expression) of a fresh tree of `fn`."""
    fdef = _parse(fn)
    *body, last = fdef.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]                              # the docstring
    _require(isinstance(last, ast.Return) and last.value is not None, f"{fn.__qualname__}: must end in `return x`")
    return fdef, body, last.value


class _Callee:
    """A callee prepared for expansion: parameters, locals (parameters and assigned names), module-level names used."""

    def __init__(self, fn: Callable) -> None:
        fdef, body, value = _split(fn)
        stored, loaded = set(), set()
        for node in ast.walk(ast.Module(body + [ast.Expr(value)], [])):
            _require(not isinstance(node, (ast.Return, ast.FunctionDef, ast.Lambda, ast.Yield)),
                     f"{fn.__qualname__}: only a final return can be inlined")
            if isinstance(node, ast.Name):
                (stored if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        self.fn, self.name = fn, fn.__name__
        self.params = [a.arg for a in fdef.args.args]
        self.stored = stored
        self.locals = stored | set(self.params)
        self.globals = {n: fn.__globals__[n] for n in loaded - self.locals if n in fn.__globals__}

    def expand(self, call: ast.Call, n: int) -> tuple[list[ast.stmt], ast.expr]:
        """Statements binding the arguments plus the renamed body, and the renamed return value, for call site n."""
        args = [call.func.value] + list(call.args)
        _require(not call.keywords and len(args) == len(self.params), f"{self.name}: positional arguments only")
        mapping: dict[str, ast.expr] = {v: ast.Name(f"_{self.name}{n}_{v}", ast.Load()) for v in self.locals}
        bind = []
        for p, a in zip(self.params, args):
            if isinstance(a, (ast.Name, ast.Constant)) and p not in self.stored:
                mapping[p] = a                           # no side effect to preserve: substitute directly
            else:
                bind.append(ast.Assign([ast.Name(mapping[p].id, ast.Store())], a))
        _, body, value = _split(self.fn)                 # a tree of its own for this call site
        ren = _Rename(mapping)
        return bind + [ren.visit(st) for st in body], ren.visit(value)


@functools.cache
def _callee(fn: Callable) -> _Callee:
    return _Callee(fn)


class _Inliner(ast.NodeTransformer):
    def __init__(self, callees: dict[str, _Callee]):
        self.callees = callees
        self.count = 0
        self.expanded: set[str] = set()

    def _callee(self, value) -> _Callee | None:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            return self.callees.get(value.func.attr)
        return None

    def _expand(self, stmt: ast.stmt, call: ast.Call, targets: list | None) -> list[ast.stmt]:
        self.count += 1
        self.expanded.add(call.func.attr)
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
    prepared = {name: _callee(c) for name, c in callees.items()}
    fdef = _parse(fn)
    fdef.decorator_list = []
    inliner = _Inliner(prepared)
    fdef = inliner.visit(fdef)
    if hoist is not None:
        _hoist(fdef, *hoist)
    missing = set(callees) - inliner.expanded
    _require(not missing, f"{fn.__qualname__}: no call of {missing} to inline")
    namespace = fn.__globals__       # the caller module's own globals: what tests patch there stays in force
    for c in prepared.values():       # the module-level names the callees' bodies use must mean the same there
        for name, value in c.globals.items():
            _require(namespace.setdefault(name, value) is value,
                     f"{fn.__qualname__}: {name} means something else in {fn.__module__}")
    module = ast.fix_missing_locations(ast.Module([fdef], []))
    before = namespace.get(fn.__name__, _MISSING)
    exec(compile(module, fn.__code__.co_filename, "exec"), namespace)
    new = namespace.pop(fn.__name__)
    if before is not _MISSING:
        namespace[fn.__name__] = before
    new.__qualname__, new.__doc__ = fn.__qualname__, fn.__doc__
    return new
