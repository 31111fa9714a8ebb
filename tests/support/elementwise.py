"""The elementwise tinygrad programs the end-to-end tests run on TT against CPU (tests/e2e/test_e2e.py) and the
emulator-vs-ttsim replay runs on both targets (tests/diff/test_diff_emu_ttsim.py)."""

SHAPES = [(37,), (5, 33), (3, 4, 50), (2, 3, 5, 7), (64, 128)]

BINARY = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
          "max": lambda a, b: a.maximum(b)}

UNARY = {  # name: (fn, input range)
    "neg": (lambda a: -a, (-4, 4)),
    "recip": (lambda a: a.reciprocal(), (0.01, 100)),
    "sqrt": (lambda a: a.sqrt(), (0.0, 1000)),
    "exp2": (lambda a: a.exp2(), (-100, 100)),
    "log2": (lambda a: a.log2(), (1e-30, 1e30)),
    "trunc": (lambda a: a.trunc(), (-1000, 1000)),
}
