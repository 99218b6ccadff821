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


def test_cli_diff_rejects_a_missing_file_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kgate", "diff", str(tmp_path / "nope.jsonl"), str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "nope.jsonl" in r.stderr and "Traceback" not in r.stderr
