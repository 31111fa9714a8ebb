"""Comparing float32 results: distances in units in the last place, bit equality up to NaN payloads and the SFPU's
denormal flush."""
import numpy as np

F32_MIN_NORMAL = 2.0 ** -126


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps (monotonic integer mapping of the bit patterns); NaN vs NaN counts as 0."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    d = np.abs(ia - ib)
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def flushed(x: np.ndarray) -> np.ndarray:
    """x with denormals replaced by zeros of the same sign (what the SFPU reads and writes)."""
    return np.where((x != 0) & (np.abs(x) < F32_MIN_NORMAL), np.copysign(np.float32(0), x), x).astype(np.float32)


def same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element: equal bits, or both NaN (the SFPU's NaN is the canonical quiet NaN, the CPU's keeps a payload)."""
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
