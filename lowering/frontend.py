"""tinygrad kernel AST -> index part (per stream: IndexExprs over the ranges) + value part (ValueDAG): the
LoweredKernel the kernel families (lowering/families, chosen by lowering/select.py) plan.

The AST tinygrad 0.14 hands a backend is "rangeified": `SINK(END(STORE(INDEX(PARAM, idx), value), *ranges))` where the
value reads buffers with `INDEX(PARAM, idx)` (no explicit LOAD; an explicit `LOAD(INDEX)` is accepted too), shapes live
in `RANGE` sizes, broadcasts/permutes/shrinks are affine index expressions and pads are `WHERE(valid, idx, Invalid)`
inside the index plus a `WHERE(valid, load, 0)` in the value. Everything that depends only on ranges is index math
(lowering/index.py, rendered as scalar C for the reader/writer); everything downstream of a load is the value DAG
(run on the SFPU). An integer or bool buffer read inside index math (x[idx] after tinygrad's load collapse, `lower_ast`)
is a LOAD node of the index expression: the reader fetches it (`loaded_index`).
A REDUCE becomes a REDUCE node of the DAG (its ranges go last in the iteration space; the reduction families plan it);
integer/bool index math that reaches the value part (arange, argmax's reversed index, tril masks, nonzero pads) is a
computed stream: the reader evaluates it per element in C and the SFPU loads it like any input (the true/false ones
over the same ranges as the bits of one: lowering/bool_pack.py). float32 index math
(interpolate's scaled indices) is C float, evaluated as tinygrad's CPU device evaluates it.
Dtypes (DTYPE_NAME): buffers keep their own dtype; the value DAG computes the narrow integers in int32 lanes, wrapped
after every op that can leave their range (`wrap`), and float16 as a float32 value rounded where it is cast.

This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass, field, replace

from tinygrad.dtype import DType, Invalid, dtypes, truncate
from tinygrad.uop.ops import AxisType, Ops, PatternMatcher, UOp, UPat, graph_rewrite
from tinygrad.uop.symbolic import sym
from tinygrad.schedule.multi import multi_pm
from tinygrad.schedule.rangeify import pm_mops
from tinygrad.codegen.simplify import pm_load_collapse

from tt_backend.lowering.bool_fold import constant_formulas
from tt_backend.lowering.bool_pack import pack_bool_streams
from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.index import OPS, IndexExpr, IndexTexts
from tt_backend.lowering.int64 import narrow_int64
from tt_backend.lowering.plan import DTYPE_SIZE, ROW_STEP0_DATUMS, TILE_ELEMS, Buffer, Stream, lane_dtype
from tt_backend.lowering.threefry import threefry2x32
from tt_backend.chip.errors import UnsupportedOp

# ---------------------------------------------------------------------------------------------------------- dtypes

DTYPE_NAME = {dtypes.float32: "float32", dtypes.bfloat16: "bfloat16", dtypes.int32: "int32", dtypes.uint32: "uint32",
              dtypes.bool: "bool"}
# the narrow dtypes (lowering/plan.py LANE_DTYPE): stored at their width, computed in 32-bit lanes
DTYPE_NAME.update({dtypes.int8: "int8", dtypes.uint8: "uint8", dtypes.int16: "int16", dtypes.uint16: "uint16",
                   dtypes.float16: "float16"})
# a narrow integer's lane value is brought back into its range after the ops that can leave it (WRAPPING_OPS), as
# tinygrad's CPU device wraps (two's complement truncation): dtype -> unsigned by a mask, signed by a shift pair
WRAPPING_OPS = ("ADD", "SUB", "MUL", "NEG", "SHL", "CAST", "REDUCE", "CDIV", "FLOORDIV")
WRAP = {"uint8": ("AND", 0xFF), "uint16": ("AND", 0xFFFF), "int8": ("SHIFT", 24), "int16": ("SHIFT", 16)}
NARROW_FLOATS = (dtypes.bfloat16, dtypes.float16)
NARROW_FLOAT_FORMAT = {dtypes.bfloat16: "bf16", dtypes.float16: "f16"}   # lowering/index.py ROUND
TAUTOLOGY_CHECK_MAX = 1 << 22          # iteration points a STORE gate's parts and index are evaluated over at compile time


def dtype_name(dt: DType, what: str) -> str:
    if dt == dtypes.weakfloat: dt = dtypes.default_float   # a weak float value lives at the default float (tinygrad)
    if dt == dtypes.weakint: dt = dtypes.int32             # a weak int (an untyped index constant) is an int32 value
    if (n := DTYPE_NAME.get(dt)) is None:   # vectors never reach us: the AST is pre-upcast
        raise UnsupportedOp(f"dtype {dt} ({what}): the TT backend supports {', '.join(DTYPE_NAME.values())} "
                            "(float64 is not lowered; int64 only where tinygrad's bounds keep the value "
                            "within int32 or uint32, and in comparisons of 32-bit integers: docs/tinygrad.md §2)")
    return n


def lane_name(dt: DType, what: str) -> str:
    """The dtype of dt's values in the SFPU's 32-bit lanes (the value DAG's dtypes)."""
    return lane_dtype(dtype_name(dt, what))


def buffer_dtype(param: UOp) -> str:
    dt = param.dtype.base if hasattr(param.dtype, "base") else param.dtype   # PtrDType in some tinygrad paths
    return dtype_name(dt, f"buffer {param.arg.slot}")


# ------------------------------------------------------------------------------------------------- index expressions
# Index-part UOps become IndexExprs (lowering/index.py: C text, numpy values, structure). What C needs from tinygrad
# is each node's operand bounds: unsigned arithmetic is exact when every operand is known >= 0.

def _nonneg(u: UOp) -> bool:
    """True when every operand of u is known >= 0, so unsigned C arithmetic gives the same answer as signed."""
    try:
        return all(s.vmin >= 0 for s in u.src)
    except Exception:  # vmin not defined for an operand: stay on the signed path
        return False


def _index_dtype(dt: DType) -> str:
    return "bool" if dt == dtypes.bool else "float" if dtypes.is_float(dt) else "int"


def index_expr(u: UOp, rvar: dict[UOp, int]) -> IndexExpr:
    """An index-part expression (ranges, integer/bool consts, integer ALU) as an IndexExpr, range x numbered rvar[x]."""
    memo: dict[UOp, IndexExpr] = {}

    def go(x: UOp) -> IndexExpr:
        if (r := memo.get(x)) is not None: return r
        if x.op is Ops.RANGE:
            r = IndexExpr.range_var(rvar[x])
        elif x.op is Ops.CONST:
            if x.arg is Invalid: raise UnsupportedOp("Invalid index outside a WHERE(valid, idx, Invalid)")
            r = IndexExpr.const(x.arg)
        elif x.op in (Ops.INDEX, Ops.LOAD):
            r = loaded_index(x.src[0] if x.op is Ops.LOAD else x, go)
        elif x.op.name in OPS:
            r = IndexExpr(x.op.name, _index_dtype(x.dtype), tuple(go(s) for s in x.src), nonneg=_nonneg(x))
        else:
            raise UnsupportedOp(f"{x.op.name} in an index expression")
        if x.op is Ops.CAST and x.dtype in NARROW_FLOATS:
            # float index math is float32 C; a cast to float16/bfloat16 rounds to it (as tinygrad's CPU device does
            # in a fused kernel: its other float16 ops keep the float32 value, like the SFPU's lanes)
            r = IndexExpr("ROUND", "float", (r,), arg=NARROW_FLOAT_FORMAT[x.dtype])
        memo[x] = r
        return r
    return go(u)


def loaded_index(load: UOp, go) -> IndexExpr:
    """An element of a buffer used as index math (x[idx] after tinygrad's load collapse; a gate comparing loaded
    floats; an index cast from a loaded float): a LOAD IndexExpr (integers and bools as their value, floats as C
    floats: codegen/c_exprs.py INDEX_LOAD), 0 where its own index is gated off (`go`: index_expr's builder of the
    operands)."""
    buf = load.src[0]
    while buf.op is not Ops.PARAM:
        if not buf.src: raise UnsupportedOp(f"INDEX into {buf.op.name} in an index expression")
        buf = buf.src[0]
    buffer_dtype(buf)   # refuses a dtype the backend does not hold
    dt = _index_dtype(load.dtype)
    conds, idx = strip_invalid(load.src[1])
    if len(load.src) > 2: conds.append(load.src[2])
    ld = IndexExpr("LOAD", dt, (go(idx),), arg=buf.arg.slot)
    if not conds: return ld
    gate = functools.reduce(lambda a, b: a._bin("AND", b, dtype="bool"), [go(c) for c in conds])
    return IndexExpr("WHERE", dt, (gate, ld, IndexExpr.const({"bool": False, "int": 0, "float": 0.0}[dt])))


def strip_ops(u: UOp, *ops: Ops) -> UOp:
    """u without its leading chain of `ops` (single-source wrappers such as CAST or LOAD): the first node below them."""
    while u.op in ops: u = u.src[0]
    return u


def strip_invalid(idx: UOp) -> tuple[list[UOp], UOp]:
    """Split `WHERE(valid, idx, Invalid)` (possibly nested) into (list of validity conditions, plain index)."""
    conds: list[UOp] = []
    while idx.op is Ops.WHERE and idx.src[2].op is Ops.CONST and idx.src[2].arg is Invalid:
        conds.append(idx.src[0])
        idx = idx.src[1]
    if any(x.op is Ops.CONST and x.arg is Invalid for x in idx.toposort()):
        raise UnsupportedOp("an Invalid index nested inside index arithmetic")
    return conds, idx


def conjuncts(conds: list[UOp]) -> frozenset[UOp]:
    """The set of terms of a conjunction (ANDs flattened): the canonical form used to compare gates."""
    out: set[UOp] = set()
    todo = list(conds)
    while todo:
        c = todo.pop()
        if c.op is Ops.AND and c.dtype == dtypes.bool: todo.extend(c.src)
        elif not (c.op is Ops.CONST and c.arg is True): out.add(c)
    return frozenset(out)


def affine(u: UOp) -> dict[UOp | None, int] | None:
    """u as {range: coefficient, None: constant} when it is affine in the ranges, else None (IndexExpr.affine)."""
    rngs = [x for x in u.toposort() if x.op is Ops.RANGE]
    try:
        co = index_expr(u, {r: k for k, r in enumerate(rngs)}).affine()
    except UnsupportedOp:   # not an index expression at all
        return None
    return None if co is None else {None if k is None else rngs[k]: c for k, c in co.items()}


# ---------------------------------------------------------------------------------------------------- the kernel

@dataclass
class StreamIndex(IndexTexts):
    """One buffer access: what the reader/writer computes per iteration point (index_c etc.: their C text)."""
    slot: int                    # tinygrad parameter slot of the buffer
    dtype: str
    index: IndexExpr
    valid: IndexExpr | None
    contiguous: bool
    gate: frozenset = field(default_factory=frozenset)   # validity terms as UOps (to simplify value-side WHEREs)
    ranges: frozenset = field(default_factory=frozenset)  # indices of the ranges the index or gate reads
    value: IndexExpr | None = None   # computed stream (plan.Stream.value): the value itself is this range expression
    coef: tuple[int, ...] | None = None   # plan.Stream.coef: affine index = sum coef[k] * r_k + coef[-1], else None


@dataclass
class LoweredKernel:
    """The frontend's result before SFPU code generation: iteration space, buffers, streams and value DAG."""
    name: str
    ranges: tuple[int, ...]
    buffers: list[Buffer]
    inputs: list[StreamIndex]
    output: StreamIndex
    dag: ValueDAG

    def buf_index(self, slot: int) -> int:
        return next(i for i, b in enumerate(self.buffers) if b.slot == slot)

    def stream(self, s: StreamIndex) -> Stream:
        return Stream(self.buf_index(s.slot), s.dtype, s.index, s.valid, s.contiguous, s.value, s.coef)

    @property
    def ops(self) -> list[str]:
        return [n.op if n.op != "CAST" else f"CAST->{n.dtype}" for n in self.dag.nodes if n.op not in ("LOAD", "CONST")]

    @property
    def uniform_inputs(self) -> frozenset[int]:
        """The input streams that read one element at every iteration point (an affine, ungated index with no
        coefficient on a range longer than 1: a broadcast scalar), so every valid datum of their tiles holds one value.
        None where a tile's row step 0 (datums 0..63) has pads: the SFPU setup reads that row step of them
        (lowering/codegen/sfpu_codegen.py), and ttsim refuses an SFPCONFIG whose lanes differ."""
        if 0 < math.prod(self.ranges) % TILE_ELEMS < ROW_STEP0_DATUMS:
            return frozenset()
        return frozenset(j for j, s in enumerate(self.inputs) if s.value is None and s.valid is None
                         and s.coef is not None and all(c == 0 for c, n in zip(s.coef, self.ranges) if n > 1))


# ops of the value part, mapped to ValueDAG op names; bool AND/OR/XOR are rewritten into WHERE/CMPNE, integer
# AND/OR/XOR/SHL/SHR keep their names, FLOORMOD by 2**k is an AND (_Lowerer._value); POW arrives decomposed (lower_ast)
VALUE_OPS = {Ops.ADD: "ADD", Ops.MUL: "MUL", Ops.SUB: "SUB", Ops.NEG: "NEG", Ops.MAX: "MAX", Ops.CMPLT: "CMPLT",
             Ops.CMPNE: "CMPNE", Ops.WHERE: "WHERE", Ops.RECIPROCAL: "RECIPROCAL", Ops.EXP2: "EXP2", Ops.LOG2: "LOG2",
             Ops.SQRT: "SQRT", Ops.SIN: "SIN", Ops.TRUNC: "TRUNC", Ops.CAST: "CAST",
             Ops.CDIV: "CDIV", Ops.CMOD: "CMOD", Ops.FLOORDIV: "FLOORDIV", Ops.FLOORMOD: "FLOORMOD"}
INT_DIVISION = (Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD)
# ops that never appear inside a kernel we can lower: name them precisely
REJECT = {Ops.SPECIAL: "SPECIAL (pre-launched kernels)",
          Ops.BARRIER: "BARRIER", Ops.WMMA: "WMMA", Ops.IF: "IF", Ops.AFTER: "AFTER (symbolic variables / assigns)",
          Ops.BUFFER: "BUFFER (local/register buffers)", Ops.CUSTOM: "CUSTOM", Ops.CUSTOMI: "CUSTOMI",
          Ops.STAGE: "STAGE (a local buffer: lowering/stage_inline.py recomputes the reads it can)"}


class _Lowerer:
    def __init__(self, sink: UOp, name: str, params: dict[int, UOp], fuse: dict[int, int] | None = None):
        self.sink, self.name, self.params = sink, name, params
        self.fuse = fuse or {}        # output range id -> the reduce range id it is read as (lower_ast)
        self.dag = ValueDAG()
        self.memo: dict[UOp, int] = {}
        self.memo64: dict[UOp, tuple[int, int]] = {}     # uint64 uop -> (low, high) uint32 value ids (value64)
        self.consts: dict[tuple, int] = {}            # (dtype, value bits) -> dag node id: one node per constant
        self.range_only: dict[UOp, bool] = {}
        self.load_ids: dict[UOp, int] = {}           # INDEX uop -> dag node id (identical loads share one stream)
        self.inputs: list[StreamIndex] = []

    # ---- structure
    def check_supported(self):
        for u in self.sink.toposort():
            if u.op in REJECT: raise UnsupportedOp(f"{self.name}: {REJECT[u.op]}")
            if u.op is Ops.PARAM and u.dtype != dtypes.void and u.addrspace is not None and u.addrspace.name == "ALU":
                raise UnsupportedOp(f"{self.name}: DEFINE_VAR / symbolic variable {u.arg} (the lowering takes constants: "
                                    f"bind the variables first, as tt_backend/bound_variables.py does at launch)")
            if u.op is Ops.RANGE:
                if u.arg[-1] is AxisType.GROUP_REDUCE:   # only after tinygrad's opts, which never run for TT
                    raise UnsupportedOp(f"{self.name}: GROUP_REDUCE range")
                if u.arg[-1] is AxisType.DEVICE:         # the chip's position: ops_tt.device_variants binds it
                    raise UnsupportedOp(f"{self.name}: a DEVICE axis (bind the chip position before lowering)")
                if u.src[0].op is not Ops.CONST: raise UnsupportedOp(f"{self.name}: symbolic RANGE size {u.src[0]}")

    def find_store(self) -> UOp:
        stores = [u for u in self.sink.toposort() if u.op is Ops.STORE]
        if len(stores) != 1:   # the staged family gives each STORE a stage of its own
            raise UnsupportedOp(f"{self.name}: {len(stores)} STOREs in one kernel (one pass writes one output)")
        return stores[0]

    def order_ranges(self, out_idx: UOp) -> list[UOp]:
        """Outermost first. Ordered by the output index's coefficients, so a plain write is contiguous; reduce
        ranges come last (lowering/families/sfpu_reduce.py: outputs x reduce index)."""
        rngs = sorted({u for u in self.sink.toposort() if u.op is Ops.RANGE and u not in self.alias},
                      key=lambda r: r.arg[0])
        coef = affine(out_idx) or {}
        return sorted(rngs, key=lambda r: (r.arg[-1] is AxisType.REDUCE, -coef.get(r, 0), r.arg[0]))

    def sibling_reduce_ranges(self) -> dict[UOp, UOp]:
        """tinygrad gives every REDUCE its own ranges, also two reductions over the same axis (x.sum(1) + x.max(1)).
        When neither reduction feeds the other and their range sizes agree, the later one's ranges alias the first's,
        so both run over one (output, k) iteration space (lowering/families/sfpu_reduce.py: one accumulator each). The same for a
        reduction whose pre-op reads the first one's value (dependent_reduce: lowering/families/sfpu_reduce.py runs it in a second
        pass over the same tiles)."""
        reds = [u for u in self.sink.toposort() if u.op is Ops.REDUCE]
        alias: dict[UOp, UOp] = {}
        if len(reds) < 2: return alias
        canon = sorted(reds[0].src[1:], key=lambda r: r.arg[0])
        for r in reds[1:]:
            mine = sorted(r.src[1:], key=lambda x: x.arg[0])
            if [x.src[0].arg for x in mine] != [x.src[0].arg for x in canon]:
                continue
            inner = [s for s in reds if s is not r and s in r.src[0].toposort()]
            if all(self.dependent_reduce(r, s) for s in inner):
                alias.update(zip(mine, canon))
        return alias

    def fused_ranges(self) -> dict[UOp, UOp]:
        """The output ranges `fuse` names, each mapped to its reduce range (lower() takes that range's canonical one
        when it is aliased to a sibling's): the kernel is then lowered over the reductions' (output, k) space."""
        by_id = {u.arg[0]: u for u in self.sink.toposort() if u.op is Ops.RANGE}
        alias = {}
        for out_id, red_id in self.fuse.items():
            if out_id not in by_id or red_id not in by_id:
                raise UnsupportedOp(f"{self.name}: no range {out_id} or {red_id} to fuse")
            alias[by_id[out_id]] = by_id[red_id]
        return alias

    @staticmethod
    def dependent_reduce(outer: UOp, inner: UOp) -> bool:
        """outer's pre-op reads inner's finished value (argmax: max, then a max over (x == max) * reversed index;
        (x - x.max()).exp().sum()): both may run over the same (output, k) space, in two passes over the data
        (lowering/families/sfpu_reduce.py), when inner's value does not depend on outer's reduce ranges and inner is not merged
        into outer (REDUCE(op, REDUCE(op, f, k1), k2) is one reduction over (k1, k2))."""
        if inner not in outer.src[0].toposort():
            return False
        x = outer.src[0]
        while x.op is Ops.REDUCE and x.arg[0] is outer.arg[0] and x.dtype == outer.dtype:
            if x is inner: return False
            x = x.src[0]
        own = set(inner.src[1:])
        used = {u for u in inner.src[0].toposort() if u.op is Ops.RANGE} - own
        return not used & set(outer.src[1:])

    def fold_range_constants(self, conds: list[UOp]) -> UOp | None:
        """A STORE gate (the conjunction of conds) with every part that reads only ranges and has one value over the
        whole iteration space replaced by that value, then simplified by tinygrad's rewrites; None when it is true at
        every point. tinygrad's simplifier leaves tautologies such as !(a && b) || a after a pad of a strided slice,
        also inside a disjunction with a loaded value (x < 0 || !(a && b) || a): at compile time they are constants."""
        if not conds: return None
        gate = functools.reduce(lambda a, b: a & b, conds)
        consts: dict[UOp, UOp] = {}
        def visit(u: UOp) -> None:
            if u in consts: return
            if u.dtype == dtypes.bool and self.is_range_only(u) and math.prod(self.sizes) <= TAUTOLOGY_CHECK_MAX:
                try:
                    values = self.expr(u).flat(self.sizes)
                except UnsupportedOp:   # not index math after all (a float constant C cannot hold): left as it is
                    values = None
                if values is not None and (values.all() or not values.any()):
                    consts[u] = UOp(Ops.CONST, dtypes.bool, arg=bool(values[0]))
                    return
            for s in u.src: visit(s)
        visit(gate)
        gate = graph_rewrite(gate.substitute(consts), sym)
        return None if gate.op is Ops.CONST and gate.arg is True else gate

    def check_within_buffer(self, idx: UOp, output: StreamIndex) -> None:
        """Refuse a gated STORE whose plain index leaves the buffer somewhere (read-modify-write reads and writes
        every point): tinygrad's bounds first, the index's values over the iteration space when those are too wide."""
        n = int(self.params[output.slot].src[0].arg)
        if 0 <= idx.vmin and idx.vmax < n: return
        if math.prod(self.sizes) <= TAUTOLOGY_CHECK_MAX:
            values = output.index.flat(self.sizes)
            if values.min() >= 0 and values.max() < n: return
        raise UnsupportedOp(f"{self.name}: a gated STORE whose index ({output.index_c}) leaves the {n}-element "
                            "buffer where the gate is off")

    # ---- index part
    def expr(self, u: UOp) -> IndexExpr:
        e = index_expr(u, self.rvar)
        e.render_c()   # refused now, not when the templates render it (a float constant: C has no form for it yet)
        return e

    def stream_index(self, idx_uop: UOp) -> StreamIndex:
        buf = idx_uop.src[0]
        while buf.op is not Ops.PARAM:
            if not buf.src: raise UnsupportedOp(f"{self.name}: INDEX into {buf.op.name}")
            buf = buf.src[0]
        conds, idx = strip_invalid(idx_uop.src[1])
        if len(idx_uop.src) > 2: conds.append(idx_uop.src[2])   # an explicit INDEX gate
        gate = conjuncts(conds)
        terms = sorted((self.expr(c) for c in gate), key=IndexExpr.render_c)   # same C for the same AST
        valid = IndexExpr.all_of(terms) if terms else None
        index = self.expr(idx)
        sizes = self.sizes
        strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
        # per kernel range (aliased reduce ranges share their canonical one's number: their coefficients add up)
        coef = index.coefficients(len(sizes))
        contiguous = not gate and coef is not None and coef[-1] == 0 and \
            all(coef[i] == strides[i] or sizes[i] == 1 for i in range(len(sizes)))
        used = index.ranges() | (valid.ranges() if valid is not None else frozenset())
        return StreamIndex(buf.arg.slot, buffer_dtype(buf), index, valid, contiguous, gate, used, coef=coef)

    # ---- value part
    def is_range_only(self, u: UOp) -> bool:
        """u depends on the iteration index but reads no buffer (index math that leaked into the value part)."""
        if (r := self.range_only.get(u)) is None:
            ops = {x.op for x in u.toposort()}
            r = self.range_only[u] = Ops.RANGE in ops and not ops & {Ops.INDEX, Ops.LOAD}
        return r

    def value(self, u: UOp, want: DType | None = None) -> int:
        """Lower one value-part uop into the DAG; `want` resolves weak/untyped constants from their consumer."""
        if u.op is Ops.CONST:
            if u.arg is Invalid:
                # a gated value WHERE(valid, x, Invalid) left after tinygrad's Invalid lifting (a reduction's gated
                # source): tinygrad's final rewrite (pm_remove_invalid) gives its Invalid side the value 0
                u = UOp.const(0, want if want is not None else dtypes.bool)
            dt = want if (want is not None and (u.dtype in dtypes.weaks or u.dtype == dtypes.void)) else u.dtype
            if dt in dtypes.weaks: dt = dtypes.float32 if dt == dtypes.weakfloat else dtypes.int32
            v, name = u.arg, dtype_name(dt, "constant")
            # integers wrap to their dtype as tinygrad's own constants do (dtype.truncate): 0xFFFFFFFF is -1 in int32,
            # -1 is 255 in uint8; a float16 constant is the float16 value (its float32 lane value is exact)
            v = bool(v) if dt == dtypes.bool else float(truncate[dt](float(v))) if dt == dtypes.float16 \
                else float(v) if dtypes.is_float(dt) else truncate[dt](int(v))
            key = (lane_dtype(name), struct.pack("<d", v) if isinstance(v, float) else v)  # -0.0 != 0.0
            if key not in self.consts: self.consts[key] = self.dag.add("CONST", key[0], (), v)
            return self.consts[key]
        if u in self.memo: return self.memo[u]
        nid = self._value(u)
        self.memo[u] = nid
        return nid

    def _value(self, u: UOp) -> int:
        if u.op is Ops.LOAD: u = u.src[0]
        if u.op is Ops.INDEX:
            if u in self.load_ids: return self.load_ids[u]
            s = self.stream_index(u)
            nid = self.dag.add("LOAD", lane_dtype(s.dtype), (), len(self.inputs))
            self.inputs.append(s)
            self.load_ids[u] = nid
            return nid
        if u.op is Ops.REDUCE:
            if u.arg[0] not in (Ops.ADD, Ops.MUL, Ops.MAX):
                raise UnsupportedOp(f"{self.name}: REDUCE {u.arg[0]} (ADD, MUL and MAX reductions are lowered)")
            inner, rngs = u.src[0], list(u.src[1:])
            while inner.op is Ops.REDUCE and inner.arg[0] is u.arg[0] and inner.dtype == u.dtype:
                inner, rngs = inner.src[0], rngs + list(inner.src[1:])   # sum of sums = one sum over both ranges
            src = self.value(inner, u.dtype)
            axes = tuple(sorted(self.rvar[r] for r in rngs))
            if u.arg[0] is not Ops.MAX and u.dtype in NARROW_FLOATS:
                # a sum/product typed bfloat16/float16 (tinygrad's one-hot indexing sums in the operand's dtype):
                # accumulated in float32 (its lane values are float32 values) and rounded once, as a CAST rounds
                red = self.dag.add("REDUCE", "float32", (src,), (u.arg[0].name, axes))
                return self.dag.add("CAST", lane_name(u.dtype, "REDUCE"), (red,))
            return self.wrap(self.dag.add("REDUCE", lane_name(u.dtype, "REDUCE"), (src,), (u.arg[0].name, axes)), u.dtype)
        if (u.op is Ops.RANGE or self.is_range_only(u)) and (u.dtype in (dtypes.bool, dtypes.int32, dtypes.uint32) or
                                                             u.dtype in dtypes.weaks and not dtypes.is_float(u.dtype)):
            return self.computed_stream(u)
        if u.op is Ops.RANGE or self.is_range_only(u) and u.op not in (Ops.CAST, *VALUE_OPS):
            raise UnsupportedOp(f"{self.name}: a value that depends on the iteration index ({u.op.name} over ranges "
                                "in {u.dtype} is not lowered yet)")
        dt = lane_name(u.dtype, u.op.name)
        if u.op is Ops.WHERE and self.is_range_only(u.src[0]):
            return self.range_gated_where(u)
        if u.op is Ops.FLOORMOD and (m := self.power_of_two(u.src[1])) is not None:
            # floor modulo by 2**k is the low k bits in two's complement, negative dividends included
            mask = self.value(UOp(Ops.CONST, u.dtype, arg=m - 1))
            return self.dag.add("AND", dt, (self.value(u.src[0], u.dtype), mask))
        if u.op is Ops.FLOORDIV and (m := self.power_of_two(u.src[1])) is not None and u.dtype != dtypes.bool:
            # floor division by 2**k is the arithmetic (uint32: logical) shift right by k
            k = self.value(UOp(Ops.CONST, u.dtype, arg=m.bit_length() - 1))
            return self.dag.add("SHR", dt, (self.value(u.src[0], u.dtype), k))
        if u.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR) and u.dtype != dtypes.bool:
            return self.wrap(self.dag.add(u.op.name, dt, tuple(self.value(s, u.dtype) for s in u.src)), u.dtype)
        if u.op is Ops.BITCAST:
            return self.bitcast(u)
        if u.op in (Ops.AND, Ops.OR, Ops.XOR):
            a, b = self.value(u.src[0], dtypes.bool), self.value(u.src[1], dtypes.bool)
            if u.op is Ops.XOR: return self.dag.add("CMPNE", "bool", (a, b))
            k = self.dag.add("CONST", "bool", (), u.op is Ops.OR)
            return self.dag.add("WHERE", "bool", (a, b, k) if u.op is Ops.AND else (a, k, b))
        if u.op is Ops.CAST and u.src[0].dtype == dtypes.uint64 and u.dtype == dtypes.uint32:
            return self.value64(u.src[0])[0]
        if u.op is Ops.CMPEQ:   # a == b  ->  (a != b) != True
            ne = self._value(UOp(Ops.CMPNE, dtypes.bool, u.src))
            return self.dag.add("CMPNE", "bool", (ne, self.value(UOp(Ops.CONST, dtypes.bool, arg=True))))
        if u.op not in VALUE_OPS: raise UnsupportedOp(f"{self.name}: {u.op.name} ({u.dtype}) has no TT lowering yet")
        if u.op in INT_DIVISION and dt not in ("int32", "uint32"):
            raise UnsupportedOp(f"{self.name}: {u.op.name} in {dt} (integer division is lowered for int32 and uint32)")
        if u.op in (Ops.CMPLT, Ops.CMPNE):
            typed = [s.dtype for s in u.src if s.op is not Ops.CONST or s.dtype not in dtypes.weaks]
            opnd = typed[0] if typed else (dtypes.float32 if any(s.dtype == dtypes.weakfloat for s in u.src) else dtypes.int32)
            srcs = tuple(self.value(s, opnd) for s in u.src)
        elif u.op is Ops.WHERE:
            srcs = (self.value(u.src[0], dtypes.bool), self.value(u.src[1], u.dtype), self.value(u.src[2], u.dtype))
        elif u.op is Ops.CAST:
            srcs = (self.value(u.src[0], None),)
        elif u.op is Ops.RECIPROCAL and u.src[0].dtype != u.dtype:
            # int / int: tinygrad sends a float RECIPROCAL of the integer divisor, meaning 1.0 / float(b)
            srcs = (self.dag.add("CAST", dt, (self.value(u.src[0], None),)),)
        else:
            srcs = tuple(self.value(s, u.dtype) for s in u.src)
        return self.wrap(self.dag.add(VALUE_OPS[u.op], dt, srcs), u.dtype)

    def wrap(self, nid: int, dt: DType) -> int:
        """Node nid computed dt's value in an int32 lane: for a narrow integer dtype, after an op that can leave its
        range (WRAPPING_OPS), the value wrapped into the range as tinygrad's CPU device computes it."""
        if (w := WRAP.get(DTYPE_NAME.get(dt))) is None or self.dag.nodes[nid].op not in WRAPPING_OPS: return nid
        kind, k = w
        def const(c: int) -> int: return self.value(UOp(Ops.CONST, dtypes.int32, arg=c))
        if kind == "AND": return self.dag.add("AND", "int32", (nid, const(k)))
        return self.dag.add("SHR", "int32", (self.dag.add("SHL", "int32", (nid, const(k))), const(k)))   # arithmetic

    def bitcast(self, u: UOp) -> int:
        """BITCAST between 32-bit dtypes, whose lane values are the same bits (float32, int32, uint32): the value
        itself. Other pairs (float16 <-> int16: a float16 lane holds its float32 value) are not lowered."""
        src, to = lane_name(u.src[0].dtype, "BITCAST"), lane_name(u.dtype, "BITCAST")
        same_bits = u.src[0].dtype.itemsize == u.dtype.itemsize == 4
        if not same_bits:
            raise UnsupportedOp(f"{self.name}: BITCAST {u.src[0].dtype} -> {u.dtype} (lowered between float32, int32 and uint32)")
        return self.dag.add("BITCAST", to, (self.value(u.src[0], u.src[0].dtype),)) if src != to else \
            self.value(u.src[0], u.src[0].dtype)

    def value64(self, u: UOp) -> tuple[int, int]:
        """A uint64 value as (low, high) uint32 value ids. tinygrad's RNG packs two uint32 words into a uint64 for
        THREEFRY and unpacks the result ((w1 << 32) | w0, then .cast(uint32) and (x >> 32).cast(uint32)); only those
        word moves are lowered, no 64-bit arithmetic."""
        if (r := self.memo64.get(u)) is not None: return r
        def u32(v: int) -> int: return self.value(UOp(Ops.CONST, dtypes.uint32, arg=v))
        if u.op is Ops.CONST: r = (u32(u.arg & 0xFFFFFFFF), u32((u.arg >> 32) & 0xFFFFFFFF))
        elif u.op is Ops.CAST and u.src[0].dtype in (dtypes.uint32, dtypes.int32, dtypes.bool):
            if u.src[0].dtype == dtypes.int32: raise UnsupportedOp(f"{self.name}: CAST int32 -> uint64 (sign extension)")
            r = (self.value(u.src[0], dtypes.uint32), u32(0))
        elif u.op in (Ops.SHL, Ops.SHR) and u.src[1].op is Ops.CONST and u.src[1].arg == 32:
            lo, hi = self.value64(u.src[0])
            r = (u32(0), lo) if u.op is Ops.SHL else (hi, u32(0))
        elif u.op is Ops.OR:
            (a0, a1), (b0, b1) = self.value64(u.src[0]), self.value64(u.src[1])
            r = (self.or32(a0, b0), self.or32(a1, b1))
        elif u.op is Ops.THREEFRY:
            r = threefry2x32(lambda op, a, b: self.dag.add(op, "uint32", (a, b)), u32,
                             self.value64(u.src[0]), self.value64(u.src[1]))
        else:
            raise UnsupportedOp(f"{self.name}: {u.op.name} on uint64 (lowered: the word packing tinygrad's THREEFRY uses)")
        self.memo64[u] = r
        return r

    def or32(self, a: int, b: int) -> int:
        """a | b on uint32 values, a constant 0 side folded away (the packed words never overlap)."""
        zero = self.consts.get(("uint32", 0))
        if a == zero: return b
        if b == zero: return a
        return self.dag.add("OR", "uint32", (a, b))

    @staticmethod
    def power_of_two(u: UOp) -> int | None:
        """The value of an integer constant 2**k (k >= 0), else None."""
        ok = u.op is Ops.CONST and isinstance(u.arg, int) and u.arg > 0 and u.arg & (u.arg - 1) == 0
        return u.arg if ok else None

    def computed_stream(self, u: UOp) -> int:
        """Integer/bool index math in the value part (arange, argmax's reversed index): the reader computes it per
        element in C (a stream with no buffer) and the SFPU loads it like any input."""
        if u in self.load_ids: return self.load_ids[u]
        dt = "bool" if u.dtype == dtypes.bool else "uint32" if u.dtype == dtypes.uint32 else "int32"
        value = self.expr(u)
        s = StreamIndex(self.store_slot, dt, IndexExpr.const(0), None, False, frozenset(), value.ranges(), value)
        nid = self.dag.add("LOAD", dt, (), len(self.inputs))
        self.inputs.append(s)
        self.load_ids[u] = nid
        return nid

    def range_gated_where(self, u: UOp) -> int:
        """WHERE(c, x, y) with c over ranges only: that is a pad. It folds away when the zero side is exactly what
        the gated load already reads outside its valid region (invalid reads are 0)."""
        c, x, y = u.src
        terms, not_c = conjuncts([c]), conjuncts([UOp(Ops.CMPNE, dtypes.bool, (c, UOp(Ops.CONST, dtypes.bool, arg=True)))])
        def is_zero(v: UOp) -> bool: return v.op is Ops.CONST and v.arg == 0
        def zero_outside(v: UOp, region: frozenset) -> bool:
            """v is a gated load (possibly cast) whose gate implies `region`: outside region it reads 0 already."""
            while v.op is Ops.CAST: v = v.src[0]
            if v.op is Ops.LOAD: v = v.src[0]
            if v.op is not Ops.INDEX: return False
            conds, _ = strip_invalid(v.src[1])
            return region <= conjuncts(conds + list(v.src[2:]))
        if is_zero(y) and zero_outside(x, terms): return self.value(x, u.dtype)
        if is_zero(x) and zero_outside(y, not_c): return self.value(y, u.dtype)
        # anything else (a pad with a nonzero value, tril/triu masks): the condition is a computed bool stream
        dt = u.dtype
        return self.dag.add("WHERE", lane_name(dt, "WHERE"), (self.computed_stream(c), self.value(x, dt), self.value(y, dt)))

    def lower(self) -> LoweredKernel:
        self.check_supported()
        store = self.find_store()
        out_index = store.src[0]
        if out_index.op is Ops.CAST: out_index = out_index.src[0]
        if out_index.op is not Ops.INDEX: raise UnsupportedOp(f"{self.name}: STORE to {out_index.op.name}")
        sib = self.sibling_reduce_ranges()
        self.alias = sib | {o: sib.get(r, r) for o, r in self.fused_ranges().items()}
        rngs = self.order_ranges(strip_invalid(out_index.src[1])[1])
        self.rvar = {r: i for i, r in enumerate(rngs)}
        self.rvar.update({a: self.rvar[c] for a, c in self.alias.items()})
        self.sizes = [int(r.src[0].arg) for r in rngs]
        conds, idx = strip_invalid(out_index.src[1])
        plain_index = UOp(Ops.INDEX, out_index.dtype, (out_index.src[0], idx))
        output = self.stream_index(plain_index)
        self.store_slot = output.slot
        if output.index_loads: raise UnsupportedOp(f"{self.name}: a STORE whose index depends on loaded data")
        value = store.src[1]
        gate = self.fold_range_constants(conds + list(out_index.src[2:]) + list(store.src[2:]))
        if gate is not None:
            # a gated STORE leaves the element as it was where the gate is off: the kernel reads the output buffer
            # and stores WHERE(gate, value, old) everywhere (the gate is then a value, so it may read loaded data of
            # any dtype). That needs an index inside the buffer also where the gate is off.
            self.check_within_buffer(idx, output)
            value = UOp(Ops.WHERE, out_index.dtype, (gate, value, plain_index))
        self.dag.out = self.value(value, out_index.dtype)
        out_dt = self.dag.nodes[self.dag.out].dtype
        if out_dt != lane_dtype(output.dtype) and value.dtype in dtypes.weaks:
            # tinygrad's symbolic rewrites can leave a weak-typed value at a STORE (x.expand(8, n).all(): the bool
            # product folded into a power in weakint); the store converts it to the buffer's dtype
            self.dag.out = self.value(value.cast(out_index.dtype), out_index.dtype)
            out_dt = self.dag.nodes[self.dag.out].dtype
        if out_dt != lane_dtype(output.dtype):   # tinygrad always stores the buffer's dtype; anything else is a frontend bug
            raise UnsupportedOp(f"{self.name}: stored value is {out_dt}, the buffer is {output.dtype}")
        self.inputs, self.dag = pack_bool_streams(self.inputs, self.dag)
        if not self.inputs:
            # a constant kernel (Tensor.zeros(...).contiguous(), folded math): the tile pipeline is driven by input
            # tiles, so stream the output buffer itself in as a never-used input (its value is dead in the DAG)
            self.dag.add("LOAD", lane_dtype(output.dtype), (), 0)
            self.inputs.append(replace(output, gate=frozenset()))
        buffers = [Buffer(s, buffer_dtype(p), int(p.src[0].arg) * DTYPE_SIZE[buffer_dtype(p)])
                   for s, p in sorted(self.params.items())]
        return LoweredKernel(self.name, tuple(self.sizes), buffers, self.inputs, output, self.dag)


