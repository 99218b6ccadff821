"""Shared helpers: small numpy corpora built from the positive controls (no torch anywhere)."""
import json
import os
import subprocess
import sys

import pytest

from kgate.controls import load
from kgate.results import open_records

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__import__("kgate").__file__)))


def control_rows(names):
    cs = {c["name"]: c for c in load("numpy")}
    return [{"level_id": 1 + i % 3, "task_id": i + 1, "ref_code": cs[n]["task"], "custom_code": cs[n]["candidate"],
             "score_default": "1.0"} for i, n in enumerate(names)]


def write_corpus(path, rows, extra_lines=()):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return str(path)


def run_cli(*args, timeout=600, **kw):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "kgate", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, **kw)


def read_jsonl(path):
    """Every line of a records file as it stands (X.jsonl or X.jsonl.gz: kgate.results.open_records)."""
    with open_records(str(path), text=True) as f:
        return [json.loads(l) for l in f if l.strip()]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# A stand-in row job for scheduler.run_jobs (given as its `python`), so scheduler tests need neither torch, a GPU
# nor the engine. It reads its spec (one JSON line) and, by the spec's keys:
# - await_go: started ahead (prestart): writes MARKS/KEY.ahead, then waits for the driver's "go" line (exits
#   without a record when stdin closes first);
# - marks: a folder where it writes KEY.ahead and KEY.go, each holding time.monotonic() then (see job_mark);
# - dir, gpu: a child of the row job (as the worker is) "holds" gpu bytes, written to DIR/PID for FakeNvml;
# - sleep: seconds it runs (default 0.3); then prints an ok row record.
FAKE_ROWJOB = f"""#!{sys.executable}
import json, os, subprocess, sys, time
spec = json.loads(sys.stdin.readline())
marks = spec.get("marks")
if spec.get("await_go"):
    if marks:
        open(os.path.join(marks, spec["key"] + ".ahead"), "w").write(repr(time.monotonic()))
    if sys.stdin.readline().strip() != "go":
        sys.exit(0)
if marks:
    open(os.path.join(marks, spec["key"] + ".go"), "w").write(repr(time.monotonic()))
child = None
if "gpu" in spec:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with open(os.path.join(spec["dir"], str(child.pid)), "w") as f:
        f.write(str(spec["gpu"]))
time.sleep(spec.get("sleep", 0.3))
if child is not None:
    os.unlink(os.path.join(spec["dir"], str(child.pid)))
    child.kill()
    child.wait()
print(json.dumps({{"type": "row", "key": spec["key"], "status": "ok"}}), flush=True)
"""


@pytest.fixture
def fake_rowjob(workdir):
    """The path of FAKE_ROWJOB, executable, in the test's folder."""
    path = workdir / "fake-rowjob"
    path.write_text(FAKE_ROWJOB)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def marks(workdir):
    """A folder for FAKE_ROWJOB's marks (spec key `marks`)."""
    d = workdir / "marks"
    d.mkdir()
    return d


def job_mark(d, key, what):
    """When the fake row job KEY reached WHAT ("ahead", "go"): its time.monotonic(), or None if it never did."""
    p = d / f"{key}.{what}"
    return float(p.read_text()) if p.exists() else None
