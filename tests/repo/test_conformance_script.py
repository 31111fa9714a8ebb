"""scripts/tinygrad_conformance.py: the counts and grouping it prints come from pytest's JUnit report."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tinygrad_conformance.py"
spec = importlib.util.spec_from_file_location("tinygrad_conformance", SCRIPT)
conformance = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conformance)

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test_ops.TestOps" name="test_add" time="1.5"/>
<testcase classname="test_ops.TestOps" name="test_mod" time="10.2"><failure message="UnsupportedOp: FLOORMOD&#10;more">tb</failure></testcase>
<testcase classname="test_ops.TestOps" name="test_fmod" time="0.4"><failure message="UnsupportedOp: FLOORMOD">tb</failure></testcase>
<testcase classname="test_ops.TestOps" name="test_crash" time="60.0"><error message="worker 'gw0' crashed while running">x</error></testcase>
<testcase classname="test_ops.TestOps" name="test_half" time="0.0"><skipped message="dtype not supported"/></testcase>
</testsuite></testsuites>"""


def test_counts_groups_and_slowest_come_from_the_junit_report(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    rows = conformance.read_junit(junit)
    assert [(n.rsplit("::", 1)[1], o) for n, o, _, _ in rows] == [
        ("test_add", "passed"), ("test_mod", "failed"), ("test_fmod", "failed"), ("test_crash", "failed"),
        ("test_half", "skipped")]
    text = conformance.report(rows, slowest=2)
    assert text.startswith("1 passed, 3 failed, 1 skipped (25.0 % of the 4 tests that ran)")
    assert "   2  UnsupportedOp: FLOORMOD\n        test_fmod, test_mod" in text
    assert "   1  worker 'gw0' crashed while running" in text
    slow = text.split("slowest 2:")[1]
    assert "test_crash" in slow and "test_mod" in slow and "test_add" not in slow


def test_tests_that_never_ran_are_counted_and_named(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    collected = [conformance.junit_name(i) for i in ("test_ops.py::TestOps::test_add", "test_ops.py::TestOps::test_mod",
                                                     "test_ops.py::TestOps::test_topk[2-3]")]
    assert collected[2] == "test_ops.TestOps::test_topk[2-3]"
    text = conformance.report(conformance.read_junit(junit), slowest=0, collected=collected)
    assert "\n1 of the 3 collected tests never ran (the run ended early): test_topk[2-3]" in text
    assert "never ran" not in conformance.report(conformance.read_junit(junit), slowest=0, collected=collected[:2])
