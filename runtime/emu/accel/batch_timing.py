"""The cycle model across a batch's repetitions, in closed form (the speed layer's timing path). A batched SFPU body
(mop_batch.py) must leave the cycle model exactly as issuing its instructions one by one would; these functions let
it skip the walk where that is provable: `periodic` / `skip` once the issue state repeats shifted by a constant each
repetition, `key` / `memo` / `replay` for a body entered again from the same state relative to its first possible
issue cycle. `tm` is the Tensix's cycles.TensixTiming, `st` its SfpuTiming."""
from __future__ import annotations

from tt_backend.runtime.emu.cycles import FPU_TO_SFPLOAD_GAP


def key(tm, t: int, st):
    """The SFPU issue state of thread t relative to B = max(clock + 1, frontend time), the earliest cycle its next
    instruction can issue, when nothing absolute can matter any more (the Wait Gate release and FPU Dst writes not
    after B / B - 4, a first issue recorded, nop_only_cycle <= B and mad_cycle <= B - 1 so that any value the body
    sets differs from them): the key under which a batch's timing is memoised (memo), else None. The
    relevant state is B - clock (stall counting), nop_only_cycle if it can still equal an issue cycle and
    (mad_cycle, mad_writes, mad_macro) if mad_cycle + 1 can (SfpuTiming.regular)."""
    c0 = tm.clock[t]
    b = tm.fe[t]
    if b <= c0:
        b = c0 + 1
    if tm.first[t] is None or tm.gate[t][1] > b:
        return None
    w = tm.dst_fpu_write
    if w and max(w.values()) > b - FPU_TO_SFPLOAD_GAP:
        return None
    nop, mad = st.nop_only_cycle, st.mad_cycle
    if nop > b or mad > b - 1:
        return None
    return (b - c0, nop == b, (st.mad_writes, st.mad_macro) if mad == b - 1 else None)


def base(tm, t: int) -> int:
    """B of key."""
    c0, fe = tm.clock[t], tm.fe[t]
    return fe if fe > c0 else c0 + 1


def memo(tm, t: int, st, entry: tuple):
    """What one batch did to the cycle model, relative to its entry base B (entry = B, nop_only_cycle, mad_cycle,
    busy_until, stalls, issued before it, the timeline recorder's marks), or None when busy_until did not move (its
    new value then depends on the absolute old one)."""
    b, nop0, mad0, busy0, stalls0, issued0, marks = entry
    if st.busy_until == busy0:
        return None
    return (tm.clock[t] - b, None if st.nop_only_cycle == nop0 else st.nop_only_cycle - b,
            None if st.mad_cycle == mad0 else (st.mad_cycle - b, st.mad_writes, st.mad_macro),
            st.busy_until - b, tm.stalls[t] - stalls0, tm.issued[t] - issued0,
            tm.rec.since(t, marks[0], b, marks[1], busy0) if marks is not None else None)


def replay(tm, t: int, st, recorded: tuple) -> int:
    """Apply a memo() result at the current base B (state with the same key): exactly what issuing
    the batch one instruction at a time would do (issue cycles depend only on the state relative to B; busy_until is
    a running maximum of values relative to B). Returns the last issue cycle."""
    d_clock, nop, mad, busy, d_stalls, d_issued, gaps = recorded
    b = base(tm, t)
    if gaps is not None:
        tm.rec.replay(t, gaps, b, st.busy_until)   # the memo's key says whether it was made while recording
    if nop is not None:
        st.nop_only_cycle = b + nop
    if mad is not None:
        st.mad_cycle, st.mad_writes, st.mad_macro = b + mad[0], mad[1], mad[2]
    if b + busy > st.busy_until:
        st.busy_until = b + busy
    tm.stalls[t] += d_stalls
    tm.issued[t] += d_issued
    tm.clock[t] = b + d_clock
    return b + d_clock


def periodic(tm, t: int, s1: tuple, s2: tuple) -> bool:
    """Snapshots s1 / s2 of the SFPU issue state after two consecutive repetitions of a batched body (clock,
    nop_only_cycle, mad_cycle, mad_writes, mad_macro, busy_until, stalls, timeline marks): True when every later
    repetition provably issues exactly like the last one shifted by delta = s2.clock - s1.clock. TensixTiming.issue for an SFPU word
    depends on the thread clock, the frontend and Wait Gate times (no effect once in the past), the SFPU hazard
    state (nop_only_cycle, mad_cycle, mad_writes, mad_macro; a time matters only while it is not in the past) and
    the FPU write times of Dst blocks (SFPLOAD hazard check, silent once in the past); busy_until and stalls only
    accumulate. So: the state relative to the clock is the same after both repetitions, and nothing absolute can
    still matter."""
    c1 = s1[0]
    delta = s2[0] - c1
    if s1[3] != s2[3] or s1[4] != s2[4] or s2[5] != s1[5] + delta:
        return False
    if not (s2[1] == s1[1] + delta or (s2[1] == s1[1] and s1[1] <= c1)):
        return False                  # nop_only_cycle: moves with the body, or can never equal a later cycle
    if not (s2[2] == s1[2] + delta or (s2[2] == s1[2] and s1[2] < c1)):
        return False                  # mad_cycle likewise (it matters at mad_cycle + 1)
    if tm.fe[t] > c1 + 1 or tm.gate[t][1] > c1 + 1:
        return False
    w = tm.dst_fpu_write
    if w and max(w.values()) > c1 - FPU_TO_SFPLOAD_GAP + 1:
        return False
    return True


def skip(tm, t: int, st, s1: tuple, s2: tuple, n: int, p: int) -> int:
    """Advance the cycle model by n more repetitions of a p-word body known periodic (periodic): exactly the
    state n one-by-one repetitions would leave. Returns the last issue cycle."""
    delta = s2[0] - s1[0]
    shift = n * delta
    if s2[1] != s1[1]:
        st.nop_only_cycle += shift
    if s2[2] != s1[2]:
        st.mad_cycle += shift
    st.busy_until += shift
    tm.stalls[t] += n * (s2[6] - s1[6])
    tm.issued[t] += n * p
    if s1[7] is not None:                    # the timeline's gaps of one repetition, n more times
        tm.rec.repeat(t, s1[7], s2[7], n, delta)
    tm.clock[t] += shift
    return tm.clock[t]
