"""The error models of FPU sums (lowering/families/fpu_reduce.py: `fpu_sums`) and FPU matmuls
(lowering/families/fpu_matmul.py: `fpu_matmul`), injected into the lowering like placement_eval's evaluator: the
kernel's arithmetic with the emulator's bit-exact numerics (chip.numerics.fpu_math, chip.numerics.formats).

Per output: the unpacker's view of the data (bf16 exact; fp32 truncated to tf32), then per k tile of 32, per fidelity
phase, per half of 16 k (the order of lowering.codegen.mvmul.mvmul_words: a phase's first 8 MVMULs take k 0-15, the next
8 k 16-31) one MVMUL step: 16 products with the ones tile in two groups of 8, each aligned to its largest term, added to
the fp32 Dst value with one rounding (fpu_math.mvmul19)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics import formats as F
from tt_backend.chip.numerics import fpu_math as fm

ONE = 0x3F800000


def fpu_sums(x: np.ndarray, src_format: str, side: str, phases: int, cells: int = 32) -> np.ndarray:
    """x: (n, K) float32 values (the reduce's input as loaded); returns the n fp32 sums as uint32 words.
    cells < 32 ("srca" with few outputs per tile, lowering.families.fpu_reduce): each output's 32 // cells columns
    accumulate their own k (column q: k = kt * 32 * C + 32 q + r) through the MVMULs, then the SFPU adds the four row
    steps' partials per lane ((q0 + q1) + q2) + q3 and the lanes pairwise, in fp32."""
    x = np.asarray(x, np.float32)
    if cells < 32:
        n, k = x.shape
        c = 32 // cells
        kp = -(-k // (32 * c)) * 32 * c
        xp = np.zeros((n, kp), np.float32)
        xp[:, :k] = x
        cols = xp.reshape(n, kp // (32 * c), c, 32).transpose(0, 2, 1, 3).reshape(n * c, -1)   # (n, q) rows
        part = fpu_sums(cols, src_format, side, phases).view(np.float32).reshape(n, c // 4, 4)
        with np.errstate(all="ignore"):
            v = ((part[:, :, 0] + part[:, :, 1]) + part[:, :, 2]) + part[:, :, 3]   # per lane l of the output
            while v.shape[1] > 1:
                v = v[:, 1::2] + v[:, 0::2]
        return v.reshape(-1).astype(np.float32).view(np.uint32)
    n, k = x.shape
    bits = x.view(np.uint32)
    code = fm.BF16 if src_format == "bf16" else fm.TF32
    src = bits & np.uint32(0xFFFF0000) if src_format == "bf16" else F.unp_fp32_to_tf32(bits)
    kp = -(-k // 32) * 32
    d = np.zeros((n, kp), np.uint32)
    d[:, :k] = src
    d19 = fm.src19(d, code)
    one19 = fm.src19(np.uint32(ONE), code)
    if side == "srcb":          # SrcB = data rows (n x 16 k), SrcA = ones (16 k x 1): Dst (n x 1)
        ones = np.full((16, 1), one19, np.int64)
        dst = np.zeros((n, 1), np.uint32)
    else:                       # SrcA = data (16 k x n), SrcB = ones (1 x 16 k): Dst (1 x n)
        ones = np.full((1, 16), one19, np.int64)
        dst = np.zeros((1, n), np.uint32)
    # the MVMULs in order: per k tile, per phase, per half of 16 k
    order = [(kt, p, h) for kt in range(kp // 32) for p in range(phases) for h in range(2)]
    chunks = np.stack([d19[:, 32 * kt + 16 * h: 32 * kt + 16 * h + 16] for kt, _, h in order])    # (S, n, 16)
    steps = [p for _, p, _ in order]
    if side == "srcb":
        dst = fm.mvmul19_steps(np.broadcast_to(ones, (len(order), 16, 1)), chunks, steps, dst)
    else:
        dst = fm.mvmul19_steps(chunks.transpose(0, 2, 1), np.broadcast_to(ones, (len(order), 1, 16)), steps, dst)
    return dst.reshape(-1).astype(np.uint32)


def fpu_matmul(a: np.ndarray, b: np.ndarray, src_format: str, phases: int) -> np.ndarray:
    """a (M, K) @ b (K, N) float32 as the FPU matmul runs it (lowering.codegen.mvmul.mvmul_words): both operands
    through the unpacker (bf16 exact, fp32 -> tf32), then per K block of 32, per fidelity phase, per half of 16 k one
    MVMUL (Dst += SrcB @ SrcA, SrcB = rows of a, SrcA = columns of b) into a zeroed fp32 Dst; returns the (M, N) fp32
    words before the packer."""
    code = fm.BF16 if src_format == "bf16" else fm.TF32
    (m, k), n = a.shape, b.shape[1]
    kp = -(-k // 32) * 32
    ops = []
    for x in (np.asarray(a, np.float32), np.asarray(b, np.float32).T):
        bits = x.view(np.uint32)
        src = bits & np.uint32(0xFFFF0000) if src_format == "bf16" else F.unp_fp32_to_tf32(bits)
        d = np.zeros((x.shape[0], kp), np.uint32)
        d[:, :k] = src
        ops.append(fm.src19(d, code))
    a19, bt19 = ops
    dst = np.zeros((m, n), np.uint32)
    for kt in range(kp // 32):
        for p in range(phases):
            for h in range(2):
                ks = slice(32 * kt + 16 * h, 32 * kt + 16 * h + 16)
                dst = fm.mvmul19(bt19[:, ks].T, a19[:, ks], dst, p)
    return dst.astype(np.uint32)
