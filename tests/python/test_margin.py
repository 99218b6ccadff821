"""`kgate margin`: which kernels' classes a tolerance ratio decides within a factor of 2 of the 100x line, the engine
classifying the records as they are and with every finite error ratio scaled (report.near_line)."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("kgate._core", reason="the extension is not built (pip install ./python)")

from kgate import report  # noqa: E402

GATES = ["oracle", "nan", "inf", "determinism", "shapes", "accumulation", "immutability", "coverage", "bounds",
         "freshness", "stream", "layout"]


def _row(key, classification, fails):
    """An audited row: every engine gate PASS but `fails` ({gate: (verdict, error_ratio, finding)}), plus the
    baseline and the public harnesses' mirror (failing: neither is the engine's, so neither may count)."""
    gates = [{"gate": "baseline", "verdict": "FAIL"}]
    for g in GATES:
        verdict, ratio, finding = fails.get(g, ("PASS", None, ""))
        gates.append({"gate": g, "verdict": verdict, "error_ratio": ratio, "counted": True, "finding": finding})
    gates.append({"gate": "public_harness", "verdict": "FAIL"})
    return {"type": "row", "key": key, "status": "ok", "classification": classification, "level": 1, "task": 1,
            "gates": gates}


VALUE = "error beyond the bound"
ROWS = [
    _row("x/L1/T1", "broken", {"oracle": ("FAIL", 150.0, VALUE)}),                     # /2 = 75: violation: near
    _row("x/L1/T2", "broken", {"oracle": ("FAIL", 250.0, VALUE)}),                     # /2 = 125: still broken
    _row("x/L1/T3", "violation", {"shapes": ("FAIL", 60.0, VALUE)}),                   # x2 = 120: broken: near
    _row("x/L1/T4", "violation", {"accumulation": ("FAIL", 20.0, VALUE)}),             # x2 = 40: still a violation
    _row("x/L1/T5", "broken", {"oracle": ("FAIL", 150.0, VALUE),                       # broken by nan whatever the
                               "nan": ("FAIL", None, "NaN masked")}),                  # ratio: never near
    _row("x/L1/T6", "violation", {"layout": ("FAIL", 90.0, VALUE)}),                   # layout is never broken
    _row("x/L1/T7", "broken", {"shapes": ("FAIL", 120.0, VALUE), "accumulation": ("FAIL", 90.0, VALUE)}),  # near
    _row("x/L1/T8", "broken", {"shapes": ("FAIL", 120.0, VALUE), "accumulation": ("FAIL", 210.0, VALUE)}),  # not
    _row("x/L1/T9", "clean", {}),
]


def test_near_line_reads_the_engine_on_scaled_ratios():
    near = {r["key"]: report.near_line(r) for r in ROWS}
    assert near == {"x/L1/T1": "broken", "x/L1/T2": None, "x/L1/T3": "violation", "x/L1/T4": None, "x/L1/T5": None,
                    "x/L1/T6": None, "x/L1/T7": "broken", "x/L1/T8": None, "x/L1/T9": None}


def test_a_record_todays_engine_classifies_otherwise_is_left_out_and_counted():
    stale = _row("x/L2/T1", "broken", {"oracle": ("FAIL", 60.0, VALUE)})  # the engine says violation
    assert report.near_line(stale) is None
    rows, lines, skipped = report.margin_rows(ROWS + [stale])
    assert skipped == 1
    assert rows == [["broken", 2, 6], ["violation", 1, 3]]
    assert lines == ["  x/L1/T1: broken (oracle 150x)", "  x/L1/T3: violation (shapes 60x)",
                     "  x/L1/T7: broken (shapes 120x, accumulation 90x)"]


def test_the_command_prints_the_table_and_the_rows(tmp_path):
    path = tmp_path / "r.kgate.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = subprocess.run([sys.executable, "-m", "kgate", "margin", str(path)], capture_output=True, text=True,
                         check=True).stdout
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("broken", "violation"))}
    assert table == {"broken": ["2", "5"], "violation": ["1", "3"]}
    assert "  x/L1/T3: violation (shapes 60x)" in out.splitlines()
    assert "left out" not in out
