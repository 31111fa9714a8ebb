"""The staged family: a kernel no one-pass family lowers, for its size or the shape of its fusion, runs in stages.

A stage is a kernel of its own (a tinygrad SINK AST) lowered by the one-pass families (elementwise, SFPU/FPU
reductions incl. the two-pass form, matmuls) through the selector's rule: their plans, not a copy of them. The
stages partition the kernel's value graph by *cuts*, tried in this order until every stage lowers:

1. several STOREs: one stage per STORE, in the kernel's order;
2. a reduction inside the stored value (one feeding another over other ranges, a reduction of a reduction, several
   chained ones): the first innermost REDUCE is materialized;
3. too many input streams for one pass (Dst slots, L1): the largest sub-expression holding at most half of the
   kernel's input streams (buffer reads and the masks/aranges the frontend computes from the ranges) is
   materialized.

Materializing a value v: a new stage stores v into a DRAM scratch buffer indexed row-major by the ranges v depends on
(a reduce range of an enclosing reduction becomes a loop range of that stage), and v's consumers load the scratch
buffer through the same index over their own ranges. Each cut lowers the number of stores, reductions or streams of
what is left, so the staging ends; a kernel that no cut helps keeps the one-pass families' refusal (its semantics).

Before these cuts (and in `hoisted`, before the one-pass families are asked), a matmul fused into a bigger kernel is cut
out into a matmul stage of its own (the contraction cut, below).

A reduction and the elementwise over its own elements (tinygrad's PCONTIG=2 normalizations) is offered to
lowering/families/fused_reduce.py first (lowering/select.py): one launch, unless the launch model prices the hoisted
stages lower.

The plugin runs the stages as launches of one program call, in order, with the scratch buffers allocated for the call
and freed after (tt_backend/ops_tt.py). The family's one candidate is priced at infinity, so the selector takes it
only when no one-pass plan exists.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Callable

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AxisType, Ops, ParamArg, UOp

from tt_backend.chip.errors import UnsupportedOp
from tt_backend.lowering.families.family import Candidate, Family, Kernel, choose
from tt_backend.lowering.families.matmul_match import matmul_of
from tt_backend.lowering.families.matmul_spec import k_chained, k_order
from tt_backend.lowering.frontend import (affine, buffer_dtype, dtype_name, free_ranges, output_ranges, strip_invalid,
                                          strip_ops)
from tt_backend.lowering.plan import DTYPE_SIZE, Buffer, Plan


@dataclass
class StagedPlan(Plan):
    """The stages' plans, launched in order; buffers are the kernel's (tinygrad's slots), `scratch` the intermediates
    (slots after the kernel's: a stage's buffer with slot len(buffers) + j is scratch[j])."""
    stages: list[Plan] = field(default_factory=list)
    scratch: list[Buffer] = field(default_factory=list)

    @property
    def launches(self) -> list[Plan]:
        return self.stages

    @property
    def n_tiles(self) -> int:
        return sum(s.n_tiles for s in self.stages)

    @property
    def out_slots(self) -> list[int]:
        kernel = {b.slot for b in self.buffers}
        return sorted({s.buffers[s.output.buf].slot for s in self.stages} & kernel)

    @property
    def in_slots(self) -> list[int]:
        kernel = {b.slot for b in self.buffers}
        return sorted({slot for s in self.stages for slot in s.in_slots} & kernel)

    def render(self) -> dict[str, str]:
        raise TypeError(f"{self.name}: a staged plan is rendered stage by stage (StagedPlan.launches)")

    def sfpu_words(self) -> list[int]:
        return [w for s in self.stages for w in s.sfpu_words()]

    def where(self) -> list[dict]:
        """Per stage: its kernel, what it reads and writes, each buffer named as the kernel's slot or a scratch
        buffer in DRAM (report.json's `stages`)."""
        n = len(self.buffers)
        def name(slot: int) -> str: return f"slot {slot}" if slot < n else f"scratch {slot - n} (DRAM)"
        return [{"kernel": s.name, "family": type(s).__name__, "ranges": list(s.ranges),
                 "reads": [name(slot) for slot in s.in_slots], "writes": name(s.buffers[s.output.buf].slot)}
                for s in self.stages]


# --------------------------------------------------------------------------------------------------- the cuts

def stored_values(sink: UOp) -> list[UOp]:
    return [u.src[1] for u in sink.toposort() if u.op is Ops.STORE]


def value_nodes(sink: UOp) -> list[UOp]:
    """The value part of the kernel, inputs first: everything the stored values compute, loads (INDEX) as leaves."""
    seen: dict[UOp, None] = {}
    def walk(u: UOp):
        if u in seen: return
        if u.op is not Ops.INDEX:
            for s in u.src: walk(s)
        seen[u] = None
    for v in stored_values(sink): walk(v)
    return list(seen)


def streams(u: UOp, memo: dict[UOp, frozenset]) -> frozenset:
    """The input streams under u's value: the buffer reads (INDEX nodes) and the index math over ranges only that the
    frontend computes into a stream of its own (arange, a mask's or pad's condition: lowering/frontend.py)."""
    if (r := memo.get(u)) is None:
        if u.op is Ops.INDEX or u.op is Ops.RANGE: r = frozenset([u])
        elif u.op is Ops.REDUCE: r = streams(u.src[0], memo)
        else: r = frozenset().union(*(streams(s, memo) for s in u.src))
        if u.op is not Ops.INDEX and r and not any(x.op is Ops.INDEX for x in r): r = frozenset([u])   # ranges only
        memo[u] = r
    return r


def is_value(u: UOp) -> bool:
    """A value the kernel computes from its loads (not index math, not a constant)."""
    return u.dtype != dtypes.void and u.dtype not in dtypes.weaks and u.op not in (Ops.CONST, Ops.RANGE, Ops.PARAM)


def reduction_cut(sink: UOp) -> UOp | None:
    """The first innermost REDUCE that is not the whole stored value."""
    stored = set()
    for v in stored_values(sink):
        stored.add(v)
        while v.op is Ops.CAST: v = v.src[0]; stored.add(v)
    return next((u for u in value_nodes(sink) if u.op is Ops.REDUCE and u not in stored
                 and not any(x.op is Ops.REDUCE for x in u.src[0].toposort())), None)


def load_cut(sink: UOp) -> UOp | None:
    """The sub-expression (no reduction inside) holding the most input streams, at least two and at most half of
    them."""
    memo: dict[UOp, frozenset] = {}
    nodes = value_nodes(sink)
    total = len(frozenset().union(*(streams(v, memo) for v in stored_values(sink))))
    best = None
    for u in nodes:
        n = len(streams(u, memo))
        if is_value(u) and u.op is not Ops.INDEX and 2 <= n <= max(2, total // 2) and n < total \
                and not any(x.op is Ops.REDUCE for x in u.toposort()) and (best is None or n > best[0]):
            best = (n, u)
    return None if best is None else best[1]


def row_major(rngs: list[UOp]) -> UOp:
    """The flat index of a row-major buffer over `rngs` (outermost first)."""
    idx, stride = UOp(Ops.CONST, dtypes.weakint, arg=0), 1
    for r in reversed(rngs):
        idx = r * stride + idx if stride != 1 else r + idx
        stride *= int(r.src[0].arg)
    return idx


def materialize(sink: UOp, v: UOp, slot: int, reduce_last: bool = False) -> tuple[UOp, UOp, Buffer]:
    """(the stage storing v into scratch buffer `slot`, the kernel reading it from there instead, the buffer).
    The buffer is row-major over v's ranges in their order; `reduce_last`: those an enclosing reduction sums over
    innermost (a matmul operand: its K contiguous and its reduce ranges one K, matmul_spec.k_chained)."""
    def key(r: UOp): return (reduce_last and r.arg[-1] in (AxisType.REDUCE, AxisType.GROUP_REDUCE), r.arg[0])
    rngs = sorted(free_ranges(v, {}), key=key)
    n = math.prod(int(r.src[0].arg) for r in rngs)
    dt = v.dtype
    param = UOp(Ops.PARAM, dt, src=(UOp(Ops.CONST, dtypes.weakint, arg=n),), arg=ParamArg(slot, dt))
    # in its own stage v's ranges are all output ranges: the reduce range of an enclosing reduction becomes a loop
    loops = {r: r.replace(arg=(*r.arg[:-1], AxisType.LOOP)) for r in rngs if r.arg[-1] is AxisType.REDUCE}
    own = [loops.get(r, r) for r in rngs]
    store = UOp(Ops.STORE, dtypes.void, src=(UOp(Ops.INDEX, dt, src=(param, row_major(own))), v.substitute(loops)))
    producer = UOp(Ops.SINK, dtypes.void, src=(UOp(Ops.END, dtypes.void, src=(store, *own)) if own else store,),
                   arg=sink.arg)
    consumer = sink.substitute({v: UOp(Ops.INDEX, dt, src=(param, row_major(rngs)))})
    return producer, consumer, Buffer(slot, dtype_name(dt, "scratch buffer"), n * DTYPE_SIZE[dtype_name(dt, "scratch")])


@dataclass
class _Stager:
    families: tuple[Family, ...]     # the one-pass families
    kernel: Kernel
    first_scratch_slot: int          # the kernel's buffer count: scratch buffer j has slot first_scratch_slot + j
    scratch: list[Buffer] = field(default_factory=list)

    def next_slot(self) -> int:
        return self.first_scratch_slot + len(self.scratch)

    def stages(self, sink: UOp) -> list[Plan]:
        if (rule := hoist_rule(sink)) is not None:   # every stage too: a hoist's remainder may hold another
            n_scratch = len(self.scratch)
            try:
                return [p for part in rule(self) for p in self.stages(part)]
            except UnsupportedOp:                    # the stages without it
                del self.scratch[n_scratch:]
        try:
            return [choose(Kernel(sink, self.kernel.name, self.kernel.placer), self.families)]
        except UnsupportedOp:
            parts = self.cut(sink)
            if parts is None: raise
            return [p for part in parts for p in self.stages(part)]

    def cut(self, sink: UOp) -> list[UOp] | None:
        ends = [u for u in sink.src]
        if len(ends) > 1:
            return [sink.replace(src=(e,)) for e in ends]
        if (v := reduction_cut(sink)) is None and (v := load_cut(sink)) is None: return None
        return self.split(sink, v)

    def split(self, sink: UOp, v: UOp, reduce_last: bool = False) -> list[UOp]:
        return self.through_scratch(*materialize(sink, v, self.next_slot(), reduce_last))

    def split_pointwise(self, sink: UOp, v: UOp, index: UOp, extent: int) -> list[UOp]:
        return self.through_scratch(*pointwise_split(sink, v, index, extent, self.next_slot()))

    def through_scratch(self, producer: UOp, consumer: UOp, buf: Buffer) -> list[UOp]:
        self.scratch.append(buf)
        return [producer, consumer]


# A reduction whose value does not depend on some of the kernel's output ranges (every backward pass of test_ops sums
# against a broadcast ones: the gradient of x @ y is a row sum of y, the same for every row of x) is recomputed for
# each of those output elements by a one-pass plan. When that is HOIST_MIN_FACTOR times or more, the reduction is
# computed once per distinct value into scratch and the rest of the kernel reads it back broadcast (two launches,
# a factor fewer reduced elements).
HOIST_MIN_FACTOR = 4


def top_reductions(v: UOp) -> list[UOp]:
    """The REDUCEs under v that are not inside another REDUCE."""
    out, seen, todo = [], set(), [v]
    while todo:
        u = todo.pop()
        if u in seen: continue
        seen.add(u)
        if u.op is Ops.REDUCE: out.append(u)
        elif u.op is not Ops.INDEX: todo.extend(u.src)
    return out


def broadcast_reduction(sink: UOp) -> UOp | None:
    """The reduction of the kernel's one stored value that the most output elements share (at least
    HOIST_MIN_FACTOR of them per distinct value), else None."""
    if len(stored_values(sink)) != 1: return None
    out = output_ranges(sink)
    def size(rngs) -> int: return math.prod(int(r.src[0].arg) for r in rngs)
    memo: dict[UOp, frozenset] = {}
    shared = [(size(out) // size(free_ranges(r, memo) & out), r) for r in top_reductions(stored_values(sink)[0])]
    factor, r = max(shared, key=lambda fr: fr[0], default=(0, None))
    return r if factor >= HOIST_MIN_FACTOR else None


# A long SFPU sequence inside a reduction, applied to loads that all read one index expression, is a function of that
# index alone: the gradient of a max pool divides by each window's count of maxima (RECIPROCAL of a loaded count) once
# per element of the window sum, i.e. kernel-elements / buffer-elements times per distinct count. When that is
# HOIST_MIN_FACTOR times or more, the value is computed once per buffer element into scratch (an elementwise stage)
# and read back through the same index. Outside reductions (softmax's division by its row sums) the one-pass kernel
# stays: there the value is computed once per output element, which a launch of its own would not repay. The ops
# below are those whose SFPU sequences run to tens of instructions (lowering/codegen/sfpu_ops.py); hoisting a
# multiply would cost a launch and a scratch round trip for one instruction.
LONG_OPS = frozenset({Ops.RECIPROCAL, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW, Ops.FDIV})


def pointwise_value(sink: UOp) -> tuple[UOp, UOp, int] | None:
    """(value, the index every load under it reads, the loaded buffers' common extent) of the largest value inside a
    reduction with a LONG_OPS op whose loads all read one index expression and which the kernel computes
    HOIST_MIN_FACTOR times or more per buffer element; None if there is none."""
    memo: dict[UOp, frozenset] = {}
    elements = math.prod(int(r.src[0].arg) for r in sink.toposort() if r.op is Ops.RANGE)
    reduced = {u for r in top_reductions(sink) for u in r.src[0].toposort()}
    best = None
    for u in (u for u in value_nodes(sink) if u in reduced):
        loads = streams(u, memo)
        if not is_value(u) or u.op is Ops.INDEX or not loads: continue
        if any(x.op is not Ops.INDEX or len(x.src) != 2 or x.src[0].op is not Ops.PARAM for x in loads): continue
        if len({x.src[1] for x in loads}) != 1: continue
        inside = u.toposort()
        if not any(x.op in LONG_OPS for x in inside) or any(x.op is Ops.REDUCE for x in inside): continue
        extent = min(int(x.src[0].src[0].arg) for x in loads)   # every index the kernel reads is below it
        if elements < HOIST_MIN_FACTOR * (extent + 1): continue
        if best is None or len(inside) > len(best[0].toposort()): best = (u, next(iter(loads)).src[1], extent)
    return best


def pointwise_split(sink: UOp, v: UOp, index: UOp, extent: int, slot: int) -> tuple[UOp, UOp, Buffer]:
    """(the stage computing v once per buffer element into scratch buffer `slot`, the kernel reading it there through
    `index`, the buffer). A gated index (validity conditions) reads what v is on zeros, the gated loads' value, from
    one more element at the end, computed by the stage from loads gated off there, so the result is v's bit for
    bit."""
    conds, plain = strip_invalid(index)
    n = extent + (1 if conds else 0)
    r = UOp.range(n, 0, AxisType.LOOP)
    own = r.valid(r < extent) if conds else r
    loads = [x for x in v.toposort() if x.op is Ops.INDEX]
    dt = v.dtype
    param = UOp(Ops.PARAM, dt, src=(UOp(Ops.CONST, dtypes.weakint, arg=n),), arg=ParamArg(slot, dt))
    value = v.substitute({x: x.replace(src=(x.src[0], own)) for x in loads})
    store = UOp(Ops.STORE, dtypes.void, src=(UOp(Ops.INDEX, dt, src=(param, r)), value))
    producer = UOp(Ops.SINK, dtypes.void, src=(UOp(Ops.END, dtypes.void, src=(store, r)),), arg=sink.arg)
    read = plain if not conds else UOp(Ops.WHERE, dtypes.weakint, src=(
        functools.reduce(lambda a, b: a & b, conds), plain, UOp(Ops.CONST, dtypes.weakint, arg=extent)))
    consumer = sink.substitute({v: UOp(Ops.INDEX, dt, src=(param, read))})
    return producer, consumer, Buffer(slot, dtype_name(dt, "scratch buffer"), n * DTYPE_SIZE[dtype_name(dt, "scratch")])


# A matmul under an elementwise epilogue (a convolution and its activation, conv2d(w).relu()) is no matmul to the
# matmul matchers, which want the stored value to be the sum itself; the SFPU reduction would then gather both
# factors of every product. The matmul runs in a stage of its own into scratch and the epilogue reads it back. Tried
# before the contraction cut below, which would materialize a gathered (convolution) operand element by element where
# the gathered matmul reads it in place.

def matmul_under_epilogue(sink: UOp) -> UOp | None:
    """The one REDUCE of the kernel's one stored value, when that value is more than the REDUCE (and its casts) and
    the REDUCE stored on its own is a matmul (matmul_match), else None."""
    values = stored_values(sink)
    if len(values) != 1: return None
    v = strip_ops(values[0], Ops.CAST)
    reds = top_reductions(values[0])
    if len(reds) != 1 or reds[0] is v: return None
    slots = [u.arg.slot for u in sink.toposort() if u.op is Ops.PARAM]
    producer, _, _ = materialize(sink, reds[0], max(slots, default=-1) + 1)
    return reds[0] if matmul_of(producer) is not None else None


# A matmul tinygrad fused into a kernel with more around it (attention's scores times a scale, softmax(scores) @ v
# with the softmax computed inside the sum, a masked or padded operand) is not a plain matmul, so no matmul family
# takes the kernel and an SFPU reduction recomputes each operand element once per output element that reads it (sdpa's
# q @ k^T: 1.48M cycles per core). Cut out instead: each side of the product that is not a plain load is computed
# once per operand element (an elementwise stage), the sum of products becomes a matmul stage, and what the kernel
# does with the sum reads it back (an elementwise stage). Taken only when the matmul stage is one the matmul families
# recognise (matmul_match.matmul_of), so a cut never leaves a second SFPU reduction behind.

def summed_products(sink: UOp) -> list[tuple[UOp, UOp]]:
    """(REDUCE(ADD), the product it sums, under casts) for each top reduction of the kernel's one stored value that
    sums a product; none when the kernel stores several values or is a matmul already."""
    if len(stored_values(sink)) != 1 or matmul_of(sink) is not None: return []
    pairs = ((red, strip_ops(red.src[0], Ops.CAST)) for red in top_reductions(stored_values(sink)[0]))
    return [(red, mul) for red, mul in pairs if red.arg[0] is Ops.ADD and mul.op is Ops.MUL]


def contraction(sink: UOp) -> UOp | None:
    """The top REDUCE(ADD) of the kernel's one stored value that sums a product of two sides each depending on
    ranges the other does not (C[.., m, n] = sum_k A[.., m, k] * B[.., k, n]), when the kernel is not a matmul
    already; else None."""
    memo: dict[UOp, frozenset] = {}
    return next((red for red, mul in summed_products(sink) if two_sides(*mul.src, red.src[1:], memo)), None)


# A product of more than two factors (sdpa's gradient with a mask: sum_q dS[q, k] * Q[q, d] * 0.125, the scale inside
# the sum) is a contraction when its factors fall into two sides: the constant joins one of them. The factors are
# regrouped into the two sides whose materialization costs the fewest elements (a side that is one plain load costs
# none), so the scale is applied once per element of the smaller operand. Multiplication is reassociated there
# ((dS * 0.125) * Q for (dS * Q) * 0.125), as the elementwise family's products are; exact for a power-of-two scale.
MAX_FACTORS = 6   # 2^(n-1) - 1 groupings are tried


def product_factors(u: UOp) -> list[UOp]:
    """The factors of a tree of MULs, left to right."""
    return [f for s in u.src for f in product_factors(s)] if u.op is Ops.MUL else [u]


def two_sides(x: UOp, y: UOp, rks: list[UOp], memo: dict[UOp, frozenset]) -> bool:
    """Whether x * y summed over `rks` is a contraction: each side depends on every reduce range and on a range the
    other does not."""
    fx, fy = free_ranges(x, memo), free_ranges(y, memo)
    return set(rks) <= (fx & fy) and bool(fx - fy) and bool(fy - fx)


def regrouped_sides(mul: UOp, rks: list[UOp], memo: dict[UOp, frozenset]) -> tuple[UOp, UOp] | None:
    """The cheapest grouping of mul's factors into two sides of a contraction over `rks` (each side the product of
    its factors in their order), or None."""
    factors = product_factors(mul)
    if not 2 < len(factors) <= MAX_FACTORS: return None
    def product(fs: list[UOp]) -> UOp: return functools.reduce(lambda a, b: UOp(Ops.MUL, mul.dtype, (a, b)), fs)
    def cost(fs: list[UOp]) -> int:
        if len(fs) == 1 and plain_operand(fs[0], rks): return 0
        return math.prod(int(r.src[0].arg) for r in free_ranges(product(fs), memo))
    best = None
    for bits in range(1, 2 ** (len(factors) - 1)):   # factor 0 on side x; bit i - 1 puts factor i on side y
        xs = [f for i, f in enumerate(factors) if i == 0 or not bits >> (i - 1) & 1]
        ys = [f for i, f in enumerate(factors) if i > 0 and bits >> (i - 1) & 1]
        x, y = product(xs), product(ys)
        if two_sides(x, y, rks, memo) and (best is None or cost(xs) + cost(ys) < best[0]):
            best = (cost(xs) + cost(ys), x, y)
    return None if best is None else best[1:]


def regroup_contraction(sink: UOp) -> UOp:
    """The sink with the product its one stored value sums regrouped into the two sides of a contraction (above),
    when the product's own two sides are not; else the sink itself."""
    products, memo = summed_products(sink), {}
    if any(two_sides(*mul.src, red.src[1:], memo) for red, mul in products): return sink    # a contraction as it is
    for red, mul in products:
        if (sides := regrouped_sides(mul, sorted(red.src[1:], key=lambda r: r.arg[0]), memo)) is not None:
            return sink.substitute({mul: mul.replace(src=sides)})
    return sink


def plain_operand(u: UOp, rks: list[UOp]) -> bool:
    """A load (through casts) the matmul reader takes as it is: no validity gate (a pad or mask), an affine index
    walking the reduce ranges `rks` as one K."""
    u = strip_ops(u, Ops.CAST)
    if u.op is not Ops.INDEX or strip_invalid(u.src[1])[0]: return False
    return (co := affine(u.src[1])) is not None and k_chained(co, k_order(rks, co))


def matmul_cut(sink: UOp) -> UOp | None:
    """The next value to materialize toward the kernel's contraction running as a matmul of its own: a side of the
    product that is not a plain load, else the sum itself when the kernel does more with it; None when there is no
    contraction or nothing left to cut."""
    if (red := contraction(sink)) is None: return None
    mul = strip_ops(red.src[0], Ops.CAST)
    rks = sorted(red.src[1:], key=lambda r: r.arg[0])
    side = next((s for s in mul.src if not plain_operand(s, rks)), None)
    if side is not None: return side
    return None if strip_ops(stored_values(sink)[0], Ops.CAST) is red else red


def matmul_stages(sink: UOp) -> bool:
    """Whether cutting the kernel (matmul_cut, repeatedly) leaves a stage the matmul families recognise (a dry run:
    scratch slots are placeholders)."""
    if matmul_cut(sink) is None: return False
    slots = count(len([u for u in sink.toposort() if u.op is Ops.PARAM]))
    while (v := matmul_cut(sink)) is not None:
        producer, sink, _ = materialize(sink, v, next(slots), reduce_last=True)
        if v.op is Ops.REDUCE: return matmul_of(producer) is not None
    return matmul_of(sink) is not None


def hoist_rule(sink: UOp) -> Callable[[_Stager], list[UOp]] | None:
    """The split of the first hoist that applies to the kernel (its pointwise value, its broadcast reduction, its
    matmul under an epilogue, its contraction: above), or None."""
    if (pw := pointwise_value(sink)) is not None:
        return lambda stager: stager.split_pointwise(sink, *pw)
    if (v := broadcast_reduction(sink)) is not None or (v := matmul_under_epilogue(sink)) is not None:
        return lambda stager: stager.split(sink, v)
    if matmul_stages(grouped := regroup_contraction(sink)):
        return lambda stager: stager.split(grouped, matmul_cut(grouped), reduce_last=True)
    return None


def hoisted(kernel: Kernel, families: tuple[Family, ...]) -> StagedPlan | None:
    """The kernel with its pointwise value, broadcast reduction, matmul under an epilogue or contraction (above)
    computed in a stage of its own (and its stages likewise), or None (none applies, or a stage the families do not
    lower)."""
    if hoist_rule(kernel.sink) is None:
        return None
    try:
        return build(kernel, families)
    except UnsupportedOp:
        return None


def build(kernel: Kernel, families: tuple[Family, ...]) -> StagedPlan:
    """The staged plan (hoists first, then the cuts, stage by stage)."""
    params = sorted((u for u in kernel.sink.toposort() if u.op is Ops.PARAM), key=lambda u: u.arg.slot)
    if [p.arg.slot for p in params] != list(range(len(params))):
        raise UnsupportedOp(f"{kernel.name}: buffer slots {[p.arg.slot for p in params]} are not 0..n-1")
    buffers = [Buffer(p.arg.slot, buffer_dtype(p), int(p.src[0].arg) * DTYPE_SIZE[buffer_dtype(p)]) for p in params]
    stager = _Stager(families, kernel, len(params))
    stages = stager.stages(kernel.sink)
    if len(stages) == 1:
        raise UnsupportedOp(f"{kernel.name}: one stage, the one-pass families' own refusal stands")
    for i, s in enumerate(stages): s.name = f"{kernel.name}_s{i}"
    last = stages[-1]
    out = replace(last.output, buf=last.buffers[last.output.buf].slot)
    return StagedPlan(kernel.name, last.ranges, buffers, [], out, ops=[op for s in stages for op in s.ops],
                      stages=stages, scratch=stager.scratch)


def family(one_pass: tuple[Family, ...]) -> Family:
    """The staged family over the given one-pass families (the registry's others)."""
    def candidates(kernel: Kernel, _) -> list[Candidate]:
        return [Candidate("staged", "stages", math.inf, None, True, lambda: build(kernel, one_pass))]
    return Family("staged", lambda kernel: kernel, candidates)
