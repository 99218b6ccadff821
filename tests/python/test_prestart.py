"""Row jobs started ahead (scheduler.run_jobs' prestart, rowjob's await_go): a verify job next in the queue is
started before a slot is its own; its row job starts the candidate's worker process (interpreter and imports)
and waits for the driver's go, which comes when the job is admitted. Nothing of the row counts before the go:
not the limits, not its time, not the attempts journal; one never given its go is killed and not recorded."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import control_rows, job_mark, load, read_jsonl, write_corpus

def test_the_next_rows_start_ahead_and_run_only_on_their_go(workdir, fake_rowjob, marks):
    from kgate.scheduler import Job, run_jobs
    python, d = fake_rowjob, marks
    jobs = [Job(f"r{i}", "verify", {"key": f"r{i}", "marks": str(d), "sleep": 1.0}, 60) for i in range(4)]
    started, finished = {}, {}

    def on_start(job):
        started[job.key] = time.monotonic()

    def on_finish(job, final, status, lines, tail):
        finished[job.key] = time.monotonic()
        assert status == "ok" and final["status"] == "ok", (status, tail)
        assert time.monotonic() - job.started < 3.0  # its time counts from its go, not from its start ahead

    counts = run_jobs(jobs, {"verify": 1, "total": 1}, on_finish, on_start=on_start, work_dir=str(workdir / "w"),
                      python=python, prestart=2)
    assert counts["ok"] == 4, counts
    for i in (1, 2, 3):
        k, before = f"r{i}", f"r{i - 1}"
        ahead, go = job_mark(d, k, "ahead"), job_mark(d, k, "go")
        assert ahead is not None and ahead < finished[before], (k, ahead, finished)  # started ahead ...
        assert go >= finished[before] - 0.01 and started[k] >= finished[before] - 0.01, (k, go, finished)  # ...ran after
    assert job_mark(d, "r0", "ahead") is None  # r0 had its slot at once: started as always
    # Never more than `prestart` ahead: r3 is started ahead only once r1 has had its go.
    assert job_mark(d, "r3", "ahead") >= job_mark(d, "r1", "go") - 0.01


def test_rows_started_ahead_that_never_get_their_go_are_killed_and_not_recorded(workdir, fake_rowjob, marks):
    from kgate.scheduler import Job, run_jobs
    python, d = fake_rowjob, marks
    jobs = [Job(f"r{i}", "verify", {"key": f"r{i}", "marks": str(d), "sleep": 3.0}, 60) for i in range(3)]
    seen = []
    counts = run_jobs(jobs, {"verify": 1, "total": 1}, lambda j, *a: seen.append(j.key),
                      work_dir=str(workdir / "w"), python=python, prestart=2, budget_s=2.5, start_margin_s=2.0)
    assert seen == [] and counts["cut_by_budget"] == 1 and counts["not_started"] == 2, counts
    assert job_mark(d, "r1", "ahead") is not None and job_mark(d, "r1", "go") is None
    for j in jobs[1:]:
        assert j.proc is None  # their processes were ended (drop_ahead), nothing of them is left


def test_a_row_job_started_ahead_starts_its_worker_then_waits_for_the_go(workdir):
    from kgate.scheduler import _children
    c = next(c for c in load("numpy") if c["name"] == "correct_softmax")
    spec = {"mode": "verify", "key": "t/1", "sha": "x", "fw": "numpy", "seed": "00000000000000c0",
            "gates": ["oracle"], "call_timeout": 20, "await_go": True,
            "row": {"level_id": "control", "task_id": "t", "ref_code": c["task"], "custom_code": c["candidate"]}}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def start():
        p = subprocess.Popen([sys.executable, "-m", "kgate.kernelbench.rowjob"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(workdir), env=env)
        p.stdin.write((json.dumps(spec) + "\n").encode())
        p.stdin.flush()
        end = time.monotonic() + 60
        while not _children(p.pid) and time.monotonic() < end:
            time.sleep(0.05)
        return p

    p = start()
    kids = _children(p.pid)
    assert kids, "no worker started while the row waited"
    time.sleep(0.5)
    assert p.poll() is None  # still waiting for its go
    p.stdin.write(b"go\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=300)  # closes stdin
    lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    assert lines and lines[-1]["type"] == "row" and lines[-1]["status"] == "ok", err.decode()[-3000:]
    assert lines[-1]["worker_started_ahead"] is True and lines[-1]["worker_restarts"] == 0, lines[-1]
    # No go (the driver closed its end): no record, and the worker is gone with the row job.
    p = start()
    kids = _children(p.pid)
    out, err = p.communicate(timeout=60)  # closes stdin: no go
    assert out.strip() == b"", out
    time.sleep(0.5)
    assert all(not os.path.exists(f"/proc/{k}") or open(f"/proc/{k}/stat").read().split()[2] == "Z"
               for k in kids), kids


def test_an_audit_with_rows_started_ahead_records_every_row_as_without(workdir):
    from kgate import audit as audit_mod
    from kgate.results import read_results
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_softmax", "crashes", "modifies_input",
                                                             "correct_linear"]))
    out = {}
    for n in (0, 2):
        path = str(workdir / f"out{n}.jsonl")
        counts = audit_mod.audit(corpus, results_path=path, fw="numpy", jobs=1, seed=5, call_timeout=4,
                                 quiet=True, work_dir=str(workdir / f"w{n}"), ext_cache=str(workdir / "ext"),
                                 prestart=n)
        assert counts["finished_total"] == 4, counts
        out[n] = {r["key"]: (r["status"], r["classification"]) for r in read_results(path)}
    assert out[0] == out[2], out
    starts = [e for e in read_jsonl(workdir / "out2.attempts.jsonl") if e.get("event") == "start"]
    assert len(starts) == 4, starts  # journaled at the go only: one attempt per row
    recs = {r["key"]: r for r in read_results(str(workdir / "out2.jsonl"))}
    assert sum(1 for r in recs.values() if r.get("worker_started_ahead")) >= 2, recs  # one row at a time: the rest
    assert not any(r.get("worker_started_ahead") for r in read_results(str(workdir / "out0.jsonl")))
