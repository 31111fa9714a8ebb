"""Fixtures of the end-to-end tests (tinygrad programs on Device TT)."""
import pytest
from tinygrad.helpers import Context


@pytest.fixture
def serial_compile():
    """Compile kernels in-process: programs with 1-3 small kernels each compile faster than tinygrad's compile
    workers spawn."""
    with Context(PARALLEL=0):
        yield
