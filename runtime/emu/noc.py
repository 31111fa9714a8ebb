"""The NoC of one emulated chip: each tile's NoC interface units (NIU: registers, counters, synchronous transfers) and
`Fabric`, the time model of both NoCs' links and of the DRAM banks.

Spec: docs/launch_noc.md §5. Like ttsim, a request completes inside the `NOC_CMD_CTRL = 1` store (data copied,
counters bumped), so `NOC_CMD_CTRL` always reads 0; the time it would have taken is `Fabric.transfer`'s answer: the
tile's response counters show the request from that cycle on (tile.py `_niu_load`), so a core that polls them waits
for it, and several requests can be in flight. ttsim's fatal cases raise the matching EmuError category with
the reason. An NIU reaches its own tile, every other Tensix tile of the chip (L1 and MMIO, unicast reads, writes and
atomics) and the eight DRAM banks behind the 24 translated DRAM coordinates (`chip/grid.py`); multicast writes reach
the Tensix tiles of a rectangle (docs/launch_noc.md §5.6: RET_HI = end_x | end_y << 6 | start_x << 12 | start_y << 18,
start <= end on NoC0 and swapped on NoC1, non-Tensix columns and rows inside skipped, the sender excluded unless
BRCST_SRC_INCLUDE, one ack per receiver).

The time model (docs/performance.md §8): a transfer moves its data as one packet of ceil(bytes / 64) flits along the
route (chip/grid.py `route`: NoC0 X first, NoC1 Y first, torus) from the source NIU to the destination NIU; every
link it crosses, the two NIU ports and, for DRAM, the bank (47 bytes per cycle) are busy for the packet's length,
staggered by the hop latency. The packet starts at the earliest cycle at which all of them are free (a gap search
over each resource's busy intervals, so the order in which the host emulates the tiles does not decide who goes
first, only who reserved first among overlapping requests). Uncontended, a transfer takes `cycles.noc_cycles` over
the request's and the data's hops. Not modelled: virtual channels and flit-level arbitration (a packet holds each
link for its whole length), the request and acknowledgement packets' own occupancy (latency only), NIU outstanding-
request limits, DRAM page effects.
"""
from __future__ import annotations

import bisect
from typing import Callable, Protocol

import numpy as np

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented, EmuUnspecified
from tt_backend.chip.grid import Grid, dram_bank, is_dram_xy, route

from .cycles import DRAM_LATENCY, NOC_BYTES_PER_CYCLE, NOC_HOP_LATENCY, NOC_NIU_LATENCY, noc_cycles
from .dram import PAGE_BITS, Dram
from .accel import noc_native

MAX_LEN = 16384
N_INITIATORS = 4
INITIATOR_STRIDE = 0x800
WINDOW_SIZE = N_INITIATORS * INITIATOR_STRIDE

# initiator registers (offset inside a 0x800 window); those below PLAIN_END hold what is written (Niu.store's checks
# aside) until a send reads them
PLAIN_END = 0x30
N_PLAIN_REGISTERS = PLAIN_END >> 2
(TARG_LO, TARG_MID, TARG_HI, RET_LO, RET_MID, RET_HI, PACKET_TAG, CTRL, AT_LEN_BE, AT_LEN_BE_1, AT_DATA,
 BRCST_EXCLUDE) = range(0x00, PLAIN_END, 4)
CMD_CTRL = 0x40
NODE_ID = 0x44
ENDPOINT_ID = 0x48
CLEAR_OUTSTANDING = 0x60
NIU_CFG_0 = 0x100
ROUTER_CFG_1 = 0x108
ROUTER_CFG_3 = 0x110
ID_LOGICAL = 0x148
COUNTER_BASE = 0x200

# counter indices (offset 0x200 + 4*i) that ttsim models
ATOMIC_RESP_RECEIVED = 0
WR_ACK_RECEIVED = 1
RD_RESP_RECEIVED = 2
POSTED_ATOMIC_SENT = 7
NONPOSTED_WR_REQ_SENT = 10
POSTED_WR_REQ_SENT = 11
REQS_OUTSTANDING_ID = 16        # + trid, 8 bits
WRITE_REQS_OUTGOING_ID = 32     # + trid, always 0 in ttsim
COUNTER_NAMES = {ATOMIC_RESP_RECEIVED: "ATOMIC_RESP_RECEIVED", WR_ACK_RECEIVED: "WR_ACK_RECEIVED",
                 RD_RESP_RECEIVED: "RD_RESP_RECEIVED", POSTED_ATOMIC_SENT: "POSTED_ATOMIC_SENT",
                 NONPOSTED_WR_REQ_SENT: "NONPOSTED_WR_REQ_SENT", POSTED_WR_REQ_SENT: "POSTED_WR_REQ_SENT"}

