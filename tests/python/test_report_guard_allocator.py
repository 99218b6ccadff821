"""`kgate report` says how many audited rows ran without guard zones around the candidate's own allocations
(issue 14, Deliver 2: a bounds PASS on such a row says nothing of writes past memory the candidate allocated)."""
import json

from kgate import report


def test_report_says_how_many_audited_rows_had_no_guard_zones_around_the_candidates_memory(tmp_path):
    # h100 rerun: 38 of 185 audited rows ran with the guard allocator off (cuDNN asked it for cacheInfo), so
    # their bounds PASS says nothing of writes past memory the candidate allocated itself; the report says so
    notes = {"a": "guard allocator /x/libkgate_guard_alloc.so", "b": "off: with guard allocator /x ... run again",
             "c": "no guard allocator (library not built)", "d": None}
    rows = [{"type": "row", "key": k, "status": "ok", "classification": c, "gates": [], "seconds": 1,
             "row_seconds": 1, **({"guard_allocator": notes[k]} if notes[k] else {})}
            for k, c in (("a", "clean"), ("b", "broken"), ("c", "clean"), ("d", "clean"))]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = next(x for x in report.summary_text([str(tmp_path / "out.jsonl")]).splitlines() if "guard zones" in x)
    assert line.endswith(": 2 of 4 (broken 1, clean 1)"), line
    (tmp_path / "guarded.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[3]) + "\n")
    assert "guard zones" not in report.summary_text([str(tmp_path / "guarded.jsonl")])
