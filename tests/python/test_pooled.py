"""Several corpus files audited in shards, merged and pooled (kgate/pooled.py): real numpy audits of three tiny
corpus files that share tasks, one of them in two shards; the merge finds every row once and is idempotent;
a missing row, a duplicated record, a tampered record, a stale record, a foreign record and a missing key are
each caught; the cross-GPU summary gives the known answer on cases built to have one."""
import json
import os
import shutil

import pytest
from conftest import control_rows, read_jsonl, run_cli, write_corpus

from kgate import pooled
from kgate.classify import classification, counted_failure
from kgate.results import load_key, read_results, sign

GATES = "oracle,nan,inf,immutability,determinism"
FAST = ["--fw", "numpy", "--call-timeout", "4", "--jobs", "2", "--seed", "1234", "--gates", GATES, "--quiet"]


def _rows(spec):
    """[(level, task, control name, code suffix)] -> corpus rows; tasks share their reference by control task."""
    out = []
    for level, task, name, suffix in spec:
        if name is None:
            base = control_rows(["correct_softmax"])[0]
            out.append(dict(base, level_id=level, task_id=task, custom_code="None"))
            continue
        r = control_rows([name])[0]
        out.append(dict(r, level_id=level, task_id=task, custom_code=r["custom_code"] + suffix))
    return out


# Task 1 is the tanh-scale task, task 2 softmax, task 3 linear (the numpy controls' own tasks).
GA = [(1, 1, "nan_masked", ""), (1, 2, "correct_softmax", ""), (1, 3, "correct_linear", "")]
GB = [(1, 1, "correct_tanh_scale", ""), (1, 2, "softmax_no_max", ""), (1, 3, "inf_saturated", ""),
      (2, 4, None, "")]
GC = [(1, 1, "nan_masked", "\n# accepted on another GPU\n"), (1, 2, "correct_softmax", "")]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """ga and gc audited whole, gb in two shards: four results files, each with its own key."""
    d = tmp_path_factory.mktemp("pooled")
    corpora = {name: write_corpus(d / f"{name}.jsonl", _rows(spec)) for name, spec in
               (("ga", GA), ("gb", GB), ("gc", GC))}
    runs = [("ga", None, "ra"), ("gb", "0/2", "rb0"), ("gb", "1/2", "rb1"), ("gc", None, "rc")]
    results = []
    for corpus, shard, out in runs:
        args = ["audit", corpora[corpus], "--results", str(d / f"{out}.kgate.jsonl"), *FAST]
        if shard:
            args += ["--shard", shard]
        r = run_cli(*args, cwd=d)
        assert r.returncode == 0, r.stderr
        results.append(str(d / f"{out}.kgate.jsonl"))
    return d, [corpora[k] for k in ("ga", "gb", "gc")], results


def _merge(corpora, results, out, *extra):
    return run_cli("merge", "--corpus", *corpora, "--results", *results, "--out", str(out), *extra)


def _files(d):
    return {p: open(os.path.join(d, p), "rb").read() for p in sorted(os.listdir(d))}