# NOC_CTRL fields
CTRL_TYPE = 0x3                 # 0 read, 1 atomic, 2 write
CTRL_WR_INLINE = 1 << 3
CTRL_RESP_MARKED = 1 << 4
CTRL_BRCST = 1 << 5
CTRL_BRCST_SRC_INCLUDE = 1 << 17
CTRL_PATH_RESERVE = 1 << 8
# WR_BE, MEM_RD_DROP_ACK, bits 10-12, BRCST_XY, bits 18-26, ARB_PRIORITY, L1_ACC_AT_EN: fatal in ttsim
CTRL_FATAL = (1 << 2) | (1 << 9) | (0x7 << 10) | (1 << 16) | (0x1FF << 18) | (0xF << 27) | (1 << 31)

ATOMIC_INCR_LEN_BE = 0x107C     # increment, 32-bit, offset 0: the only atomic ttsim accepts
MMIO_START = 0xFF000000         # own-tile addresses from here up are registers (4-byte transfers only)


def xy_word(x: int, y: int) -> int:
    return x | (y << 6)


class NocTarget(Protocol):
    """What an NIU reaches at a Tensix tile: its L1 and its registers (4-byte NoC transfers to MMIO)."""
    l1_array: np.ndarray

    def noc_mmio_read32(self, addr: int) -> int: ...
    def noc_mmio_write32(self, addr: int, value: int) -> None: ...


