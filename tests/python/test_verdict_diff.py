"""The rerun diff: every changed verdict is listed with the gates that changed and their new summaries."""
import json
import subprocess
import sys

from kgate.verdict_diff import diff


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def test_changed_rows_name_the_gates_and_reasons(tmp_path):
    old = _write(tmp_path / "old.jsonl", [
        {"type": "row", "key": "f/L1/T1", "status": "ok", "classification": "broken",
         "gates": [{"gate": "oracle", "verdict": "FAIL"}, {"gate": "stream", "verdict": "FAIL"}]},
        {"type": "row", "key": "f/L1/T2", "status": "ok", "classification": "clean",
         "gates": [{"gate": "coverage", "verdict": "PASS"}]},
        {"type": "row", "key": "f/L1/T3", "status": "ok", "classification": "clean", "gates": []},
    ])
    new = _write(tmp_path / "new.jsonl", [
        {"type": "row", "key": "f/L1/T1", "status": "ok", "classification": "violation",
         "gates": [{"gate": "oracle", "verdict": "FAIL"},
                   {"gate": "stream", "verdict": "FAIL", "counted": False, "attributed_to": "oracle",
                    "summary": "the oracle's tolerance error at the same magnitude"}]},
        {"type": "row", "key": "f/L1/T2", "status": "ok", "classification": "broken",
         "gates": [{"gate": "coverage", "verdict": "FAIL", "summary": "poison left at [3] with zero inputs"}]},
        {"type": "row", "key": "f/L1/T3", "status": "ok", "classification": "clean", "gates": []},
    ])
    text = diff(old, new)
    assert "## f/L1/T1: broken -> violation" in text
    assert "- stream: FAIL -> FAIL (counted under oracle): the oracle's tolerance error" in text
    assert "## f/L1/T2: clean -> broken" in text and "poison left at [3]" in text
    assert "f/L1/T3" not in text.split("rows, ")[1]  # unchanged rows are only counted
    assert "3 rows, 2 changed." in text


def test_a_ratio_crossing_the_line_is_the_reason_when_no_verdict_changed(tmp_path):
    # The same gate verdicts, the oracle's error ratio moved from 77x to 109x of its bound: the class changed for
    # that reason alone, and the diff says so; a ratio that moved by under 1% is not listed, nor a passing gate's.
    g = lambda r, v="FAIL", gate="oracle": {"gate": gate, "verdict": v, "error_ratio": r}  # noqa: E731
    old = _write(tmp_path / "old.jsonl", [
        {"type": "row", "key": "f/L1/T62", "status": "ok", "classification": "violation",
         "gates": [g(77.1), g(40.0, gate="shapes"), g(0.3, "PASS", "layout")]}])
    new = _write(tmp_path / "new.jsonl", [
        {"type": "row", "key": "f/L1/T62", "status": "ok", "classification": "broken",
         "gates": [g(109.4), g(40.2, gate="shapes"), g(0.1, "PASS", "layout")]}])
    text = diff(old, new)
    assert "## f/L1/T62: violation -> broken" in text
    body = text.split("## f/L1/T62: violation -> broken", 1)[1]
    assert "- oracle: error ratio 77.1x -> 109x of its bound" in body
    assert "shapes" not in body and "layout" not in body and "no gate changed" not in body


def test_cli_diff_rejects_a_missing_file_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kgate", "diff", str(tmp_path / "nope.jsonl"), str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "nope.jsonl" in r.stderr and "Traceback" not in r.stderr