# ------------------------------------------------------------------------------------------------ nested sums
# tinygrad's backward of a pooling or a convolution (the input gradient: a sum over the kernel window of shifted sums
# over the output channels) reaches us as REDUCE(ADD, WHERE(window valid, REDUCE(ADD, f, inner), 0), window), the inner
# sum depending on the outer one's window ranges. Run as written, that is a reduction feeding a reduction over other
# ranges: the staged family materializes the inner sums (a scratch buffer as large as every (window, element) pair)
# and runs two launches. When the outer value is linear in the inner sum (multiplied by, negated, gated with a zero
# on the other side, by factors that do not depend on the inner ranges) it is one sum over both sets of ranges:
# sum_k a_k * sum_o f_ko = sum_(k,o) a_k * f_ko. Merging is done only when it computes no more elements than the two
# stages would (no inner sum recomputed per outer element), or more by less than a launch's worth: the one-pass
# reduction then does that work in one launch.

# The second launch of the staged form (its movers, the scratch's round trip through DRAM) costs about as many cycles
# as this many summed elements: conv2d's input gradient at batch 1 (2x6x6, 3 output channels) merged is 1,944
# elements in 17.2k cycles, staged 702 elements in 42.0k cycles over two launches (emulated).
STAGE_LAUNCH_ELEMENTS = 4096


