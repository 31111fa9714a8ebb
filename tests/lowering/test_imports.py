"""The package's import structure (every folder of setup.cfg's package_dir): no cycles, no private names across modules, the dependency direction of
docs/ARCHITECTURE.md, and no function-local imports without a stated reason.

Static (ast), so it sees every import, also those in functions that no test happens to run."""
import ast
from pathlib import Path

import networkx as nx
import pytest

from tests.support import REPO_ROOT as ROOT

# repository folder -> import package (setup.cfg package_dir)
PACKAGES = {"tt_backend": "tt_backend", "chip": "tt_backend.chip", "lowering": "tt_backend.lowering",
            "runtime": "tt_backend.runtime", "templates": "tt_backend.templates"}
LAZY_MARK = "lazy:"    # a function-local import says why in a comment containing this: on its line, or above the run of
                       # import lines it starts
# (importer package, imported package): arrows that must never exist
FORBIDDEN = [("tt_backend.chip", "tt_backend."), ("tt_backend.runtime", "tt_backend.lowering"),
             ("tt_backend.lowering", "tt_backend.runtime"), ("tt_backend.runtime", "tinygrad"),
             ("tt_backend.lowering", "tinygrad.device"), ("tt_backend.lowering", "tinygrad.runtime"),
             ("tt_backend.templates", "tt_backend.")]


def modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in PACKAGES.items():
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT / folder).with_suffix("")
            parts = [x for x in rel.parts if x != "__init__"]
            out[".".join([pkg, *parts])] = p
    return out


MODS = modules()


def is_package(mod: str) -> bool:
    return MODS[mod].name == "__init__.py"


def resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package(importer) else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mod: str):
    """(imported module, imported name or None, line, is_local) for every import statement of mod."""
    tree = ast.parse(MODS[mod].read_text())
    parents = {}
    for n in ast.walk(tree):
        for c in ast.iter_child_nodes(n):
            parents[c] = n

    def local(n) -> bool:
        while n in parents:
            n = parents[n]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return True
        return False
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                yield a.name, None, n.lineno, local(n)
        elif isinstance(n, ast.ImportFrom):
            target = resolve(mod, n)
            for a in n.names:
                sub = f"{target}.{a.name}"
                yield (sub, None, n.lineno, local(n)) if sub in MODS else (target, a.name, n.lineno, local(n))


def project_target(name: str) -> str | None:
    while name and name not in MODS:
        name = name.rpartition(".")[0]
    return name or None


def test_no_import_cycles():
    g = nx.DiGraph()
    for m in MODS:
        g.add_node(m)
        for target, _, _, is_local in imports(m):
            t = project_target(target)
            if t and t != m and not (is_package(t) and m.startswith(t + ".")):
                g.add_edge(m, t)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_no_private_names_across_modules():
    bad = []
    for m in MODS:
        for target, name, line, _ in imports(m):
            t = project_target(target)
            if t and t != m and name and name.startswith("_") and not name.startswith("__"):
                bad.append(f"{MODS[m].relative_to(ROOT)}:{line}: {name} from {t}")
    assert not bad, "private names imported from other modules:\n" + "\n".join(bad)


def test_dependency_direction():
    bad = []
    for m in MODS:
        for target, _, line, _ in imports(m):
            for src, dst in FORBIDDEN:
                if m.startswith(src) and (target == dst.rstrip(".") or target.startswith(dst)) \
                        and not target.startswith(src):
                    bad.append(f"{MODS[m].relative_to(ROOT)}:{line}: {m} imports {target}")
    assert not bad, "forbidden arrows:\n" + "\n".join(bad)


def says_why(lines: list[str], line: int) -> bool:
    """The import on `line` (1-based), or the run of import/comment lines just above it, carries LAZY_MARK."""
    i = line - 1
    while i >= 0 and (i == line - 1 or lines[i].lstrip().startswith(("from ", "import ", "#"))):
        if LAZY_MARK in lines[i]:
            return True
        i -= 1
    return False


def test_function_local_imports_say_why():
    bad = []
    for m in MODS:
        lines = MODS[m].read_text().splitlines()
        for _, _, line, is_local in imports(m):
            if is_local and not says_why(lines, line):
                bad.append(f"{MODS[m].relative_to(ROOT)}:{line}: {lines[line - 1].strip()}")
    assert not bad, f"function-local imports without a '# {LAZY_MARK} <reason>' comment:\n" + "\n".join(sorted(set(bad)))


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_every_folder_is_a_package_that_is_walked(folder):
    assert (ROOT / folder / "__init__.py").is_file()
    assert sum(m.startswith(PACKAGES[folder]) for m in MODS) >= 1, f"no modules found under {folder}/"
