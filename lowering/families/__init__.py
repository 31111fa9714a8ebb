"""Kernel families: each module turns the kernels it matches into candidate plans (predicted cycles and error) and
renders the plan the selector (lowering/select.py) picks. The registry (registry.py) lists them; modules here that
are not in it are what several families share (the tile pipeline of the elementwise and SFPU-reduction kernels:
tile_plan, tile_streams, tile_render; the matmul spec of both matmul families: matmul_spec).

A new family is one module here - its `Plan` subclass (own fields only, `n_tiles`, `render`), `match(kernel)`,
`candidates(kernel, match)` and `FAMILY = Family(NAME, match, candidates)` - plus its templates and one line in
registry.py; the frontend and the selector do not change."""