def free_ranges(u: UOp, memo: dict[UOp, frozenset]) -> frozenset:
    """The RANGEs u's value depends on, minus those a REDUCE inside u reduces over."""
    if (r := memo.get(u)) is None:
        r = frozenset([u]) if u.op is Ops.RANGE else frozenset().union(*(free_ranges(s, memo) for s in u.src))
        if u.op is Ops.REDUCE: r -= set(u.src[1:])
        memo[u] = r
    return r


def _is_zero(u: UOp) -> bool:
    return u.op is Ops.CONST and not isinstance(u.arg, bool) and u.arg == 0


def linear_sum(e: UOp) -> UOp | None:
    """The REDUCE(ADD) e is a homogeneous linear function of (e = R, -e', a * e', WHERE(c, e', 0), WHERE(c, 0, e')
    with R in e' only), else None."""
    if e.op is Ops.REDUCE and e.arg[0] is Ops.ADD: return e
    if e.op is Ops.NEG: return linear_sum(e.src[0])
    if e.op is Ops.MUL: sides = [(e.src[0], e.src[1:]), (e.src[1], e.src[:1])]
    elif e.op is Ops.WHERE and _is_zero(e.src[2]): sides = [(e.src[1], e.src[:1])]
    elif e.op is Ops.WHERE and _is_zero(e.src[1]): sides = [(e.src[2], e.src[:1])]
    else: return None
    for x, others in sides:
        if (r := linear_sum(x)) is not None and not any(r in o.toposort() for o in others): return r
    return None


