"""Local STAGE buffers of a kernel replaced by the values they hold.

With PCONTIG=2 tinygrad's scheduler fuses a normalization into one kernel and keeps a value that several
reductions read (a layer norm's x - mean) in a local buffer: INDEX(STAGE(v, *ranges), *idx), v computed over
`ranges` and read back at `idx` [tinygrad 0.14, schedule/rangeify.py: the partial-contiguous branch of its
bufferize removal]. The tile pipeline has no local buffer: the value is recomputed where it is read, i.e. v with
each of the STAGE's ranges replaced by the index read at its position. That is the value the buffer holds there, so
the kernel's result is unchanged (tinygrad removes the same STAGEs without PCONTIG). A STAGE read other than that
(a gated read, indices that do not pair with its ranges) is refused by name.

This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

from tinygrad.uop.ops import Ops, UOp

from tt_backend.chip.errors import UnsupportedOp


def _inline(read: UOp) -> UOp:
    stage = read.src[0]
    ranges, idx = stage.src[1:], read.src[1:]
    if len(ranges) != len(idx) or any(r.op not in (Ops.RANGE, Ops.CONST) for r in ranges):
        raise UnsupportedOp(f"a read of a local STAGE buffer over {len(ranges)} ranges at {len(idx)} indices")
    return stage.src[0].substitute({r: i for r, i in zip(ranges, idx) if r.op is Ops.RANGE})


def inline_stages(sink: UOp) -> UOp:
    """The kernel with every read of a local STAGE buffer replaced by the staged value at the read's index, innermost
    first (a staged value may read another STAGE)."""
    while (reads := [u for u in sink.toposort() if u.op is Ops.INDEX and u.src[0].op is Ops.STAGE]):
        inner = next(u for u in reads if not any(x.op is Ops.STAGE for x in u.src[0].src[0].toposort()))
        sink = sink.substitute({inner: _inline(inner)})
    return sink
