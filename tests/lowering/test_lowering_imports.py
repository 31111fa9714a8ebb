"""The lowering's import structure (issue 9): no import cycle among its modules, no `_private` name imported from
another module, and no function-local import (lowering is imported by the to_program hook only, never by tinygrad's
spawned compile workers, so it has no start-up cost to hide). Read from the sources with `ast`, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tests.support import REPO_ROOT

ROOT = REPO_ROOT / "lowering"
PACKAGE = "tt_backend.lowering"


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join((PACKAGE, *parts))] = p
    return out


def imports(tree: ast.Module, mods: dict[str, Path]):
    """(import node, lowering module imported, names taken from it) for every import of a lowering module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    yield node, a.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                yield (node, sub, []) if sub in mods else (node, node.module, [a.name])


def test_no_cycles_private_names_or_local_imports():
    mods = modules()
    assert {f"{PACKAGE}.select", f"{PACKAGE}.families.registry"} <= mods.keys()     # the walk reads lowering/ itself
    g, problems = nx.DiGraph(), []
    for name, path in mods.items():
        g.add_node(name)
        tree = ast.parse(path.read_text())
        where = path.relative_to(ROOT.parent)
        top = set(map(id, tree.body))
        problems += [f"{where}:{n.lineno}: function-local import" for n in ast.walk(tree)
                     if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top]
        for node, target, names in imports(tree, mods):
            g.add_edge(name, target)
            problems += [f"{where}:{node.lineno}: private name {n} from {target}" for n in names if n.startswith("_")]
    problems += [f"import cycle: {' -> '.join(c)}" for c in nx.simple_cycles(g)]
    assert not problems, "\n".join(problems)
