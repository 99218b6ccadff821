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


def test_rows_whose_guarded_gates_got_guard_zones_in_a_second_pass_are_counted_apart(tmp_path):
    # a row the guard allocator failed whose coverage and bounds ran again with it (cuDNN's benchmark mode held
    # off: kernelbench/rowjob.py _guarded_pass) is not unguarded; one whose second pass failed too still is
    off = "off: with guard allocator /x the candidate's calls failed ...; this record is the row run again"
    rows = [{"type": "row", "key": k, "status": "ok", "classification": c, "gates": [], "seconds": 1,
             "row_seconds": 1, "guard_allocator": note, **({"guarded_pass": gp} if gp else {})}
            for k, c, note, gp in (
                ("a", "clean", "guard allocator /x/libkgate_guard_alloc.so", None),
                ("b", "broken", "on for coverage, bounds: a second pass with guard allocator /x ...; off for every "
                                "other gate: with ...", {"merged": True, "gates": ["coverage", "bounds"]}),
                ("c", "clean", "on for coverage, bounds: ...", {"merged": True, "gates": ["coverage", "bounds"]}),
                ("d", "clean", off + "; a second pass of coverage, bounds ... failed the same way ...",
                 {"merged": False, "why": "failed the same way"}),
                ("e", "violation", off, None))]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = report.summary_text([str(tmp_path / "out.jsonl")]).splitlines()
    unguarded = next(x for x in lines if "had no guard zones" in x)
    assert unguarded.endswith(": 2 of 5 (clean 1, violation 1)"), unguarded
    second = next(x for x in lines if "through a second pass" in x)
    assert second.startswith("audited rows whose guarded gates (coverage, bounds) got guard zones through a second "
                             "pass") and second.endswith(": 2 of 5 (broken 1, clean 1)"), second
    # records without the second pass's fields: no such line
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if "guarded_pass" not in r))
    assert "second pass" not in report.summary_text([str(tmp_path / "old.jsonl")])