def merge_nested_sum(out_ranges: frozenset, outer: UOp) -> UOp | None:
    """REDUCE(ADD, L(REDUCE(ADD, f, inner)), ranges) -> REDUCE(ADD, L(f), ranges + inner) for a linear L (above),
    when the merged sum's elements (outer elements x inner range) are no more than the two stages' (the inner sum over
    its own free ranges, then the outer sum) and a launch (STAGE_LAUNCH_ELEMENTS). The outer sum is evaluated per
    element of the kernel's output ranges (`out_ranges`: a value that does not depend on one is still computed for
    each) and of the ranges its value uses."""
    if outer.arg[0] is not Ops.ADD or (inner := linear_sum(outer.src[0])) is None or inner is outer.src[0] \
            or inner.dtype != outer.dtype:
        return None
    memo: dict[UOp, frozenset] = {}
    def size(rngs) -> int: return math.prod(int(r.src[0].arg) for r in rngs)
    own = set(inner.src[1:])
    if own & set(outer.src[0].toposort(gate=lambda u: u is not inner)):
        return None   # an inner range is used outside the inner sum: not separable
    outer_elems = size(out_ranges | free_ranges(outer.src[0], memo) | set(outer.src[1:]))
    inner_elems = size(own)
    if outer_elems * inner_elems > size(free_ranges(inner, memo)) * inner_elems + outer_elems + STAGE_LAUNCH_ELEMENTS:
        return None
    body = outer.src[0].substitute({inner: inner.src[0]})
    return outer.replace(src=(body, *outer.src[1:], *inner.src[1:]))


