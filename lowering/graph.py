"""The tile graph of one kernel (docs/design.md §4 step 3): the value DAG as a networkx DiGraph of tile operations.

Node = one tile op (a VNode id), attributes `op`, `dtype`, `arg`, `format` (how the value exists as a tile: `fp32` or
`bf16` for loads from L1, `fp32` for everything computed, since Dst holds every intermediate as fp32) and
`fpu_operand` (the value can be handed to the FPU straight from L1 by an unpacker: a LOAD, or a bf16->fp32 CAST of one,
which is exact). Edge u -> v = the tile value u read by v, attribute `operand` = position(s) in v's source list.
Only nodes the output depends on are in the graph (dead nodes cost nothing and are never placed).

Structure the placement uses:
  * `chains(g)`: maximal dependency chains (each link the only consumer of the previous one) - the sequential spines
    whose latencies add up;
  * `independent(g, a, b)` / `branches(g, v)`: values with no path between them can run on different engines at the
    same time (in RMSNorm's second kernel `x*w` does not depend on `1/r`);
  * `reassociate_products(dag)`: the one rewrite placement relies on - a float32 product chain `(a*b)*c` whose factors
    a and c come straight from L1 while b is computed is regrouped as `(a*c)*b`, so the loads-only product becomes an
    independent branch the FPU can take (one reordering of two fp32 roundings: ~1 ulp, inside any budget).
  * `fold_negated_add(dag)`: x + y*(-1) -> x - y (exact), so tinygrad's spelling of a - b becomes an ELWSUB candidate.
Passes are functions graph -> graph; rules are data (`FPU_BINARY`).
"""
from __future__ import annotations

import networkx as nx

from tt_backend.lowering.dag import ValueDAG, VNode

# ops the FPU can run elementwise on two Src operands (docs/isa.md §4): value-DAG op -> FPU instruction
FPU_BINARY = {"MUL": "ELWMUL", "ADD": "ELWADD", "SUB": "ELWSUB"}
FLOAT = ("float32", "bfloat16")
TILE_FORMAT = {"float32": "fp32", "int32": "fp32", "bool": "fp32", "bfloat16": "bf16", "uint32": "fp32", "float16": "fp32"}


def live_nodes(dag: ValueDAG) -> list[int]:
    """Ids the output depends on, in topological (id) order."""
    out = dag.out if dag.out >= 0 else len(dag.nodes) - 1
    seen, todo = {out}, [out]
    while todo:
        for s in dag.nodes[todo.pop()].srcs:
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return sorted(seen)


def l1_source(dag: ValueDAG, i: int) -> VNode | None:
    """The LOAD whose L1 tile is value i itself (LOAD, or an exact bf16->fp32 CAST of a LOAD), else None."""
    n = dag.nodes[i]
    if n.op == "CAST" and n.dtype == "float32" and dag.nodes[n.srcs[0]].dtype == "bfloat16":
        n = dag.nodes[n.srcs[0]]
    return n if n.op == "LOAD" and n.dtype in FLOAT else None


def tile_graph(dag: ValueDAG) -> nx.DiGraph:
    g = nx.DiGraph(out=dag.out if dag.out >= 0 else len(dag.nodes) - 1)
    for i in live_nodes(dag):
        n = dag.nodes[i]
        src = l1_source(dag, i)
        fmt = TILE_FORMAT[n.dtype] if n.op == "LOAD" else "fp32"
        g.add_node(i, op=n.op, dtype=n.dtype, arg=n.arg, format=fmt, fpu_operand=src is not None,
                   l1_format=TILE_FORMAT[src.dtype] if src is not None else None)
        for k, s in enumerate(n.srcs):
            if g.has_edge(s, i):
                g.edges[s, i]["operand"] += (k,)
            else:
                g.add_edge(s, i, operand=(k,))
    return g


def op_nodes(g: nx.DiGraph) -> list[int]:
    return [v for v in nx.topological_sort(g) if g.nodes[v]["op"] not in ("LOAD", "CONST")]


def fpu_candidates(g: nx.DiGraph) -> list[int]:
    """Nodes the FPU can compute elementwise from unpacked L1 tiles: float MUL/ADD/SUB of two L1 operands."""
    out = []
    for v in op_nodes(g):
        a = g.nodes[v]
        if a["op"] not in FPU_BINARY or a["dtype"] not in FLOAT:
            continue
        srcs = [u for u, _ in sorted(g.in_edges(v), key=lambda e: g.edges[e]["operand"][0])]
        if all(g.nodes[u]["fpu_operand"] for u in srcs):
            out.append(v)
    return out


def operands(g: nx.DiGraph, v: int) -> list[int]:
    """v's sources in operand order (a value used twice appears twice)."""
    ops: list[tuple[int, int]] = []
    for u, _, d in g.in_edges(v, data=True):
        ops += [(k, u) for k in d["operand"]]
    return [u for _, u in sorted(ops)]


