"""Precision-aware placement: which engine runs each op of a kernel, chosen as the cheapest placement whose
predicted error stays within the budget. By job: the choice IR (`choice`), the cost model (`cost`), the float32
reference and error measures (`reference`), TT_PLACE pins (`pins`), the search (`search`), its report (`report`),
the injected placer (`placer`) and the rule for FPU sums and matmuls (`guarantee`)."""
