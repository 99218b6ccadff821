"""Packed records (X.jsonl.gz): every reader takes either form through results.open_records, pack() is
deterministic and checks its round trip, and a run resumes a packed file (results.py, "Packed records")."""
import gzip
import json
import os

import pytest

from conftest import control_rows, read_jsonl, run_cli, write_corpus
from kgate import pooled, report
from kgate.results import (Journal, RecordsError, ResultsFile, find_records, load_key, open_records, pack,
                           read_results, records_sha256, unpack_to_resume)

FAST = ["--fw", "numpy", "--call-timeout", "4", "--jobs", "2", "--seed", "1234"]


def _row(key, status="ok", classification="clean", t=1.0):
    return {"type": "row", "key": key, "status": status, "classification": classification, "level": 1, "task": 1,
            "written_at": t, "gates": [{"gate": "baseline", "verdict": "PASS", "summary": "", "seconds": 0.5}]}


def _write(path, rows):
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return str(path)


def test_the_reader_gives_the_same_records_from_either_form(tmp_path):
    rows = [_row("c/L1/T1"), _row("c/L1/T2", "row_timeout", None), _row("c/L1/T1", classification="broken", t=2.0),
            _row("c/L2/T7", classification="violation")]
    plain = _write(tmp_path / "r.kgate.jsonl", rows)
    raw = open(plain, "rb").read()
    before = read_results(plain)
    summary = report.summary_text([plain])
    assert [r["key"] for r in before] == ["c/L1/T2", "c/L1/T1", "c/L2/T7"]  # newest record of a row wins
    assert pack(plain) == plain + ".gz"
    assert not os.path.exists(plain) and find_records(plain) == plain + ".gz"
    for name in (plain, plain + ".gz"):  # either name finds the packed file
        with open_records(name) as f:
            assert f.read() == raw
        with open_records(name, text=True) as f:
            assert [json.loads(line) for line in f] == rows
        assert read_results(name) == before
        assert report.summary_text([name]) == summary  # outputs name the file as its run wrote it
    assert read_jsonl(plain) == rows
    with pytest.raises(FileNotFoundError):
        with open_records(str(tmp_path / "none.jsonl")):
            pass


def test_pack_is_deterministic_and_keeps_no_name_or_time(tmp_path):
    rows = [_row(f"c/L1/T{i}", t=float(i)) for i in range(200)]
    a = _write(tmp_path / "a.jsonl", rows)
    os.makedirs(tmp_path / "b")
    b = _write(tmp_path / "b" / "other-name.jsonl", rows)
    os.chmod(a, 0o640)
    pack(a)
    os.utime(b, (1, 1))
    pack(b)
    blob = open(a + ".gz", "rb").read()
    assert blob == open(b + ".gz", "rb").read()  # same records, same bytes: name and times are not in them
    assert blob[3] == 0 and blob[4:8] == b"\0\0\0\0"  # gzip FLG: no FNAME; MTIME 0
    assert gzip.decompress(blob) == "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    assert os.stat(a + ".gz").st_mode & 0o777 == 0o640
    assert pack(a) is None and pack(a + ".gz") is None  # packed already: nothing to do
    unpack_to_resume(a)
    assert pack(a) == a + ".gz" and open(a + ".gz", "rb").read() == blob  # repacked: the same bytes