class Niu:
    """NIU of NoC `index` (0 or 1) of the tile `own_tile` at translated `tile_xy`. `peer(x, y)` is the chip's
    answer for another coordinate: the Dram bank or NocTarget there, or None when nothing the chip emulates is there.
    Every completed transfer is appended to `sent` as (kind, peer (x, y), bytes, DRAM bank or None, the L1 address
    written at a peer tile or None) (a multicast: ("multicast", the receivers, bytes, None, address)) for the tile's
    time model."""

    def __init__(self, index: int, own_tile: NocTarget, peer: Callable[[int, int], Dram | NocTarget | None],
                 tile_xy: tuple[int, int] = layout.TILE_XY):
        self.index = index
        self.base = layout.NOC_BASE[index]
        self.tile = own_tile
        self.l1 = own_tile.l1_array
        self.peer = peer
        self.tile_xy = tuple(tile_xy)
        x, y = tile_xy
        self.own = xy_word(x, y)
        self.sent: list[tuple[str, tuple[int, int], int, int | None, int | None]] = []
        # NOC_NODE_ID holds this NoC's raw coordinates (NoC1 runs mirrored), grid size 17x12, bit 28 on NoC0
        rx, ry = (x, y) if index == 0 else (16 - x, 11 - y)
        self.node_id = rx | (ry << 6) | (17 << 12) | (12 << 19) | ((1 << 28) if index == 0 else 0)
        # offsets 0x00..0x2C per initiator, as uint32 words: the RISC-V cores' C part (accel/rv32_native.c) stores
        # the plain ones here itself, without a hand-back per register
        self.regs = np.zeros((N_INITIATORS, N_PLAIN_REGISTERS), np.uint32)
        self.counters: dict[int, int] = {}                     # kept across launches, like the hardware
        self.requests = {"read": 0, "write": 0, "atomic": 0, "inline": 0}
        self.bytes = {"read": 0, "write": 0}
        # the endpoints _endpoint resolved, by coordinate word, as the C send reads them (noc_native.c endpoint_of):
        # (x, y), the tile's L1 or None, the DRAM bank's pages or None, the bytes addressable there, the bank or None
        self._c_peers: dict[int, tuple] = {self.own: (self.tile_xy, self.l1, None, layout.L1_SIZE, None)}
        self._c_context = (self.regs, self.own, self._c_peers, self.counters, self.requests, self.bytes, self.sent,
                           PAGE_BITS)

    # ---- register access (offset = addr - base, 32-bit only: the tile checks size) ----
    def load(self, offset: int) -> int:
        buf, off = divmod(offset, INITIATOR_STRIDE)
        if buf >= N_INITIATORS:
            raise EmuUndefined(f"NoC{self.index}: no register at offset 0x{offset:X}")
        if off < PLAIN_END and off != AT_LEN_BE_1:
            return int(self.regs[buf, off >> 2])
        if off == CMD_CTRL:
            return 0                                      # requests complete inside the send
        if off == NODE_ID:
            return self.node_id
        if off == ID_LOGICAL:
            return self.own
        if off == NIU_CFG_0:
            return 0                                      # ttsim reads 0 although it always translates
        if off == ROUTER_CFG_1:
            return 0x301                                  # broadcast opt-out columns 0, 8, 9
        if off == ROUTER_CFG_3:
            return 0x003                                  # rows 0, 1
        if COUNTER_BASE <= off < COUNTER_BASE + 0x100 and off % 4 == 0:
            i = (off - COUNTER_BASE) >> 2
            if i in COUNTER_NAMES:
                return self.counters.get(i, 0)
            if REQS_OUTSTANDING_ID <= i < REQS_OUTSTANDING_ID + 16:
                return self.counters.get(i, 0) & 0xFF
            if WRITE_REQS_OUTGOING_ID <= i < WRITE_REQS_OUTGOING_ID + 16:
                return 0
        raise EmuUnimplemented(f"NoC{self.index}: reading offset 0x{off:X} of initiator {buf} is not modelled "
                               f"(ttsim: noc_regs_rd32 fatal)")

    def store(self, offset: int, value: int) -> None:
        buf, off = divmod(offset, INITIATOR_STRIDE)
        if buf >= N_INITIATORS:
            raise EmuUndefined(f"NoC{self.index}: no register at offset 0x{offset:X}")
        if off == AT_LEN_BE_1:
            raise EmuUnspecified(f"NoC{self.index}: NOC_AT_LEN_BE_1 write is fatal in ttsim")
        if off == PACKET_TAG and value & ~0x3C00:
            raise EmuUnspecified(f"NoC{self.index}: NOC_PACKET_TAG=0x{value:X}: only the trid bits 13:10 are accepted")
        if off == BRCST_EXCLUDE and value != 0:
            raise EmuUnspecified(f"NoC{self.index}: NOC_BRCST_EXCLUDE=0x{value:X}: only 0 is accepted")
        if off < PLAIN_END:
            self.regs[buf, off >> 2] = value
        elif off == CMD_CTRL:
            if value != 1:
                raise EmuUnspecified(f"NoC{self.index}: NOC_CMD_CTRL=0x{value:X}: only 1 (send) may be written")
            self._send(buf)
        elif off == CLEAR_OUTSTANDING:
            if value != 0xFFFF:
                raise EmuUnspecified(f"NoC{self.index}: noc_clear_outstanding_req_cnt=0x{value:X} (ttsim accepts only "
                                     f"0xFFFF)")
            for t in range(16):
                self.counters.pop(REQS_OUTSTANDING_ID + t, None)
        else:
            raise EmuUnimplemented(f"NoC{self.index}: writing offset 0x{off:X} of initiator {buf} is not modelled")

    # ---- transfers ----
    def _bump(self, counter: int) -> None:
        self.counters[counter] = (self.counters.get(counter, 0) + 1) & 0xFFFFFFFF

    def _endpoint(self, hi: int, role: str) -> tuple[tuple[int, int], Dram | NocTarget]:
        """The translated coordinates and the endpoint (a DRAM bank or a Tensix tile) of unicast coordinate word
        `hi` (remembered for the C send: a chip's tiles and banks keep their L1 arrays and page tables for its life;
        Chip.adopt registers each tile once, when it is built)."""
        if hi >> 12:
            raise EmuUndefined(f"NoC{self.index}: {role} coordinate word 0x{hi:X} has bits above 11 set on a unicast")
        x, y = hi & 0x3F, (hi >> 6) & 0x3F
        ep = self.tile if hi == self.own else self.peer(x, y)
        if ep is not None:
            if hi not in self._c_peers:
                self._c_peers[hi] = ((x, y), None, ep.pages, ep.size, dram_bank(x, y)) if isinstance(ep, Dram) else \
                    ((x, y), ep.l1_array, None, layout.L1_SIZE, None)
            return (x, y), ep
        if x in (0, 9):
            raise EmuUnimplemented(f"NoC{self.index}: {role} ({x},{y}) is a physical DRAM coordinate; use the "
                                   f"translated ones (17/18, 12..23)")
        raise EmuUnimplemented(f"NoC{self.index}: {role} coordinate ({x},{y}) is not a DRAM endpoint or a usable "
                               f"Tensix tile of this chip")

    def _check_tile_range(self, addr: int, n: int, role: str) -> None:
        if addr >= MMIO_START and addr >> 32 == 0:
            if n != 4 or addr % 4:
                raise EmuUndefined(f"NoC{self.index}: {role} 0x{addr:X} is MMIO: transfers there must be exactly 4 "
                                   f"aligned bytes (len={n})")
        elif addr + n > layout.L1_SIZE:
            raise EmuUndefined(f"NoC{self.index}: {role} L1 range 0x{addr:X}+{n} is beyond L1 (0x{layout.L1_SIZE:X})")

    def _get(self, ep: Dram | NocTarget, addr: int, n: int, role: str) -> np.ndarray:
        if isinstance(ep, Dram):
            return ep.read(addr, n)
        self._check_tile_range(addr, n, role)
        if addr >= MMIO_START:
            return np.array([ep.noc_mmio_read32(addr)], np.uint32).view(np.uint8)
        return ep.l1_array[addr:addr + n].copy()

    def _put(self, ep: Dram | NocTarget, addr: int, data: np.ndarray, role: str) -> None:
        if isinstance(ep, Dram):
            ep.write(addr, data)
            return
        n = data.size
        self._check_tile_range(addr, n, role)
        if addr >= MMIO_START:
            ep.noc_mmio_write32(addr, int(data.view(np.uint32)[0]))
        else:
            ep.l1_array[addr:addr + n] = data

    def _record(self, kind: str, xy: tuple[int, int], ep, n: int, dst: int | None = None) -> None:
        """`dst`: the L1 address written at a peer tile (writes, atomics), None otherwise."""
        self.sent.append((kind, xy, n, dram_bank(*xy) if isinstance(ep, Dram) else None,
                          None if isinstance(ep, Dram) else dst))

    def _send(self, buf: int) -> None:
        """The command of initiator `buf`: in C where it is a unicast read or write between L1 and a DRAM bank or L1
        the NIU has met (noc_native.send; NIU_SEND_NATIVE), else _send_in_python, the reference."""
        fast = noc_native.send()
        if fast is None or fast(self._c_context, buf) is NotImplemented:
            self._send_in_python(buf)

    def _send_in_python(self, buf: int) -> None:
        r = self.regs[buf].tolist()
        ctrl = r[CTRL >> 2]
        name = f"NoC{self.index} initiator {buf} (NOC_CTRL=0x{ctrl:X})"
        if ctrl & CTRL_FATAL:
            raise EmuUnimplemented(f"{name}: fatal NOC_CTRL bits 0x{ctrl & CTRL_FATAL:X} "
                                   f"(WR_BE/ARB_PRIORITY/L1_ACC_AT_EN/...)")
        if ctrl & CTRL_BRCST:
            self._multicast(name, ctrl, r)
            return
        if ctrl & CTRL_PATH_RESERVE:
            raise EmuUndefined(f"{name}: unicast must not use path reserve")
        kind = ctrl & CTRL_TYPE
        targ = (r[TARG_MID >> 2] << 32) | r[TARG_LO >> 2]
        ret = (r[RET_MID >> 2] << 32) | r[RET_LO >> 2]
        targ_hi, ret_hi, length = r[TARG_HI >> 2], r[RET_HI >> 2], r[AT_LEN_BE >> 2]
        if kind == 1:
            self._atomic(name, ctrl, targ, targ_hi, ret, ret_hi, length, r[AT_DATA >> 2])
            return
        if kind == 2 and ctrl & CTRL_WR_INLINE:
            self._inline(name, ctrl, targ, targ_hi, ret_hi, length, r[AT_DATA >> 2])
            return
        if kind == 3:
            raise EmuUndefined(f"{name}: request type 3 does not exist")
        if ctrl & CTRL_WR_INLINE:
            raise EmuUndefined(f"{name}: WR_INLINE on a read")
        if not 1 <= length <= MAX_LEN:
            raise EmuUndefined(f"{name}: noc_at_len_be={length}: length must be 1..{MAX_LEN} (split in software)")
        if kind == 0:
            if not ctrl & CTRL_RESP_MARKED:
                raise EmuUnspecified(f"{name}: read should not be posted (set RESP_MARKED, NOC_CTRL=0x10)")
            if ret_hi != self.own:
                raise EmuUndefined(f"{name}: read: dst_tile_id=0x{ret_hi:X}: RET_HI must be this tile (0x{self.own:X}, "
                                   f"from NOC_ID_LOGICAL)")
            (peer, src_ep), src, dst_ep, dst = self._endpoint(targ_hi, "read source"), targ, self.tile, ret
        else:
            if targ_hi != self.own:
                raise EmuUndefined(f"{name}: write: TARG_HI=0x{targ_hi:X} must be this tile (0x{self.own:X}); the "
                                   f"source is the initiator's own L1")
            src_ep, src, (peer, dst_ep), dst = self.tile, targ, self._endpoint(ret_hi, "write destination"), ret
        modulus = 64 if (kind == 0 and isinstance(src_ep, Dram)) else 16
        if (src - dst) % modulus:
            raise EmuUndefined(f"{name}: alignment of src_addr=0x{src:X} does not match dst_addr=0x{dst:X} "
                               f"(must be congruent mod {modulus})")
        data = self._get(src_ep, src, length, "source")
        self._put(dst_ep, dst, data, "destination")
        self._record("read" if kind == 0 else "write", peer, src_ep if kind == 0 else dst_ep, length,
                     None if kind == 0 or dst >= MMIO_START else dst)
        if kind == 0:
            self.requests["read"] += 1
            self.bytes["read"] += length
            self._bump(RD_RESP_RECEIVED)
        else:
            self.requests["write"] += 1
            self.bytes["write"] += length
            if ctrl & CTRL_RESP_MARKED:
                self._bump(NONPOSTED_WR_REQ_SENT)
                self._bump(WR_ACK_RECEIVED)
            else:
                self._bump(POSTED_WR_REQ_SENT)

    def _multicast(self, name: str, ctrl: int, r: list[int]) -> None:
        """A multicast write of this tile's L1 [TARG_LO, + len) to RET_LO of every receiver of the rectangle."""
        if ctrl & CTRL_TYPE != 2 or ctrl & CTRL_WR_INLINE:
            raise EmuUnimplemented(f"{name}: only multicast writes are modelled")
        if not ctrl & CTRL_PATH_RESERVE:
            raise EmuUndefined(f"{name}: multicast must use path reserve")
        src, dst, length, hi = r[TARG_LO >> 2], r[RET_LO >> 2], r[AT_LEN_BE >> 2], r[RET_HI >> 2]
        if r[TARG_MID >> 2] or r[RET_MID >> 2] or r[TARG_HI >> 2] != self.own:
            raise EmuUndefined(f"{name}: multicast: the source must be this tile's L1 (TARG_HI=0x{r[TARG_HI >> 2]:X}), "
                               f"the destination an L1 address")
        if not 1 <= length <= MAX_LEN:
            raise EmuUndefined(f"{name}: noc_at_len_be={length}: length must be 1..{MAX_LEN} (split in software)")
        if (src - dst) % 16:
            raise EmuUndefined(f"{name}: alignment of src_addr=0x{src:X} does not match dst_addr=0x{dst:X} "
                               f"(must be congruent mod 16)")
        if hi >> 24:
            raise EmuUndefined(f"{name}: multicast coordinate word 0x{hi:X} has bits above 23 set")
        ex, ey, sx, sy = hi & 0x3F, (hi >> 6) & 0x3F, (hi >> 12) & 0x3F, (hi >> 18) & 0x3F
        (x0, x1), (y0, y1) = ((sx, ex), (sy, ey)) if self.index == 0 else ((ex, sx), (ey, sy))
        if x0 > x1 or y0 > y1:
            raise EmuUnspecified(f"{name}: dst_start_x={sx} dst_end_x={ex} dst_start_y={sy} dst_end_y={ey}: NoC"
                                 f"{self.index} wants start {'<=' if self.index == 0 else '>='} end (no wrap-around)")
        ends = [self.peer(x, y) for x, y in ((x0, y0), (x1, y1))]
        if any(ep is None or isinstance(ep, Dram) for ep in ends):
            raise EmuUndefined(f"{name}: multicast rectangle ({x0},{y0})..({x1},{y1}): a corner is not a usable "
                               f"Tensix tile")
        self._check_tile_range(src, length, "source")
        include = bool(ctrl & CTRL_BRCST_SRC_INCLUDE)
        receivers = [(x, y) for y in range(y0, y1 + 1) for x in range(x0, x1 + 1)
                     if (include or (x, y) != self.tile_xy) and self.peer(x, y) is not None
                     and not isinstance(self.peer(x, y), Dram)]
        data = self.tile.l1_array[src:src + length].copy()
        for xy in receivers:
            self._put(self.peer(*xy), dst, data, "destination")
        self.sent.append(("multicast", tuple(receivers), length, None, dst))
        self.requests["write"] += 1
        self.bytes["write"] += length
        if ctrl & CTRL_RESP_MARKED:
            self._bump(NONPOSTED_WR_REQ_SENT)
            for _ in receivers:
                self._bump(WR_ACK_RECEIVED)
        else:
            self._bump(POSTED_WR_REQ_SENT)

    def _atomic(self, name, ctrl, targ, targ_hi, ret, ret_hi, len_be, incr) -> None:
        if len_be != ATOMIC_INCR_LEN_BE:
            raise EmuUnimplemented(f"{name}: atomic: noc_at_len_be=0x{len_be:X} (only 0x107C, 32-bit increment, is "
                                   f"modelled)")
        peer, ep = self._endpoint(targ_hi, "atomic target")
        if isinstance(ep, Dram):
            raise EmuUndefined(f"{name}: atomic: src_tile_type=D: atomics on DRAM are not allowed")
        if ret_hi != self.own:
            raise EmuUndefined(f"{name}: atomic: RET_HI=0x{ret_hi:X} must be this tile (0x{self.own:X})")
        if targ % 16 or targ + 4 > layout.L1_SIZE:
            raise EmuUndefined(f"{name}: atomic target 0x{targ:X} must be a 16-byte aligned L1 word")
        if ret % 4 or ret + 4 > layout.L1_SIZE:
            raise EmuUndefined(f"{name}: atomic return address 0x{ret:X} must be an aligned L1 word")
        target = ep.l1_array.view(np.uint32)
        old = int(target[targ >> 2])
        target[targ >> 2] = (old + incr) & 0xFFFFFFFF
        self.l1.view(np.uint32)[ret >> 2] = old
        self._record("atomic", peer, ep, 4, targ)
        self.requests["atomic"] += 1
        self._bump(ATOMIC_RESP_RECEIVED if ctrl & CTRL_RESP_MARKED else POSTED_ATOMIC_SENT)

    def _inline(self, name, ctrl, targ, targ_hi, ret_hi, len_be, value) -> None:
        if ret_hi != self.own:
            raise EmuUndefined(f"{name}: inline write: dst_tile_type=D: RET_HI=0x{ret_hi:X} must be this tile")
        peer, ep = self._endpoint(targ_hi, "inline write destination")
        if isinstance(ep, Dram):
            raise EmuUnimplemented(f"{name}: inline write to DRAM is not modelled")
        if targ < MMIO_START or targ >> 32:
            raise EmuUnspecified(f"{name}: inline write to an L1 address (0x{targ:X}) is unsafe on Blackhole")
        if len_be != 0xF or targ % 4:
            raise EmuUndefined(f"{name}: inline write needs NOC_AT_LEN_BE=0xF and an aligned word (got 0x{len_be:X}, "
                               f"0x{targ:X})")
        ep.noc_mmio_write32(targ, value)
        self._record("write", peer, ep, 4)
        self.requests["inline"] += 1
        self._bump(NONPOSTED_WR_REQ_SENT if ctrl & CTRL_RESP_MARKED else POSTED_WR_REQ_SENT)
        if ctrl & CTRL_RESP_MARKED:
            self._bump(WR_ACK_RECEIVED)

    def stats(self) -> dict:
        return {"requests": dict(self.requests), "bytes": dict(self.bytes),
                "counters": {COUNTER_NAMES.get(k, f"REQS_OUTSTANDING_ID{k - 16}"): v for k, v in self.counters.items()}}


