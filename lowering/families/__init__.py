"""Kernel families: each module turns the kernels it matches into candidate plans (predicted cycles and error) and
renders the plan the selector (lowering/select.py) picks. The registry (registry.py) lists them; modules here that
are not in it are what several families share (the tile pipeline of the elementwise and SFPU-reduction kernels, the
matmul spec of both matmul families)."""
