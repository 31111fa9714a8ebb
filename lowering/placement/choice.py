"""The choice IR of the placement: where one op runs (`Choice`: the SFPU in fp32, or the FPU with a fidelity and the
operand formats the unpackers produce), the FPU choices of a node (`options`), and a placement as the hardware runs
it (`split`: FPU ops writing Dst slots after the inputs, and the SFPU DAG reading those slots as LOADs, compiled by
`compile_split`). The evaluator and the elementwise plan both use this one split, so what is predicted is what runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.graph import FPU_BINARY, l1_source, live_nodes, renumber
from tt_backend.lowering.plan import SfpuProgram
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES


@dataclass(frozen=True)
class Choice:
    engine: str                              # "SFPU" | "FPU"
    fidelity: str | None = None              # FPU MUL: LoFi/HiFi2/HiFi3/HiFi4; None for ELWADD/ELWSUB and the SFPU
    formats: tuple[str, str] | None = None   # (SrcA, SrcB) formats: "bf16" | "tf32"
    swap: bool = False                       # operand 1 goes to SrcA (MUL/ADD are commutative)

    def label(self) -> str:
        if self.engine == "SFPU":
            return "SFPU fp32"
        return f"FPU {self.fidelity or '-'} {self.formats[0]}x{self.formats[1]}"


SFPU = Choice("SFPU")


@dataclass
class FpuOp:
    """One FPU elementwise op as the templates run it: input streams a -> SrcA, b -> SrcB (unpacked in the given
    formats), `kind` (ELWMUL/ELWADD/ELWSUB) with `phases` fidelity phases into Dst slot `slot` (fp32)."""
    node: int
    kind: str
    a: int
    b: int
    fmt_a: str
    fmt_b: str
    phases: int
    slot: int


@dataclass
class Split:
    fpu_ops: list[FpuOp]
    sfpu_dag: ValueDAG          # LOAD arg j < n_inputs: input stream j in Dst slot j; arg >= n_inputs: an FPU result
    n_slots: int                # Dst slots holding inputs and FPU results (the SFPU output goes to slot n_slots)
    dst_inputs: list[int]       # input streams the SFPU reads from Dst (the others feed the FPU only)
    uniform: frozenset[int] = frozenset()   # input streams with one value at every point (sfpu_codegen hoists what
                                            # is computed from them alone); the evaluator's samples vary: not set there


def _l1_format(dag: ValueDAG, i: int) -> str:
    return "bf16" if l1_source(dag, i).dtype == "bfloat16" else "fp32"


def options(dag: ValueDAG, v: int) -> list[Choice]:
    """FPU choices for candidate node v. Operand formats: a bf16 tile unpacks as bf16 only (bf16 -> tf32 is refused by
    the unpacker); an fp32 tile is truncated to tf32 (fp32 -> bf16 costs the same and is never more accurate).
    MUL puts the operand with fewer significant bits in SrcA: SrcA drops its 10th mantissa bit, SrcB keeps all 11."""
    n = dag.nodes[v]
    fa, fb = (_l1_format(dag, s) for s in n.srcs)
    swap = n.op in ("MUL", "ADD") and fa == "fp32" and fb == "bf16"
    if swap:
        fa, fb = fb, fa
    src = tuple("bf16" if f == "bf16" else "tf32" for f in (fa, fb))
    if n.op == "MUL":
        return [Choice("FPU", fid, src, swap) for fid in FIDELITY_PHASES]
    return [Choice("FPU", None, src, swap)]


def split(dag: ValueDAG, choices: dict[int, Choice], n_inputs: int, uniform: frozenset[int] = frozenset()) -> Split:
    """Replace every FPU node by a LOAD of its Dst slot (a bf16 node by a bf16 CAST of that LOAD: the FPU result is
    fp32 and the graph rounds it once, like the SFPU would); inputs only the FPU reads are not unpacked to Dst."""
    fpu: list[FpuOp] = []
    nodes = list(dag.nodes)
    extra: list[VNode] = []
    remap: dict[int, int] = {}
    for v in sorted(choices):
        c = choices[v]
        if c.engine != "FPU":
            continue
        n = dag.nodes[v]
        if n.op not in FPU_BINARY or len(n.srcs) != 2 or any(l1_source(dag, s) is None for s in n.srcs):
            raise UnsupportedOp(f"node n{v} ({n.op}) cannot run on the FPU: its operands are not L1 tiles")
        a, b = (l1_source(dag, s).arg for s in n.srcs)
        if c.swap:
            a, b = b, a
        slot = n_inputs + len(fpu)
        fpu.append(FpuOp(v, FPU_BINARY[n.op], a, b, c.formats[0], c.formats[1],
                         FIDELITY_PHASES[c.fidelity] if c.fidelity else 1, slot))
        nodes[v] = VNode(v, "LOAD", "float32", (), slot)
        if n.dtype == "bfloat16":
            k = len(nodes) + len(extra)
            extra.append(VNode(k, "CAST", "bfloat16", (v,)))
            remap[v] = k
    if remap:   # users of a bf16 FPU node read its rounding CAST (the CASTs themselves are in `extra`)
        nodes = [VNode(n.id, n.op, n.dtype, tuple(remap.get(s, s) for s in n.srcs), n.arg) for n in nodes]
    all_nodes = nodes + extra
    out = remap.get(dag.out, dag.out)
    sfpu_dag = renumber(all_nodes, out)
    live = live_nodes(sfpu_dag)
    live_loads = {sfpu_dag.nodes[i].arg for i in live if sfpu_dag.nodes[i].op == "LOAD"}
    fpu_only = ({o.a for o in fpu} | {o.b for o in fpu}) - live_loads
    dst_inputs = [j for j in range(n_inputs) if j not in fpu_only]
    return Split(fpu, sfpu_dag, n_inputs + len(fpu), dst_inputs, uniform)


def compile_split(sp: Split, out_dtype: str) -> SfpuProgram:
    """The split's SFPU program (the search prices and the evaluator runs it; the plan adds its SFPLOADMACRO form,
    families/elementwise.py)."""
    return compile_sfpu(sp.sfpu_dag, sp.n_slots, out_dtype, uniform=sp.uniform)


_OP_CYCLES: dict[tuple, int] = {}
