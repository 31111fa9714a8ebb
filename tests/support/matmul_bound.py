"""The a-priori elementwise error bound of the FPU matmul (lowering/families/fpu_matmul.py), the tolerance of the
matmul tests. Derived in docs/placement.md §3.4 from the facts of docs/fpu_path.md §10.1-10.3 (the fidelity slices,
MVMUL's groups of 8, the fp32 Dst accumulation) and the unpacker's fp32 -> tf32 truncation, not from the project's
error model: for C the kernel's output and S_ij = sum_k |A_ik| |B_kj| (A, B the operand values in the buffers the
kernel reads, after any bf16 cast it does),

    |C_ij - (A B)_ij| <= (eps(src, fidelity) + accumulation(K, fidelity)) S_ij                    (fp32 output)
    |C_ij - (A B)_ij| <= 2^-9 |(A B)_ij| + (1 + 2^-9) (eps + accumulation) S_ij                   (bf16 output)

for operands that are 0 or normal with every non-zero product |a b| >= 2^-100 and every S_ij <= 2^100 (no flushed
phase product, no overflow) and K <= 2^18. `error_ratio` checks the domain and returns |C - ref| / bound per element,
ref = the float64 product, whose own error (at most K 2^-53 S_ij) the bound is widened by.
"""
from __future__ import annotations

import numpy as np

# Per fidelity: the multiplier phases it runs, as their exponent offsets (docs/fpu_path.md §10.1).
PHASE_OFFSETS = {"LoFi": (0,), "HiFi2": (0, -5), "HiFi3": (0, -5, -7), "HiFi4": (0, -5, -7, -12)}

# Worst relative error of one product from the significand bits no phase of the fidelity reads (§3.4 step 2; SrcA is B's
# 11-bit significand s_A, SrcB is A's s_B, both in [1024, 2048)): LoFi drops s_A mod 64 and s_B mod 16, HiFi2 s_A's
# bit 0 and s_B mod 16, HiFi3 2 x (s_A >> 1 & 31) x (s_B & 15) + bit 0 x s_B, HiFi4 bit 0 (bf16 has s's low 3 bits 0).
DROPPED = {
    "bf16": {"LoFi": (56 + 8) / 2 ** 10, "HiFi2": 8 / 2 ** 10, "HiFi3": 2 * 28 * 8 / 2 ** 20, "HiFi4": 0.0},
    "tf32": {"LoFi": (63 + 15) / 2 ** 10, "HiFi2": (1 + 15) / 2 ** 10, "HiFi3": (2 * 31 * 15 + 2 ** 10) / 2 ** 20,
             "HiFi4": 1 / 2 ** 10},
}
UNPACK = {"bf16": 0.0, "tf32": 2.0 ** -9}     # fp32 -> tf32 truncates each operand by less than 2^-10 of it
GROUP_ROUNDING = 7 * 2.0 ** -11               # §3.4 step 3: seven products of a group of 8 rounded to 2^-10 of 2^Eg
DST_STEP = 3.3 * 2.0 ** -24                   # §3.4 step 4: per MVMUL, alignment (2^-23) + normalisation (2^-24), x1.1
OUT_BF16 = 2.0 ** -9                          # the packer's nearest-even rounding of the fp32 result to bf16


def eps(src_format: str, fidelity: str) -> float:
    """The K-independent coefficient of S: unpack + dropped bits + group alignment (+ the Dst alignment to a term,
    2^-23 of each phase's group maximum)."""
    c = sum(2.0 ** o for o in PHASE_OFFSETS[fidelity])
    return UNPACK[src_format] + DROPPED[src_format][fidelity] + (GROUP_ROUNDING + 2.0 ** -23) * c


def accumulation(K: int, fidelity: str) -> float:
    """The K-dependent coefficient: one Dst update per phase and half of a 32-k tile."""
    return DST_STEP * 2 * len(PHASE_OFFSETS[fidelity]) * -(-K // 32)


def bound(a64: np.ndarray, b64: np.ndarray, src_format: str, fidelity: str, out_bf16: bool) -> np.ndarray:
    """The elementwise bound on |C - a64 @ b64| (float64 operands, batched like np.matmul)."""
    K = a64.shape[-1]
    if K > 2 ** 18:
        raise ValueError(f"K = {K}: the bound is proven for K <= 2^18")
    s = np.matmul(np.abs(a64), np.abs(b64))
    e = (eps(src_format, fidelity) + accumulation(K, fidelity)) * s
    if out_bf16:
        e = OUT_BF16 * np.abs(np.matmul(a64, b64)) + (1 + OUT_BF16) * e
    return e + K * 2.0 ** -53 * s


def check_domain(a64: np.ndarray, b64: np.ndarray) -> None:
    """ValueError when the operands leave the bound's domain (a flushed denormal or product, an overflow)."""
    nz = [np.abs(x[x != 0]) for x in (a64, b64)]
    if any(v.size and v.min() < 2.0 ** -126 for v in nz):
        raise ValueError("a denormal operand: the FPU reads it as 0, outside the bound's domain")
    if all(v.size for v in nz) and nz[0].min() * nz[1].min() < 2.0 ** -100:
        raise ValueError("a product below 2^-100 may be flushed in a later phase: outside the bound's domain")
    if np.matmul(np.abs(a64), np.abs(b64)).max(initial=0) > 2.0 ** 100:
        raise ValueError("sum |a b| above 2^100: outside the bound's domain")


def error_ratio(got, a, b, src_format: str, fidelity: str, out_bf16: bool) -> np.ndarray:
    """|got - a @ b| / bound per output (float64 reference); <= 1 everywhere when the bound holds."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    check_domain(a64, b64)
    err = np.abs(np.asarray(got, np.float64) - np.matmul(a64, b64))
    return err / np.maximum(bound(a64, b64, src_format, fidelity, out_bf16), np.finfo(np.float64).tiny)
