"""Row jobs forked from the fork server (kgate/forkserver.py) give exactly the records plain row-job processes
give (same seed, same verdicts and evidence), the audit's counts say which kind ran, and a server that cannot
start costs nothing but its speed: the audit falls back to plain processes and says why."""
import json
import os
import sys

import pytest

from conftest import PKG_ROOT, control_rows, read_jsonl, run_cli, write_corpus

FAST = ("--fw", "numpy", "--jobs", "2", "--call-timeout", "4", "--seed", "77", "--row-timeout", "120")


def _gates(rec):
    return {g["gate"]: (g.get("verdict"), g.get("summary")) for g in rec.get("gates", [])}


def _audit(workdir, monkeypatch, name, env_value, threads=None):
    # The same corpus file name in both runs: a row's key (hence its seed) starts with the file's stem.
    d = workdir / name
    d.mkdir()
    corpus = write_corpus(d / "c.jsonl", control_rows(["modifies_input", "correct_softmax", "crashes"]))
    monkeypatch.setenv("KGATE_FORKSERVER", env_value)
    if threads is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
    r = run_cli("audit", corpus, "--results", str(d / "out.jsonl"), *FAST)
    assert r.returncode == 0, r.stderr
    return {x["task"]: x for x in read_jsonl(d / "out.jsonl")}, r.stderr


def test_forked_row_jobs_give_the_records_plain_processes_give(workdir, monkeypatch):
    forked, err_f = _audit(workdir, monkeypatch, "forked", "1")
    plain, err_p = _audit(workdir, monkeypatch, "plain", "0", threads="3")
    assert "'row_jobs'" in err_f and "'forkserver'" in err_f and "'ok': True" in err_f, err_f[-2000:]
    assert "'row_jobs'" not in err_p
    assert set(forked) == set(plain) and len(forked) == 3
    for task in forked:
        a, b = forked[task], plain[task]
        assert a["seed"] == b["seed"]
        assert a["classification"] == b["classification"], (task, a["classification"], b["classification"])
        assert _gates(a) == _gates(b), task
    assert any(r["classification"] == "clean" for r in forked.values())
    assert any(r["classification"] == "broken" for r in forked.values())
    # Each record places its time (phases, wall seconds) and says how many host threads its libraries had:
    # the scheduler's share of the CPUs when the caller set none, the caller's value when it did.
    from kgate.scheduler import host_threads
    cpus = len(os.sched_getaffinity(0))
    timed = [r for r in list(forked.values()) + list(plain.values()) if r.get("status") == "ok"]
    assert len(timed) >= 4, [r.get("status") for r in timed]
    for r in timed:
        assert {"start", "build", "engine", "close"} <= set(r["phases"]), r["phases"]
        assert all(v >= 0 for v in r["phases"].values())
        assert sum(r["phases"].values()) <= r["seconds"] + 0.5, (r["phases"], r["seconds"])
    assert all(1 <= int(r["host_threads"]) <= cpus for r in forked.values() if "host_threads" in r)
    assert all(r["host_threads"] == "3" for r in plain.values() if "host_threads" in r)
    assert any("host_threads" in r for r in plain.values())


def test_host_threads_share_out_the_cpus():
    from kgate.scheduler import host_threads
    cpus = len(os.sched_getaffinity(0))
    assert host_threads(1) == cpus
    assert host_threads(0) == cpus  # no jobs counts as one
    assert host_threads(cpus) == 1 and host_threads(10 * cpus + 7) == 1
    assert host_threads(2) == max(1, cpus // 2)


def test_a_server_that_cannot_start_falls_back_to_plain_processes(workdir):
    from kgate.forkserver import ForkServer
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    with pytest.raises(RuntimeError, match="preload failed"):
        ForkServer(sys.executable, env, str(workdir), "no_such_framework", str(workdir / "fs.log"))
    # Through the scheduler: the same refusal, then every job runs as a plain process and finishes.
    from kgate.scheduler import Job, run_jobs
    spec = {"mode": "compile", "key": "k", "sha": "s", "fw": "numpy",
            "row": json.loads(open(write_corpus(workdir / "c.jsonl", control_rows(["correct_softmax"]))).readline())}
    done, notes = [], []
    counts = run_jobs([Job("k", "compile", spec, 120)], {"compile": 1, "total": 1},
                      lambda job, final, status, lines, tail: done.append((final, status)),
                      work_dir=str(workdir / "w"), env=env, preload="no_such_framework", notes=notes)
    assert counts["ok"] == 1 and done[0][1] == "ok" and done[0][0]["type"] == "compile", (counts, done)
    assert any(n.get("event") == "forkserver_failed" and "preload failed" in n["why"] for n in notes), notes
