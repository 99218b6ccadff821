"""report.py's text tables read from a results file alone (no engine, no torch)."""
import json

from kgate import report


def _row(key, baseline, summary, producer):
    return {"type": "row", "key": key, "status": "ok", "classification": "clean", "level": 1, "task": 1,
            "gates": [{"gate": "baseline", "verdict": baseline, "summary": summary},
                      {"gate": "public_harness", "verdict": "PASS",
                       "harnesses": {"producer": {"passed": producer}, "kernelbench": {"passed": producer}}}]}


def test_agreement_lists_each_disagreement_on_one_line(tmp_path):
    # A CUDA error's message spans lines (a100/L3/T28's "...during capture\nSearch for `cudaErrorStream..."):
    # its disagreement is still one line, so the list has one line per row.
    path = tmp_path / "r.kgate.jsonl"
    rows = [_row("x/L1/T1", "FAIL", "lazy check: CUDA error: failed during capture\nSearch for `cudaError`\n",
                 False),
            _row("x/L1/T2", "FAIL", "trial 1: value mismatch", True),
            _row("x/L1/T3", "PASS", "", True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = report.agreement_text([str(path)])
    lines = text.splitlines()
    head = lines.index("disagreements with the producer (2):")
    assert lines[head + 1] == ("  x/L1/T1: baseline FAIL: lazy check: CUDA error: failed during capture Search for "
                               "`cudaError` | in-process producer: False | kernelbench: False")
    assert lines[head + 2].startswith("  x/L1/T2: baseline FAIL: trial 1: value mismatch | in-process producer: True")
    assert lines[head + 3] == ""
