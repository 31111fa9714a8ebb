"""Code generation services every kernel family uses: Tensix words as C literals (`words`), the L1 allocator (`l1`),
the argument header (`args_header`), the Jinja environment and source bundle (`sources`), the shared Tensix
configuration (`tensix`: semaphores, unpack/pack/ALU config, the per-thread words; `mvmul`: the matrix engine's),
the per-dtype DRAM/tile C expressions (`c_exprs`) and the SFPU code generator (`sfpu_ops`, `sfpu_codegen`,
`lane_combine`)."""