# ================================================================================================== time model
# docs/performance.md §3: 512 GB/s over 8 banks at 1.35 GHz is about 47 bytes per cycle per bank [derived]
DRAM_BANK_BYTES_PER_CYCLE = 47
# Fabric.transfer keeps each route's resources, lead and hop count, where it would derive them again per transfer (a
# third of its time). Tests turn it off (the reference path).
ROUTE_CACHE = True
# Fabric.forget_before drops the busy intervals no later transfer can meet (Tile calls it when it releases a core while
# every core of the chip is in reset: a launch's start). Without it they were never dropped (1,280 on one link after five
# warm launches), and a reservation between them shifts the lists. Tests turn it off (the reference path).
FORGET_PAST = True


class Busy:
    """The busy intervals of one resource (a link, an NIU port, a DRAM bank): sorted, disjoint, merged when they
    touch."""
    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []

    def free_from(self, t: int, d: int) -> int:
        """The earliest s >= t such that [s, s + d) is free."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, t)
        while i < len(starts) and starts[i] < t + d:
            t = ends[i]
            i += 1
        return t

    def forget_before(self, t: int) -> None:
        """Drop the intervals that end before cycle t (those touching t stay: a packet right behind one extends it)."""
        i = bisect.bisect_left(self.ends, t)
        del self.starts[:i], self.ends[:i]

    def take(self, s: int, d: int) -> None:
        e = s + d
        ends = self.ends
        # the usual cases: after every interval, or right after the last one (a packet behind the previous one)
        if not ends or ends[-1] < s:
            self.starts.append(s)
            ends.append(e)
            return
        if ends[-1] == s:
            ends[-1] = e
            return
        i = j = bisect.bisect_left(ends, s)
        while j < len(self.starts) and self.starts[j] <= e:
            s, e = min(s, self.starts[j]), max(e, self.ends[j])
            j += 1
        self.starts[i:j] = [s]
        self.ends[i:j] = [e]


class Fabric:
    """Occupancy of one chip's NoC links, NIU ports and DRAM banks (the module doc)."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.busy: dict[tuple, Busy] = {}
        # (noc, kind, initiator, peer, bank) -> transfer()'s resources with their offsets, its lead and its hop count:
        # what depends only on the route (ROUTE_CACHE)
        self._paths: dict[tuple, tuple[list, int, int]] = {}
        self.transfers = 0
        self.wait_cycles = 0        # cycles transfers started later than they could have, uncontended

    def _res(self, key: tuple) -> Busy:
        b = self.busy.get(key)
        if b is None:
            b = self.busy[key] = (noc_native.busy_class() or Busy)()
        return b

    def transfer(self, noc: int, kind: str, initiator: tuple[int, int], peer: tuple[int, int], nbytes: int, t: int,
                 bank: int | None) -> int:
        """The cycle a transfer issued at cycle `t` by the tile at `initiator` completes (a read's data has landed,
        a write's acknowledgement is back). kind: read (data peer -> initiator), write or atomic (initiator -> peer);
        bank: the DRAM bank at `peer`, if it is one."""
        key = (noc, kind, initiator, peer, bank)
        path = self._paths.get(key) if ROUTE_CACHE else None
        if path is None:
            path = self._path(*key)
            if ROUTE_CACHE:       # (noc_native.c issue times only the routes cached here)
                self._paths[key] = path
        res, lead, hops = path
        flits = -(-nbytes // NOC_BYTES_PER_CYCLE)
        d = max(flits, -(-nbytes // DRAM_BANK_BYTES_PER_CYCLE)) if bank is not None else flits
        s = self._reserve(res, t + lead, d)
        return s + noc_cycles(nbytes, hops, bank is not None) - lead + (d - flits)

    def _path(self, noc: int, kind: str, initiator: tuple[int, int], peer: tuple[int, int],
              bank: int | None) -> tuple[list, int, int]:
        """transfer()'s resources (busy, offset from the packet's start), the cycles before the data leaves (lead) and
        the hops of the request and the data together."""
        grid = self.grid
        a, b = grid.physical(*initiator), grid.physical(*peer)
        src, dst = (b, a) if kind == "read" else (a, b)
        data = route(noc, src, dst)
        back = len(route(noc, dst, src))                 # the request (read) or the acknowledgement (write)
        # read: the request travels to the peer (and DRAM answers) before the data leaves; write: the data leaves at
        # once and the acknowledgement follows it back
        dram = DRAM_LATENCY if bank is not None else 0
        lead = NOC_HOP_LATENCY * back + dram if kind == "read" else 0
        res = [(self._res(("port", noc) + src), 0)]
        res += [(self._res(link), NOC_NIU_LATENCY + k * NOC_HOP_LATENCY) for k, link in enumerate(data)]
        res.append((self._res(("port", noc) + dst), NOC_NIU_LATENCY + len(data) * NOC_HOP_LATENCY))
        if bank is not None:
            res.append((self._res(("bank", bank)), 0 if kind == "read" else NOC_NIU_LATENCY
                        + len(data) * NOC_HOP_LATENCY))
        return res, lead, len(data) + back

    def _reserve(self, res: list, s0: int, d: int) -> int:
        """The first cycle from s0 at which every resource of `res` (busy, offset) is free for `d` cycles from its
        offset on; takes them there and counts the transfer and its wait. The resources are visited round and round
        until all of them in a row accept s (each move only takes s up to that first cycle, whatever the order); one
        busy with nothing from s + off on accepts without a search."""
        fast = noc_native.reserve()
        s = fast(res, s0, d) if fast is not None else self._reserve_in_python(res, s0, d)
        self.transfers += 1
        self.wait_cycles += s - s0
        return s

    @staticmethod
    def _reserve_in_python(res: list, s0: int, d: int) -> int:
        """_reserve's cycle, the resources taken there (the reference of accel/noc_native.c)."""
        s, n, i, in_a_row = s0, len(res), 0, 0
        while in_a_row < n:
            busy, off = res[i]
            ends = busy.ends
            if ends and ends[-1] > s + off and (f := busy.free_from(s + off, d) - off) > s:
                s, in_a_row = f, 0
            in_a_row += 1
            i = i + 1 if i + 1 < n else 0
        for busy, off in res:
            busy.take(s + off, d)
        return s

    def multicast(self, noc: int, initiator: tuple[int, int], receivers: tuple[tuple[int, int], ...], nbytes: int,
                  t: int) -> int:
        """The cycle a multicast write issued at cycle `t` is acknowledged by every receiver: one packet along the
        tree of the routes to the receivers (each link once, at its first hop count), every receiver's NIU port,
        all free at once; the farthest receiver's data and acknowledgement set the latency."""
        grid = self.grid
        a = grid.physical(*initiator)
        flits = -(-nbytes // NOC_BYTES_PER_CYCLE)
        links: dict[tuple, int] = {}
        far = 0
        res = [(self._res(("port", noc) + a), 0)]
        for xy in receivers:
            b = grid.physical(*xy)
            data = route(noc, a, b)
            for k, link in enumerate(data):
                links[link] = min(links.get(link, k), k)
            res.append((self._res(("port", noc) + b), NOC_NIU_LATENCY + len(data) * NOC_HOP_LATENCY))
            far = max(far, len(data) + len(route(noc, b, a)))
        res += [(self._res(link), NOC_NIU_LATENCY + k * NOC_HOP_LATENCY) for link, k in links.items()]
        s = self._reserve(res, t, flits)
        return s + noc_cycles(nbytes, far, False)

    def forget_before(self, t: int) -> None:
        """No transfer will start before cycle t (every core of the chip starts at t or later): the busy intervals
        that end before it can no longer delay one (Busy.free_from skips them, take appends after them)."""
        if FORGET_PAST:
            for b in self.busy.values():
                b.forget_before(t)

    def stats(self) -> dict:
        return {"transfers": self.transfers, "wait_cycles": self.wait_cycles}