def test_pack_refuses_what_it_cannot_vouch_for(tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(json.dumps(_row("c/L1/T1")).encode() + b"\n" + b'{"key": "c/L1/T2", "sta')
    with pytest.raises(RecordsError, match="cut.jsonl: its last line is not whole"):
        pack(str(cut))
    assert cut.exists() and not os.path.exists(str(cut) + ".gz")
    # Both forms with the same records: a pack cut short, finished by the next; with different ones, refused.
    same = _write(tmp_path / "same.jsonl", [_row("c/L1/T1")])
    open(same + ".gz", "wb").write(gzip.compress(open(same, "rb").read()))
    with pytest.raises(RecordsError, match="both exist"):
        read_results(same)
    assert pack(same) == same + ".gz" and not os.path.exists(same)
    other = _write(tmp_path / "other.jsonl", [_row("c/L1/T1")])
    open(other + ".gz", "wb").write(gzip.compress(b"{}\n"))
    with pytest.raises(RecordsError, match="hold different records"):
        pack(other)
    assert os.path.exists(other) and os.path.exists(other + ".gz")


def test_a_packed_file_that_is_not_whole_is_one_line_naming_it(tmp_path, workdir):
    good = _write(tmp_path / "good.kgate.jsonl", [_row(f"c/L1/T{i}") for i in range(50)])
    pack(good)
    blob = open(good + ".gz", "rb").read()
    (tmp_path / "cut.kgate.jsonl.gz").write_bytes(blob[: len(blob) // 2])
    (tmp_path / "junk.kgate.jsonl.gz").write_bytes(b"not gzip at all\n")
    for name in ("cut.kgate.jsonl", "junk.kgate.jsonl.gz"):
        with pytest.raises(RecordsError, match="not a whole gzip file"):
            read_results(str(tmp_path / name))
        r = run_cli("report", str(tmp_path / name))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and name.split(".")[0] + ".kgate.jsonl.gz" in r.stderr
    r = run_cli("report", str(tmp_path / "good.kgate.jsonl"))
    assert r.returncode == 0 and "kgate audit of " + good + ":" in r.stdout, r.stdout + r.stderr


def test_a_writer_resumes_a_packed_file_and_its_side_files(tmp_path):
    path = str(tmp_path / "r.kgate.jsonl")
    key = load_key(path, create=True)
    res = ResultsFile(path, key)
    first = res.put(_row("c/L1/T1"))
    res.put(_row("c/L1/T1", classification="broken"), because="retried")  # one record to the superseded file
    journal = Journal(str(tmp_path / "r.kgate.attempts.jsonl"), key)
    aid = journal.start("c/L1/T2", "sha", "verify", False)
    for f in ("r.kgate.jsonl", "r.kgate.superseded.jsonl", "r.kgate.attempts.jsonl"):
        pack(str(tmp_path / f))
    assert sorted(os.listdir(tmp_path)) == ["r.kgate.attempts.jsonl.gz", "r.kgate.jsonl.gz", "r.kgate.key",
                                            "r.kgate.superseded.jsonl.gz"]
    os.chmod(path + ".gz", 0o644)  # as a git checkout leaves it
    again = ResultsFile(path + ".gz", key)  # either name
    assert again.path == path and not os.path.exists(path + ".gz")
    assert os.stat(path).st_mode & 0o777 == 0o640  # closed to others, as every file the driver writes
    assert again.done("c/L1/T1") and again.records["c/L1/T1"]["classification"] == "broken"
    again.put(_row("c/L1/T2"))
    again.put(_row("c/L1/T2", classification="violation"), because="retried")
    assert [r["key"] for r in read_results(path)] == ["c/L1/T1", "c/L1/T2"]
    sup = read_jsonl(tmp_path / "r.kgate.superseded.jsonl")  # unpacked, then appended to
    assert [(r["key"], r["superseded_because"]) for r in sup] == [("c/L1/T1", "retried"), ("c/L1/T2", "retried")]
    assert sup[0]["written_at"] == first["written_at"]
    resumed = Journal(str(tmp_path / "r.kgate.attempts.jsonl"), key)
    assert [s["key"] for s in resumed.unfinished("c/L1/T2", "sha")] == ["c/L1/T2"] and aid in resumed.starts
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".gz")]


def test_resuming_with_both_forms_present_is_refused(tmp_path, workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_softmax"]))
    _write(workdir / "out.jsonl", [_row("c/L1/T1")])
    open(workdir / "out.jsonl.gz", "wb").write(gzip.compress(b""))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "out.jsonl and out.jsonl.gz both exist" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_audit_resumes_from_packed_records(workdir):
    names = ["correct_softmax", "crashes", "nan_masked"]
    corpus = write_corpus(workdir / "c.jsonl", control_rows(names))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    first = read_jsonl(workdir / "out.jsonl")
    assert len(first) == 3
    r = run_cli("pack", *sorted(f for f in os.listdir(workdir) if f.endswith(".jsonl")))  # the corpus too
    assert r.returncode == 0 and "packed" in r.stdout, r.stdout + r.stderr
    assert not [f for f in os.listdir(workdir) if f.endswith(".jsonl")], os.listdir(workdir)
    for cmd in ("report", "sweep", "agreement"):
        assert run_cli(cmd, "out.jsonl.gz").returncode == 0
    r = run_cli("audit", "c.jsonl.gz", "--results", "out.jsonl.gz", *FAST)  # both packed: read, then resumed
    assert r.returncode == 0, r.stderr
    assert read_jsonl(workdir / "out.jsonl") == first  # a finished file: nothing ran again
    assert not os.path.exists(workdir / "out.jsonl.gz") and os.path.exists(workdir / "c.jsonl.gz")


def test_pack_command_leaves_glr_training_logs_plain(tmp_path):
    (tmp_path / "a" / "run").mkdir(parents=True)
    _write(tmp_path / "a" / "x.kgate.jsonl", [_row("c/L1/T1")])
    _write(tmp_path / "a" / "run" / "metrics.jsonl", [{"step": 10, "loss": 1.0}])
    (tmp_path / "a" / "notes.txt").write_text("kept\n")
    r = run_cli("pack", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr
    assert sorted(os.path.relpath(os.path.join(d, f), tmp_path) for d, _, fs in os.walk(tmp_path) for f in fs) == [
        "a/notes.txt", "a/run/metrics.jsonl", "a/x.kgate.jsonl.gz"]
    assert "1 file(s) packed" in r.stdout
    r = run_cli("pack", str(tmp_path / "a"))
    assert r.returncode == 0 and "0 file(s) packed" in r.stdout


def test_pooled_inputs_are_named_and_hashed_as_written(tmp_path):
    # The pooled view names each results file by its plain name and hashes its records unpacked, so packing the
    # committed records changes no pooled output (scripts/audit-pool, tests/test_pooled.py's committed check).
    corpus = _write(tmp_path / "c.jsonl", [{"level_id": 1, "task_id": 1, "ref_code": "x", "custom_code": "y"}])
    res = _write(tmp_path / "r.kgate.jsonl", [_row("c/L1/T1")])
    before = pooled._inputs([corpus], [res])
    sha = records_sha256(res)
    pack(res)
    pack(corpus)
    assert pooled._inputs([corpus], [res + ".gz"]) == before
    assert before[1] == {"kind": "results", "name": "r.kgate.jsonl", "sha256": sha}
