"""The launch model of a launch measured L1 to L1 (TT_L1_RESIDENT=1: the reader runs alone, then the compute and the
writer, runtime/driver.py): mover_cost.l1_resident_cycles, and the prediction row that TT_PREDICTIONS records for it."""
from __future__ import annotations

import json

from tt_backend import predictions
from tt_backend.lowering.families import mover_cost


def test_reader_alone_then_compute_and_writer():
    # a * b + a over 3 fp32 tiles, reads in flight: the reader's run is its round trip and each tile's two reads;
    # the compute and the writer then never wait for a tile
    reads = [("contiguous", "fp32", None, 0.0, 2)] * 2
    out = mover_cost.tile_pipeline_cycles(3, reads, ("contiguous", "fp32", 0.0), 261.0)
    per_read = 2 * (mover_cost.TILE_READ_FIXED - mover_cost.NOC_ROUND_TRIP + 4096 / mover_cost.NOC_BYTES_PER_CYCLE)
    writer = mover_cost.tile_write_cycles("contiguous", "fp32") - mover_cost.NOC_ROUND_TRIP
    rest = mover_cost.NOC_ROUND_TRIP + 261 + writer + 2 * 261
    assert out["l1_resident"] == round(max(mover_cost.NOC_ROUND_TRIP + 3 * per_read, rest))
    assert out["l1_resident"] < out["total"]
    # a slow reader sets the time alone
    assert mover_cost.l1_resident_cycles(3, 5000.0, 261.0, 142.0, 100.0) == 100 + 3 * 5000


def test_the_row_takes_the_l1_resident_prediction_only_when_the_launch_was(tmp_path):
    path = str(tmp_path / "rows.jsonl")
    prediction = {"family": "ElementwisePlan", "predicted": 2105, "predicted_l1_resident": 1331}
    predictions.record(path, "E_96_32", prediction, 2120)
    predictions.record(path, "E_96_32", prediction, 1461, l1_resident=True)
    predictions.record(path, "r_1", {"family": "FpuMatmulPlan", "predicted": 900}, 1000, l1_resident=True)
    rows = [json.loads(line) for line in open(path)]
    assert [r["predicted"] for r in rows] == [2105, 1331, 900]
    assert all("predicted_l1_resident" not in r for r in rows)
