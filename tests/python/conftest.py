"""Shared helpers: small numpy corpora built from the positive controls (no torch anywhere)."""
import json
import os
import subprocess
import sys

import pytest

from kgate.controls import load

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
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