def test_shards_merge_into_one_record_per_row_and_a_rerun_changes_nothing(audited, tmp_path):
    d, corpora, results = audited
    out = tmp_path / "p" / "pooled.kgate.jsonl"
    r = _merge(corpora, results, out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "9 of 9 rows have one current record" in r.stdout and "complete" in r.stdout
    recs = read_results(str(out))  # read as any results file: verified under the pooled key
    assert [x["key"] for x in recs] == ["ga/L1/T1", "ga/L1/T2", "ga/L1/T3", "gb/L1/T1", "gb/L1/T2", "gb/L1/T3",
                                        "gb/L2/T4", "gc/L1/T1", "gc/L1/T2"]
    assert {x["merged_from"] for x in recs if x["corpus"] == "gb"} == {"rb0.kgate.jsonl", "rb1.kgate.jsonl"}
    # Each pooled record is its shard's record, plus where it came from.
    source = {x["key"]: x for p in results for x in read_results(p)}
    for x in recs:
        bare = {k: v for k, v in x.items() if k not in ("mac", "corpus", "merged_from", "code_sha")}
        assert bare == {k: v for k, v in source[x["key"]].items() if k != "mac"}
    assert recs[0]["code_sha"] != recs[7]["code_sha"]  # the same defect, another source text
    # The audits found something and passed something: the tables below count both.
    classes = [classification(x) for x in recs if x["status"] == "ok"]
    assert "clean" in classes and any(c != "clean" for c in classes), classes

    first = _files(out.parent)
    again = _merge(corpora, results, out)
    assert again.returncode == 0 and "unchanged (nothing recomputed)" in again.stdout
    assert _files(out.parent) == first
    # Remove the manifest: the merge recomputes, and writes the very same bytes.
    os.unlink(pooled.manifest_path(str(out)))
    assert _merge(corpora, results, out).returncode == 0
    assert _files(out.parent) == first

    # The tables and the HTML report, twice: the same files.
    for cmd in ("pool", "crossgpu", "headline"):
        r = run_cli(cmd, "--pooled", str(out))
        assert r.returncode == 0, r.stderr
    made = _files(out.parent)
    assert {"pooled.md", "crossgpu.md", "headline.md", "pooled.html"} <= set(made)
    page = made["pooled.html"].decode()
    # Two plots over the files, then report.write_html's four for the pooled set, its defences and evidence.
    assert page.count("<svg") == 2 + 4 and "Threshold sweep" in page and "Cross-GPU" in page and "Headline" in page
    assert "The pooled set in detail" in page and "Defence 3: agreement" in page and "Failures with evidence" in page
    assert all(f"<td>{f}</td>" in page for f in ("ga", "gb", "gc", "pooled"))
    for cmd in ("pool", "crossgpu", "headline"):
        r = run_cli(cmd, "--pooled", str(out))
        assert r.returncode == 0 and "unchanged" in r.stdout, r.stdout
    assert _files(out.parent) == made
    # `report` reads the pooled view like any results file.
    r = run_cli("report", str(out))
    assert r.returncode == 0 and "9 rows, 8 audited" in r.stdout.replace(f"{out}: ", ""), r.stdout


def test_tables_count_what_the_records_say(audited, tmp_path):
    d, corpora, results = audited
    out = tmp_path / "pooled.kgate.jsonl"
    assert _merge(corpora, results, out).returncode == 0
    recs, man = pooled.load_pooled(str(out))
    # Independently of count_row: from each shard's own results.
    src = [x for p in results for x in read_results(p)]
    aud = [x for x in src if x["status"] == "ok"]
    broken = sum(1 for x in aud if classification(x) == "broken")
    failing = sum(1 for x in aud if classification(x) in ("broken", "violation"))
    text = pooled.pool_text(recs, man, str(out))
    pooled_line = next(l for l in text.splitlines() if l.startswith("| pooled | 8 |"))
    assert f"| {broken} ({100 * broken / 8:.1f}%) | {failing} ({100 * failing / 8:.1f}%) |" in pooled_line
    gb_rows = next(l for l in text.splitlines() if l.startswith("| gb | 4 | 1 | 0 | 3 | 3 |"))
    assert gb_rows
    head = pooled.headline_text(recs, man, str(out))
    assert "| broken beyond any tolerance argument | 39.5% |" in head
    # Every broken kernel here is broken by a tolerance-free gate (NaN/Inf patterns), so none rests near the
    # 100x line: the share away from the line is the broken share (test_margin has kernels near it).
    assert all(any(g["gate"] in ("nan", "inf") and counted_failure(g) for g in x["gates"])
               for x in aud if classification(x) == "broken")
    from kgate import report
    assert f"divided by {report.NEAR_LINE:g}:" in pooled.DEFINITIONS["broken away from the line"]  # one factor
    assert (f"| broken beyond any tolerance argument, not within {report.NEAR_LINE:g}x of the 100x line | - | "
            f"{100 * broken / 8:.1f}% ({broken} of 8) |") in head
    assert f"python -m kgate headline --pooled {out}" in head
    assert (f"python -m kgate merge --corpus ga.jsonl gb.jsonl gc.jsonl --results ra.kgate.jsonl rb0.kgate.jsonl "
            f"rb1.kgate.jsonl rc.kgate.jsonl --out {out}") in head
    # Cross-GPU: task 1 is in all three files; each cell names exactly the counted failing gates.
    cg = pooled.crossgpu_text(recs, man, permutations=50)
    row = next(l for l in cg.splitlines() if l.startswith("| 1 | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    for cell, key in zip(cells, ("ga/L1/T1", "gb/L1/T1", "gc/L1/T1")):
        rec = next(x for x in recs if x["key"] == key)
        fails = [g["gate"] for g in rec["gates"] if counted_failure(g)]
        assert cell.replace(" *", "") == (",".join(g for g in pooled.GATES if g in fails) or "none"), (cell, fails)
    assert "| 2 | 4 |" not in cg  # a task with one audited kernel (or none) is not a cross-GPU task


def _copy_results(src, dst):
    shutil.copy(src, dst)
    shutil.copy(src.replace(".jsonl", ".key"), dst.replace(".jsonl", ".key"))
    os.chmod(dst.replace(".jsonl", ".key"), 0o600)
    return dst


def test_missing_duplicated_stale_rows_exit_1_and_say_which(audited, tmp_path):
    d, corpora, results = audited
    out = tmp_path / "pooled.kgate.jsonl"
    # Without the second shard of gb: exactly its rows are missing.
    r = _merge(corpora, [results[0], results[1], results[3]], out)
    shard1 = sorted(x["key"] for x in read_results(results[2]))
    assert r.returncode == 1, r.stdout + r.stderr
    assert sorted(l.split()[1] for l in r.stdout.splitlines() if l.startswith("missing:")) == shard1
    assert "INCOMPLETE" in r.stdout
    man = json.load(open(pooled.manifest_path(str(out))))
    assert man["complete"] is False and man["per_corpus"]["gb"]["missing"] == len(shard1)
    assert len(read_jsonl(out)) == 9 - len(shard1)

    # A different record of one row, signed in a second results file: duplicated, left out, exit 1.
    dup = _copy_results(results[0], str(tmp_path / "dup.kgate.jsonl"))
    key = load_key(dup, create=False)
    t2 = next(x for x in read_jsonl(dup) if x["key"] == "ga/L1/T2")
    changed = sign(dict(t2, written_at=t2["written_at"] + 10, message="run again"), key)
    with open(dup, "w") as f:
        f.write(json.dumps(changed) + "\n")
    r = _merge(corpora, results + [dup], out)
    assert r.returncode == 1
    dups = [l for l in r.stdout.splitlines() if l.startswith("duplicated:")]
    assert len(dups) == 1 and "ga/L1/T2" in dups[0] and "ra.kgate.jsonl" in dups[0] and "dup.kgate.jsonl" in dups[0]
    assert "ga/L1/T2" not in {x["key"] for x in read_jsonl(out)}
    # --newest-wins takes the newer one and says so.
    r = _merge(corpora, results + [dup], out, "--newest-wins")
    assert r.returncode == 0, r.stdout
    assert "newest wins: ga/L1/T2" in r.stdout
    assert next(x for x in read_jsonl(out) if x["key"] == "ga/L1/T2")["message"] == "run again"
    # The same record copied into two files is one record, not a duplicate.
    same = _copy_results(results[0], str(tmp_path / "same.kgate.jsonl"))
    r = _merge(corpora, results + [same], out)
    assert r.returncode == 0 and "duplicated:" not in r.stdout, r.stdout

    # A corpus line changed since its row was audited: that row's record is stale.
    sub = tmp_path / "changed"
    sub.mkdir()
    lines = open(corpora[2]).read().splitlines()
    row = json.loads(lines[1])
    lines[1] = json.dumps(dict(row, score_default="2.0"))
    changed_corpus = str(sub / "gc.jsonl")
    open(changed_corpus, "w").write("\n".join(lines) + "\n")
    r = _merge([corpora[0], corpora[1], changed_corpus], results, out)
    assert r.returncode == 1
    stale = [l for l in r.stdout.splitlines() if l.startswith("stale:")]
    assert len(stale) == 1 and stale[0].startswith("stale: gc/L1/T2 in rc.kgate.jsonl")
    # A record of the changed line in another results file: the row is done, the old record is history.
    rerun = _copy_results(results[3], str(tmp_path / "rerun.kgate.jsonl"))
    old = next(x for x in read_jsonl(rerun) if x["key"] == "gc/L1/T2")
    new_sha = next(r.sha for r in __import__("kgate.corpus").corpus.read_rows(changed_corpus) if r.key == "gc/L1/T2")
    with open(rerun, "w") as f:
        f.write(json.dumps(sign(dict(old, sha=new_sha), load_key(rerun, create=False))) + "\n")
    r = _merge([corpora[0], corpora[1], changed_corpus], results + [rerun], out)
    assert r.returncode == 0, r.stdout
    man = json.load(open(pooled.manifest_path(str(out))))
    assert man["complete"] and man["stale"] == [] and man["stale_with_a_fresh_record"] == 1
    assert next(x for x in read_jsonl(out) if x["key"] == "gc/L1/T2")["merged_from"] == "rerun.kgate.jsonl"


def test_bad_input_exits_2_with_one_line_each_and_writes_nothing(audited, tmp_path):
    d, corpora, results = audited
    out = tmp_path / "pooled.kgate.jsonl"
    # A record edited after it was signed (its classification made clean).
    bad = _copy_results(results[0], str(tmp_path / "edited.kgate.jsonl"))
    recs = read_jsonl(bad)
    target = next(i for i, x in enumerate(recs) if x.get("classification") != "clean" and x["status"] == "ok")
    recs[target]["classification"] = "clean"
    with open(bad, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in recs))
    r = _merge(corpora, [bad] + results[1:], out)
    assert r.returncode == 2, r.stdout + r.stderr
    errs = r.stderr.strip().splitlines()
    assert errs == [f"python -m kgate merge: error: results {bad}:{target + 1}: record {recs[target]['key']} has no "
                    f"valid MAC under {bad.replace('.jsonl', '.key')} (edited, forged, or signed with another key)"]
    assert not out.exists()
    # A record of a row in no corpus given (gc left out), a results file without its key, a file that is not there.
    os.unlink(bad.replace(".jsonl", ".key"))
    r = _merge(corpora[:2], results + [bad, str(tmp_path / "nope.jsonl"), str(tmp_path)], out)
    assert r.returncode == 2
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 1 + 1 + 1 + 2, errs  # nope, a folder, bad's key, rc's two rows
    assert any(f"{tmp_path}: not a regular file" in e for e in errs)
    assert any("nope.jsonl: no such file" in e for e in errs)
    assert any("edited.kgate.jsonl: no key file" in e for e in errs)
    assert sum("is not a row of any corpus given (ga, gb)" in e for e in errs) == 2
    # A compile record (signed, but not a row record) given as results.
    comp = _copy_results(results[0], str(tmp_path / "comp.kgate.jsonl"))
    with open(comp, "w") as f:
        f.write(json.dumps(sign({"type": "compile", "key": "ga/L1/T1", "status": "ok"},
                                load_key(comp, create=False))) + "\n")
    r = _merge(corpora, results[1:] + [comp], out)
    assert r.returncode == 2 and "a compile record, not a row record" in r.stderr, r.stderr
    assert not out.exists()
    # A pooled view edited after the merge: the tables refuse it.
    assert _merge(corpora, results, out).returncode == 0
    # The pooled view among the results (a glob took it in), or a copy of it: refused.
    r = _merge(corpora, results + [str(out)], out)
    assert r.returncode == 2 and "is the pooled view this merge writes" in r.stderr, r.stderr
    again = _copy_results(str(out), str(tmp_path / "again.kgate.jsonl"))
    r = _merge(corpora, results + [again], tmp_path / "other" / "pooled.kgate.jsonl")
    assert r.returncode == 2 and r.stderr.count("comes from a pooled view") == 9, r.stderr
    assert run_cli("pool", "--pooled", str(out)).returncode == 0
    text = open(out).read()
    assert '"status": "ok"' in text
    open(out, "w").write(text.replace('"status": "ok"', '"status": "row_timeout"', 1))
    r = run_cli("pool", "--pooled", str(out))
    assert r.returncode == 2 and "no valid MAC" in r.stderr, r.stderr



def _keyless(src, dst, edit=lambda rec: rec):
    """A results file as committed: its records (edited by `edit`) without the key that signed them."""
    with open(dst, "w") as f:
        f.write("".join(json.dumps(edit(x)) + "\n" for x in read_jsonl(src)))
    return dst


def test_results_without_their_key_merge_only_when_vouched_for(audited, tmp_path):
    # Committed results travel without their key: the merge refuses them unless --adopt-unsigned vouches.
    d, corpora, results = audited
    admission = {"estimate_bytes": 1 << 30, "peak_bytes": 1 << 29, "beside": 3}
    bare = [_keyless(results[0], str(tmp_path / "ra.kgate.jsonl"), lambda x: dict(x, gpu=admission)),
            _keyless(results[1], str(tmp_path / "rb0.kgate.jsonl"))]
    out = tmp_path / "p" / "pooled.kgate.jsonl"
    r = _merge(corpora, bare + results[2:], out)
    assert r.returncode == 2 and r.stderr.count("no key file") == 2, r.stderr
    assert "--adopt-unsigned vouches" in r.stderr and not out.exists()
    r = _merge(corpora, bare + results[2:], out, "--adopt-unsigned")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l for l in r.stdout.splitlines() if l.startswith("vouched for:")] == [
        f"vouched for: {n} has no key file beside it, so its records were taken as they stand (--adopt-unsigned), "
        "not checked against a MAC" for n in ("ra.kgate.jsonl", "rb0.kgate.jsonl")]
    man = json.load(open(pooled.manifest_path(str(out))))
    assert man["vouched"] == ["ra.kgate.jsonl", "rb0.kgate.jsonl"] and man["options"]["adopt_unsigned"] is True
    # The pooled record keeps the record's own `gpu` (its GPU-memory admission); the stem is `corpus`.
    recs, man = pooled.load_pooled(str(out))
    ga = [x for x in recs if x["corpus"] == "ga"]
    assert len(ga) == 3 and all(x["gpu"] == admission for x in ga)
    assert pooled.crossgpu(recs, permutations=0)["files"] == ["ga", "gb", "gc"]
    # Every table says which files were vouched for, and the recompute command carries the flag.
    for text in (pooled.pool_text(recs, man, str(out)), pooled.headline_text(recs, man, str(out))):
        assert "the records of ra.kgate.jsonl, rb0.kgate.jsonl vouched for, not MAC-checked" in text
        assert "--out " + str(out) + " --adopt-unsigned`" in text
    again = _merge(corpora, bare + results[2:], out, "--adopt-unsigned")
    assert again.returncode == 0 and "unchanged (nothing recomputed)" in again.stdout
    # A file with its key is still checked: an edited record in it is refused, flag or not.
    edited = _copy_results(results[3], str(tmp_path / "rc.kgate.jsonl"))
    lines = "".join(json.dumps(dict(x, classification="clean")) + "\n" for x in read_jsonl(edited))
    open(edited, "w").write(lines)
    r = _merge(corpora, bare + results[2:3] + [edited], out, "--adopt-unsigned")
    assert r.returncode == 2 and "has no valid MAC" in r.stderr, r.stderr
    # A vouched file is still read as results: a superseded record in it is refused.
    (tmp_path / "sup").mkdir()
    sup = _keyless(results[3], str(tmp_path / "sup" / "rc.kgate.jsonl"), lambda x: dict(x, superseded_because="r"))
    r = _merge(corpora, bare + results[2:3] + [sup], out, "--adopt-unsigned")
    assert r.returncode == 2 and "is a superseded record" in r.stderr, r.stderr


def test_corpus_order_holds_after_an_unchanged_merge_and_a_whole_missing_file_is_one_line(audited, tmp_path):
    d, corpora, results = audited
    out = tmp_path / "pooled.kgate.jsonl"
    # gc first, and a fourth corpus (gd, a copy of ga's rows) that no results file covers.
    gd = str(tmp_path / "gd.jsonl")
    shutil.copy(corpora[0], gd)
    order = [corpora[2], corpora[0], corpora[1], gd]
    for attempt in ("wrote", "unchanged"):
        r = _merge(order, results, out)
        assert r.returncode == 1 and r.stdout.count(attempt) == 1, r.stdout
        missing = [l for l in r.stdout.splitlines() if l.startswith("missing:")]
        assert missing == ["missing: every row of gd (3 rows): no results file given has a record of it "
                           "(not audited yet?)"]
        table = [l.split("|")[1].strip() for l in r.stdout.splitlines() if l.startswith("| g")]
        assert table == ["gc", "ga", "gb", "gd"]
        recs, man = pooled.load_pooled(str(out))
        assert man["missing"] == ["gd/L1/T1", "gd/L1/T2", "gd/L1/T3"]  # the manifest keeps every row
        rows = [l.split("|")[1].strip() for l in pooled.pool_text(recs, man, str(out)).splitlines()
                if l.startswith("| g") or l.startswith("| pooled")]
        assert rows[:5] == ["gc", "ga", "gb", "gd", "pooled"]
        # The corpus says what the missing rows hold: gd's three lines each have a candidate, gb's L2/T4 has none.
        text = pooled.pool_text(recs, man, str(out))
        assert "| gd | 3 | 0 | 0 | 0 | 0 | - | 3 (3 with a candidate) |" in text
        pooled_row = next(l for l in text.splitlines() if l.startswith("| pooled | 12 |"))
        assert pooled_row.endswith("| 3 (3 with a candidate) |")
        assert "| level | task | gc | ga | gb | gd |" in pooled.crossgpu_text(recs, man, permutations=0)


# ---- cross-GPU on constructed records with a known answer ----------------------------------------------

def _record(gpu, level, task, fails, code):
    gates = [{"gate": g, "verdict": "FAIL" if g in fails else "PASS", "counted": True} for g in pooled.GATES]
    return {"key": f"{gpu}/L{level}/T{task}", "corpus": gpu, "level": level, "task": task, "status": "ok",
            "classification": "broken" if "nan" in fails else "violation" if fails else "clean", "gates": gates,
            "code_sha": code}


def test_crossgpu_when_failures_follow_the_task():
    # Six tasks, each with its own failing-gate set (task 6: none), the same on every GPU; other sources.
    sets = [{"nan"}, {"oracle"}, {"stream", "layout"}, {"determinism"}, {"coverage"}, set()]
    recs = [_record(gpu, 1, t + 1, s, f"{gpu}{t}") for gpu in ("a", "b", "c") for t, s in enumerate(sets)]
    s = pooled.crossgpu(recs, permutations=400)
    assert s["same_pairs"] == 3 * 6 and s["random_pairs"] == 3 * 6 * 5
    assert s["same_jaccard"] == 1.0 and s["same_exact"] == 1.0 and s["same_class"] == 1.0
    # Random pairs: no two tasks share a gate, so Jaccard 0 for every pair.
    assert s["random_jaccard"] == 0.0
    assert s["p_value"] < 0.02  # a shuffle rarely restores the pairing: 6 tasks, 3 files
    # random: per pair of files, task 1 of either file against the 5 other tasks of the other: 3 x 10
    assert s["per_gate"]["nan"] == {"same": (3, 3), "random": (0, 30)}
    # One task whose two kernels are byte-identical: left out of the pairs, counted apart.
    recs[6]["code_sha"] = recs[0]["code_sha"]  # b's task 1 = a's task 1
    s2 = pooled.crossgpu(recs, permutations=10)
    assert s2["identical_pairs"] == 1 and s2["same_pairs"] == 17
    assert s2["twin_pairs"] == 1 and s2["twin_exact"] == 1.0
    assert s2["random_pairs"] == s["random_pairs"]  # the twins' tasks are the same: no random pair is lost
    text = pooled.crossgpu_text(recs, {"per_corpus": {"a": {}, "b": {}, "c": {}}}, permutations=5)
    assert "| 1 | 1 | nan * | nan * | nan * | 2 of 3 |" in text


def test_crossgpu_when_failures_follow_the_generator():
    # Every kernel of a file fails that file's gate whatever the task: a and c fail nan, b fails oracle.
    per_file = {"a": {"nan"}, "b": {"oracle"}, "c": {"nan"}}
    recs = [_record(gpu, 1, t, per_file[gpu], f"{gpu}{t}") for gpu in per_file for t in range(1, 6)]
    s = pooled.crossgpu(recs, permutations=200)
    # Pairs a-c agree (Jaccard 1), a-b and b-c do not (0), for same-task and random pairs alike.
    assert s["same_jaccard"] == pytest.approx(1 / 3) and s["random_jaccard"] == pytest.approx(1 / 3)
    assert s["same_class"] == pytest.approx(1 / 3)
    assert s["p_value"] == 1.0  # every shuffle gives the same value: the task carries no information
    # Text: the per-task table and the summary numbers as computed.
    text = pooled.crossgpu_text(recs, {"per_corpus": {"a": {}, "b": {}, "c": {}}}, permutations=20)
    assert "| 1 | 3 | nan * | oracle | nan * | 3 of 3 |" in text
    assert "| same task | 15 | 0.333 |" in text and "| random (different tasks) | 60 | 0.333 |" in text
    # A task audited on one GPU only is not in the table; one not audited shows its status.
    recs.append(_record("a", 2, 9, set(), "x"))
    recs.append(dict(_record("b", 2, 9, set(), "y"), status="row_timeout"))
    text = pooled.crossgpu_text(recs, {"per_corpus": {"a": {}, "b": {}, "c": {}}}, permutations=5)
    assert "| 2 | 9 |" not in text


def test_jaccard_of_empty_sets_is_agreement():
    assert pooled.jaccard(frozenset(), frozenset()) == 1.0
    assert pooled.jaccard(frozenset({"nan"}), frozenset()) == 0.0
    assert pooled.jaccard(frozenset({"nan", "inf"}), frozenset({"nan"})) == 0.5


def test_every_definition_is_written_once_in_the_docs():
    docs = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "audit.md")).read()
    for name, text in pooled.DEFINITIONS.items():
        assert docs.count(f"| {name} | {text} |") == 1, name


