"""tinygrad backend for Tenstorrent Blackhole Tensix cores: `DEVICE=TT` (or `DEV=TT`) runs tinygrad kernels on a Tensix
core (the project's emulator by default).

Importing this package is cheap and never imports tinygrad. An installed copy registers itself at interpreter start
through `tt_backend.pth`; importing the package does the same for a source checkout (before tinygrad is imported).
"""
from tt_backend import _finder

__version__ = "0.1.0"

_finder.startup()