nested_sums = PatternMatcher([(UPat(Ops.REDUCE, name="outer"), lambda ctx, outer: merge_nested_sum(ctx, outer))])


def output_ranges(sink: UOp) -> frozenset:
    """The ranges the kernel's STOREs run over (END's ranges)."""
    return frozenset(r for u in sink.toposort() if u.op is Ops.END for r in u.src[1:] if r.op is Ops.RANGE)


def lower_ast(sink: UOp, name: str, fuse: dict[int, int] | None = None) -> LoweredKernel:
    """The pure frontend: index expressions + value DAG (no SFPU code generation, no L1 allocation). `fuse` (output
    range id -> reduce range id, lowering/families/fused_reduce.py): each such output range is read as that reduce
    range, so an elementwise over a reduction's (output, k) space is lowered over that space (its loads at (o, n)
    become the reduction's loads at (o, k))."""
    if sink.op is not Ops.SINK: raise UnsupportedOp(f"{name}: expected a SINK, got {sink.op.name}")
    # tinygrad's codegen runs its symbolic rewrites (`sym`) on every kernel before any device renders it, so the CPU
    # device computes POW by its decomposition and x * (1/(1+x)) as 1 - 1/(1+x) (sigmoid's gradient at -1000 is 0
    # there, not 0 * inf). The same rewrites here give the same algebra. The buffers stay the AST's: a rewrite may drop
    # a load (x - x), but tinygrad still passes every buffer.
    # Before that, tinygrad's codegen resolves in-kernel shards (`multi_pm`) and folds movement ops on buffers into
    # their indices (`pm_mops`): kernels the scheduler lowers itself never carry any, but the kernels of a precompiled
    # function (the cross-device allreduce: `RESHAPE(PARAM, ())` of its scalar chunks) do.
    params = {u.arg.slot: u for u in sink.toposort() if u.op is Ops.PARAM}
    sink = graph_rewrite(graph_rewrite(sink, multi_pm), pm_mops, bottom_up=True)
    # tinygrad's codegen also collapses a sum over an indexed axis of (loaded index == arange) into one load at the
    # loaded index (`pm_load_collapse`: the one-hot reductions of __getitem__ by tensors, gather): the reader then
    # gathers each element once (lowering/index.py LOAD) instead of reducing over the whole axis. When that form does
    # not lower here (a loaded index in a STORE, a float index buffer), the reduction form still does.
    collapsed = graph_rewrite(sink, pm_load_collapse)
    if collapsed is not sink:
        try:
            return _lower_symbolic(collapsed, name, params, fuse)
        except UnsupportedOp:
            pass
    return _lower_symbolic(sink, name, params, fuse)


def _lower_symbolic(sink: UOp, name: str, params: dict, fuse: dict[int, int] | None = None) -> LoweredKernel:
    """`sym` (again after folding the constant boolean formulas it leaves: lowering/bool_fold.py), then nested sums
    merged where that recomputes nothing (`nested_sums`), then the lowering proper."""
    sink = graph_rewrite(sink, sym)
    if (folded := graph_rewrite(sink, constant_formulas)) is not sink: sink = graph_rewrite(folded, sym)
    sink = narrow_int64(sink)
    return _Lowerer(graph_rewrite(sink, nested_sums, ctx=output_ranges(sink)), name, params, fuse).lower()

