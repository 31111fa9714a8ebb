"""lowering/threefry.py evaluated with numpy uint32 operations against the Threefry-2x32-20 known-answer vectors of
Random123 (Salmon et al., SC'11; the same vectors JAX's threefry tests use): the op sequence the frontend expands
THREEFRY into is the cipher itself, independent of any device."""
import numpy as np
import pytest

from tt_backend.lowering.threefry import threefry2x32

NP_OPS = {"ADD": np.add, "XOR": np.bitwise_xor, "OR": np.bitwise_or, "SHL": np.left_shift, "SHR": np.right_shift}


def run(x, key):
    vals: list[np.ndarray] = []

    def add(v) -> int:
        vals.append(np.uint32(v))
        return len(vals) - 1

    def op(name, a, b) -> int:
        with np.errstate(over="ignore"):
            return add(NP_OPS[name](vals[a], vals[b]))
    y0, y1 = threefry2x32(op, add, (add(x[0]), add(x[1])), (add(key[0]), add(key[1])))
    return int(vals[y0]), int(vals[y1])


@pytest.mark.parametrize("x,key,want", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_known_answers(x, key, want):
    assert run(x, key) == want