# ---- the committed pooled outputs --------------------------------------------------------------------------

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
POOLED = os.path.join(REPO, "results", "pooled-2026-12-07d")


def _corpus_dir():
    for d in (os.environ.get("KGATE_CORPUS_DIR"), os.path.join(REPO, "..", "shared", "corpus", "cuda-l1")):
        if d and all(os.path.isfile(os.path.join(d, f"{s}.jsonl")) for s in ("h100", "a100", "h20", "l40", "3090")):
            return d
    return None


@pytest.mark.skipif(_corpus_dir() is None, reason="the CUDA-L1 corpus is not here (KGATE_CORPUS_DIR)")
def test_committed_pool_is_what_scripts_audit_pool_makes(tmp_path):
    # Every number in the committed folder comes from the committed records through the committed command.
    import subprocess
    import sys
    import kgate
    site = os.path.dirname(os.path.dirname(os.path.abspath(kgate.__file__)))  # the built package these tests import
    env = dict(os.environ, KGATE_CORPUS_DIR=_corpus_dir(), PYTHON=sys.executable, AUDIT_POOL_NICE="0",
               KGATE_PYTHONPATH=site)
    r = subprocess.run([os.path.join(REPO, "scripts", "audit-pool"), str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr  # complete: every row of the five files has a record
    made = sorted(os.listdir(tmp_path))
    assert made == sorted(f for f in os.listdir(POOLED) if f != "README.md")
    for f in made:
        assert open(os.path.join(tmp_path, f), "rb").read() == open(os.path.join(POOLED, f), "rb").read(), f
    merge = open(os.path.join(POOLED, "merge.txt")).read()
    assert "missing: every row" not in merge and "complete: every row has exactly one current record" in merge
    for stem in ("h100", "a100", "h20", "l40", "3090"):
        assert f"| {stem} | 250 | 250 | 0 | 0 | 0 |" in merge, stem


@pytest.mark.skipif(_corpus_dir() is None, reason="the CUDA-L1 corpus is not here (KGATE_CORPUS_DIR)")
def test_audit_pool_without_the_engine_exits_2_in_one_line_and_writes_nothing(tmp_path):
    import subprocess
    import sys
    out = tmp_path / "out"
    env = dict(os.environ, KGATE_CORPUS_DIR=_corpus_dir(), PYTHON=sys.executable, KGATE_PYTHONPATH=str(tmp_path))
    r = subprocess.run([os.path.join(REPO, "scripts", "audit-pool"), str(out)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and str(tmp_path) in r.stderr and "kgate._core" not in r.stdout
    assert not out.exists()
