"""Runs jobs, each in its own process (group), a few at a time, with a time limit each and a budget overall.

A job is `python -m kgate.kernelbench.rowjob` fed a JSON spec on stdin; it answers with JSON lines on stdout ("gate",
"gate_start", and one final "row" or "compile" record). A job that crashes or outlives its limit is killed with
its whole process group (the candidate's worker included) and costs that one row; what it reported before is
kept. When the overall budget runs out, running jobs are killed and *not* recorded, so a rerun redoes them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Job:
    key: str
    kind: str                      # "compile" or "verify"
    spec: dict
    timeout_s: float
    after: str | None = None       # key of the compile job (same row) that must finish first
    # filled while running
    proc: subprocess.Popen | None = None
    started: float = 0.0
    lines: list = field(default_factory=list)
    log_path: str = ""
    cancelled: bool = False        # set by on_finish of its compile job when that failed


class Progress:
    """A one-line progress report per finished job, plus a bar when stderr is a terminal."""

    def __init__(self, total: int, label: str, stream=None):
        self.total, self.label, self.done = total, label, 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def step(self, note: str, running: int):
        self.done += 1
        el = time.monotonic() - self.t0
        rate = self.done / el * 60 if el > 0 else 0.0
        left = (self.total - self.done) / (self.done / el) if self.done and el > 0 else float("nan")
        width = 24
        filled = int(width * self.done / max(1, self.total))
        bar = "#" * filled + "." * (width - filled)
        msg = (f"[{self.label} {bar}] {self.done}/{self.total} {rate:5.1f}/min eta {left:5.0f}s "
               f"running {running}: {note}")
        print(msg, file=self.stream, flush=True)


def _reader(job: Job):
    assert job.proc and job.proc.stdout
    for raw in job.proc.stdout:
        try:
            job.lines.append(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass  # the rowjob writes only JSON here; anything else is noise


def _kill(job: Job):
    if job.proc and job.proc.poll() is None:
        try:
            os.killpg(job.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if job.proc:
        job.proc.wait()


def _tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            n = f.tell()
            f.seek(max(0, n - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_jobs(jobs: list[Job], limits: dict[str, int], on_finish, *, budget_s: float | None = None,
             work_dir: str, env: dict | None = None, progress: Progress | None = None,
             python: str = sys.executable, start_margin_s: float = 20.0) -> dict:
    """Runs jobs; calls on_finish(job, final_record_or_None, status, lines, log_tail) for each one that ends
    (status "ok", "crash", "timeout"). Jobs cut by the budget are not reported. Returns counts."""
    os.makedirs(work_dir, exist_ok=True)
    t0 = time.monotonic()
    deadline = t0 + budget_s if budget_s else None
    pending = deque(jobs)
    finished_keys: set[str] = set()
    running: list[Job] = []
    counts = {"ok": 0, "crash": 0, "timeout": 0, "cut_by_budget": 0, "not_started": 0}
    job_env = dict(os.environ if env is None else env)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    job_env["PYTHONPATH"] = pkg_root + (os.pathsep + job_env["PYTHONPATH"] if job_env.get("PYTHONPATH") else "")
    job_env["PYTHONUNBUFFERED"] = "1"

    def can_start(job: Job) -> bool:
        if job.after and ("compile", job.after) not in finished_keys:
            return False
        return sum(1 for r in running if r.kind == job.kind) < limits.get(job.kind, 1) and \
            len(running) < limits.get("total", 10**6)

    while pending or running:
        now = time.monotonic()
        # Start what fits, in order, skipping jobs still waiting on their compile step.
        # No new job in the last `start_margin_s` of the budget: it would only be cut.
        if deadline is None or now < deadline - start_margin_s:
            for job in list(pending):
                if job.cancelled:
                    pending.remove(job)
                    continue
                if can_start(job):
                    pending.remove(job)
                    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job.key)
                    job.log_path = os.path.join(work_dir, f"{safe}.{job.kind}.log")
                    log = open(job.log_path, "wb")
                    job.proc = subprocess.Popen(
                        [python, "-m", "kgate.kernelbench.rowjob"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=log, env=job_env, start_new_session=True, cwd=work_dir)
                    log.close()
                    job.started = time.monotonic()
                    threading.Thread(target=_reader, args=(job,), daemon=True).start()
                    assert job.proc.stdin
                    job.proc.stdin.write(json.dumps(job.spec).encode())
                    job.proc.stdin.close()
                    running.append(job)
        # Reap.
        for job in list(running):
            assert job.proc
            rc = job.proc.poll()
            elapsed = time.monotonic() - job.started
            if rc is None and elapsed > job.timeout_s:
                _kill(job)
                status = "timeout"
            elif rc is None:
                if deadline is not None and time.monotonic() > deadline:
                    _kill(job)
                    running.remove(job)
                    counts["cut_by_budget"] += 1
                continue
            else:
                status = "ok" if rc == 0 else "crash"
            job.proc.wait()
            time.sleep(0.05)  # let the reader thread drain the pipe
            running.remove(job)
            finished_keys.add((job.kind, job.key))
            final = next((l for l in reversed(job.lines) if l.get("type") in ("row", "compile")), None)
            if final is not None and status == "crash":
                status = "ok"  # it reported before dying in teardown: the record is complete
            counts[status] += 1
            on_finish(job, final, status, job.lines, _tail(job.log_path))
            if progress:
                note = f"{job.key} {job.kind} {status}"
                if final and final.get("type") == "row":
                    note += f" -> {final.get('classification')}"
                progress.step(note, len(running))
        if deadline is not None and time.monotonic() > deadline - start_margin_s and not running:
            counts["not_started"] = len(pending)
            break
        time.sleep(0.1)
    return counts