def chains(g: nx.DiGraph) -> list[list[int]]:
    """Maximal chains of op nodes where each link is the single consumer of the previous one (and the previous one
    its only op-node source on the chain)."""
    ops = set(op_nodes(g))
    nxt: dict[int, int] = {}
    for v in ops:
        succ = list(g.successors(v))
        if len(succ) == 1 and succ[0] in ops:
            nxt[v] = succ[0]
    # a node with two chain predecessors continues only one of them (the first in topological order)
    prev_of: dict[int, int] = {}
    for v in op_nodes(g):
        if v in nxt and nxt[v] not in prev_of:
            prev_of[nxt[v]] = v
    out, done = [], set()
    for v in op_nodes(g):
        if v in done or v in prev_of:
            continue
        c = [v]
        while c[-1] in nxt and prev_of.get(nxt[c[-1]]) == c[-1]:
            c.append(nxt[c[-1]])
        done.update(c)
        out.append(c)
    return out


def independent(g: nx.DiGraph, a: int, b: int) -> bool:
    """No dependency either way: a and b may run at the same time on different engines."""
    return a != b and not nx.has_path(g, a, b) and not nx.has_path(g, b, a)


def branches(g: nx.DiGraph, v: int) -> list[set[int]]:
    """For a join node v: the op nodes each operand needs exclusively (shared work excluded). Two non-empty branches
    are independent of each other."""
    per = []
    for u in operands(g, v):
        anc = (nx.ancestors(g, u) | {u}) & set(op_nodes(g))
        per.append(anc)
    out = []
    for k, s in enumerate(per):
        others = set().union(*(p for j, p in enumerate(per) if j != k)) if len(per) > 1 else set()
        out.append(s - others)
    return out


# ------------------------------------------------------------------------------------------------ rewrites

def reassociate_products(dag: ValueDAG) -> ValueDAG:
    """(a*b)*c -> (a*c)*b and c*(a*b) -> (a*c)*b for float32 MULs when a and c come straight from L1 and b does
    not, and the inner product has no other use. Applied to a fixed point; returns a new DAG (ids = positions)."""
    nodes = list(dag.nodes)
    changed = True
    while changed:
        changed = False
        cur = ValueDAG(nodes, dag.out)
        uses = cur.uses()
        for k, n in enumerate(nodes):
            if n.op != "MUL" or n.dtype != "float32":
                continue
            for inner_pos in (0, 1):
                i, c = n.srcs[inner_pos], n.srcs[1 - inner_pos]
                m = nodes[i]
                if m.op != "MUL" or m.dtype != "float32" or uses[i] != 1 or l1_source(cur, c) is None:
                    continue
                a, b = m.srcs
                la, lb = l1_source(cur, a) is not None, l1_source(cur, b) is not None
                if la == lb:
                    continue
                if lb:
                    a, b = b, a
                # inner node i becomes a*c (loads only), the outer node multiplies it by b
                nodes[i] = VNode(i, "MUL", "float32", (a, c))
                nodes[k] = VNode(k, "MUL", "float32", (i, b))
                changed = True
                break
            if changed:
                break
    return renumber(nodes, dag.out)


def _is_const(dag: ValueDAG, i: int, v: float) -> bool:
    n = dag.nodes[i]
    return n.op == "CONST" and n.dtype in FLOAT and float(n.arg) == v


def fold_negated_add(dag: ValueDAG) -> ValueDAG:
    """x + y*(-1) -> x - y (tinygrad spells a - b that way): exact, and it turns a subtraction of two L1 tiles into
    one ELWSUB candidate."""
    nodes = list(dag.nodes)
    for k, n in enumerate(nodes):
        if n.op != "ADD" or n.dtype not in FLOAT:
            continue
        for pos in (0, 1):
            m = nodes[n.srcs[1 - pos]]
            if m.op == "MUL" and m.dtype == n.dtype and any(_is_const(dag, s, -1.0) for s in m.srcs):
                y = m.srcs[0] if _is_const(dag, m.srcs[1], -1.0) else m.srcs[1]
                nodes[k] = VNode(k, "SUB", n.dtype, (n.srcs[pos], y))
                break
    return ValueDAG(nodes, dag.out)


def renumber(nodes: list[VNode], out: int) -> ValueDAG:
    """Nodes in a topological order again (sources before users, ties by old id), ids = new positions."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(nodes)))
    g.add_edges_from((s, n.id) for n in nodes for s in n.srcs)
    order = list(nx.lexicographical_topological_sort(g))
    new = {old: k for k, old in enumerate(order)}
    return ValueDAG([VNode(new[o], nodes[o].op, nodes[o].dtype, tuple(new[s] for s in nodes[o].srcs), nodes[o].arg)
                     for o in order], new[out])


def describe(g: nx.DiGraph) -> str:
    """One line per op node: id, op, dtype, operands; then chains and FPU candidates (for reports and debugging)."""
    lines = []
    for v in op_nodes(g):
        a = g.nodes[v]
        lines.append(f"n{v} {a['op']} {a['dtype']} <- " + ", ".join(f"n{u}" for u in operands(g, v)))
    lines.append("chains: " + "; ".join("->".join(f"n{v}" for v in c) for c in chains(g)))
    lines.append("fpu candidates: " + ", ".join(f"n{v}" for v in fpu_candidates(g)))
    return "\n".join(lines)
