"""TT_PREDICTIONS (tt_backend/predictions.py): one row per emulated launch with the launch model's prediction and the
emulated cycles, the same numbers TT_DUMP's report.json carries for the launch; and the summary's counting."""
import json
import subprocess
import sys

from tt_backend import predictions

from tests.e2e.test_observe import TWO_KERNELS, _env


def test_each_launch_is_recorded_with_the_numbers_of_its_report(tmp_path):
    rows_file, dump = tmp_path / "rows.jsonl", tmp_path / "dump"
    r = subprocess.run([sys.executable, "-c", TWO_KERNELS], env=_env(TT_PREDICTIONS=str(rows_file), TT_DUMP=str(dump)),
                       capture_output=True, text=True, timeout=600, cwd="/")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = predictions.load(str(rows_file))
    reports = [(p.parent.name.rsplit("_", 1)[0], json.loads(p.read_text())) for p in dump.glob("*/report.json")]
    assert len(rows) == len(reports) == 2
    recorded = sorted((row["kernel"], row["family"], row["tiles"], row["cores"], row["predicted"], row["emulated"])
                      for row in rows)
    reported = sorted((name, "ElementwisePlan", rep["n_tiles"], rep["predicted_launch_cycles"]["cores"],
                       rep["predicted_launch_cycles"]["total"], rep["emulated_cycles"]) for name, rep in reports)
    assert recorded == reported
    assert all(row["predicted"] > 0 and row["emulated"] > 0 for row in rows)


def test_summary_counts_launches_within_a_quarter_and_lists_the_worst_first():
    def row(kernel, predicted, emulated, family="F"):
        return {"kernel": kernel, "family": family, "predicted": predicted, "emulated": emulated, "cores": 1,
                "test": "t"}
    rows = [row("ok", 110, 100), row("ok", 110, 100), row("high", 130, 100), row("low", 50, 100),
            row("edge", 75, 100), row("unpriced", None, 100, family="G")]
    text = predictions.summary(rows, worst=2)
    assert text.startswith("5 distinct launches (6 rows), 4 priced: 2 within 25% (50.0%); 1 without a launch model")
    worst = text.split("worst 2:")[1].splitlines()[2:]
    assert [w.split()[0] for w in worst] == ["0.50", "0.75"]      # |log(pred / emu)|: 0.75 is further off than 1.3
