"""The corpus audit: every row in its own process, compiled candidates first (in parallel, into the
extension cache), results appended as rows finish, resumable, shardable, within a time budget."""
from __future__ import annotations

import os
import signal
import sys
import time

from . import seeds
from .corpus import in_shard, read_rows, stem_of
from .results import ResultsFile
from .scheduler import Job, Progress, run_jobs


def default_results(corpus: str, results_dir: str = "results") -> str:
    return os.path.join(results_dir, f"{stem_of(corpus)}.kgate.jsonl")


def _driver_end(job, status: str, open_gate: str | None, gates_done: list, log_tail: str) -> str:
    """What ended a row whose driver reported no final record, in words, with the driver's stderr tail.
    open_gate: the gate it had started and not finished, if any."""
    where = f" in gate {open_gate}" if open_gate else f" after gate {gates_done[-1]['gate']}" if gates_done \
        else " before its first gate"
    if status == "timeout":
        head = f"the row ran past its limit of {job.timeout_s:g} s{where} and was killed"
    else:
        rc = job.proc.returncode
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            head = f"the row's driver died of {name}{where}"
            if -rc == signal.SIGKILL:
                head += " (a SIGKILL from outside: the kernel's out-of-memory killer is the usual sender)"
        else:
            head = f"the row's driver exited with status {rc}{where} without a final record"
    tail = log_tail[-1800:].strip()
    return head + (f"; its stderr ends: {tail}" if tail else "; its stderr is empty")


class RetryError(ValueError):
    """A --retry entry names a row key that is not in the corpus (or not in this shard)."""


def _static_record(row, status, message, file):
    return {"type": "row", "key": row.key, "sha": row.sha, "file": file, "level": row.data.get("level_id"),
            "task": row.data.get("task_id"), "status": status, "classification": status, "message": message,
            "gates": []}


def audit(corpus: str, *, results_path: str | None = None, shard=(0, 1), budget_s: float | None = None,
          jobs: int = 4, compile_jobs: int = 8, fw: str = "numpy", seed: int | None = None,
          gates: list[str] | None = None, row_timeout: float = 600.0, call_timeout: float = 60.0,
          compile_timeout: float = 600.0, ext_cache: str | None = None, work_dir: str | None = None,
          limit: int | None = None, keys: list[str] | None = None, retry: list[str] | None = None,
          quiet: bool = False) -> dict:
    """retry: row statuses (row_timeout, oracle_error, ...) or row keys (containing "/") whose rows run again;
    each new record replaces the old one, which moves to <results stem>.superseded.jsonl
    (results.ResultsFile.replace)."""
    t_start = time.monotonic()
    results_path = results_path or default_results(corpus)
    res = ResultsFile(results_path)
    compiled = ResultsFile(results_path.replace(".jsonl", "") + ".compile.jsonl")
    ext_cache = os.path.abspath(ext_cache or os.path.join("build-py", "ext-cache"))
    work_dir = os.path.abspath(work_dir or os.path.join("build-py", "audit-work", stem_of(corpus)))
    rows = [r for r in read_rows(corpus) if in_shard(r, shard)]
    if keys:
        rows = [r for r in rows if r.key in keys]
    retry_keys = {x for x in retry or () if "/" in x}
    unknown = sorted(retry_keys - {r.key for r in rows})
    if unknown:
        raise RetryError(f"--retry: no row {', '.join(map(repr, unknown))} in {corpus}"
                         f"{' (shard %d/%d)' % shard if shard != (0, 1) else ''}")
    file = os.path.basename(corpus)
    history = results_path.replace(".jsonl", "") + ".superseded.jsonl"
    retried = {}  # key -> the record this run replaces

    def put(rec):
        if rec["key"] in retried:
            old = retried[rec["key"]]
            rec["retry_of"] = {"status": old.get("status"), "message": (old.get("message") or "")[:300]}
            res.replace(rec, history)
        else:
            res.append(rec)

    todo = []
    for r in rows:
        if res.done(r.key, r.sha):
            if retry and (res.records[r.key].get("status") in retry or r.key in retry_keys):
                retried[r.key] = res.records[r.key]
            else:
                continue
        if r.problem:
            put(_static_record(r, "bad_row", r.problem, file))
        elif not r.has_candidate():
            put(_static_record(r, "no_candidate", "the producer kept no solution (custom_code is \"None\")",
                                      file))
        else:
            todo.append(r)
    if limit is not None:
        todo = todo[:limit]
    job_list: list[Job] = []
    by_key = {}
    for r in todo:
        row_seed = seeds.derive(seed, r.key) if seed is not None else seeds.fresh_seed()
        base = {"key": r.key, "sha": r.sha, "row": r.data, "fw": fw, "ext_cache": ext_cache, "file": file}
        needs = r.needs_compile()
        after = None
        if needs and not compiled.done(r.key, r.sha):
            job_list.append(Job(r.key, "compile", {**base, "mode": "compile", "compile_timeout": compile_timeout},
                                compile_timeout + 60))
            after = r.key
        elif needs and compiled.records[r.key].get("status") != "ok":
            c = compiled.records[r.key]
            put(_static_record(r, c.get("status", "compile_error"), c.get("message", ""), file))
            continue
        v = Job(r.key, "verify", {**base, "mode": "verify", "seed": f"{row_seed:016x}", "gates": gates,
                                   "call_timeout": call_timeout, "needs_compile": needs}, row_timeout, after=after)
        by_key[r.key] = v
        job_list.append(v)
    # Compile jobs first in the queue: they occupy the CPUs while the GPU verifies PyTorch-level rows.
    job_list.sort(key=lambda j: 0 if j.kind == "compile" else 1)
    progress = None if quiet else Progress(len(job_list), os.path.basename(corpus))

    def on_finish(job, final, status, lines, log_tail):
        row = next(r for r in todo if r.key == job.key)
        if job.kind == "compile":
            if final is None:
                final = {"type": "compile", "key": job.key, "sha": row.sha, "status": f"compile_{status}",
                         "message": log_tail[-2000:]}
            compiled.append(final)
            if final.get("status") != "ok" and job.key in by_key:
                by_key[job.key].cancelled = True
                put(_static_record(row, final.get("status", "compile_error"), final.get("message", ""),
                                          file) | {"compile_seconds": final.get("seconds")})
            return
        if final is None:  # the row's own driver died or hung: keep what it reported, cost one verdict
            gates_done = [l for l in lines if l.get("type") == "gate"]
            started = [l["gate"] for l in lines if l.get("type") == "gate_start"]
            open_gate = started[-1] if started and (not gates_done or gates_done[-1]["gate"] != started[-1]) \
                else None
            status_name = "row_timeout" if status == "timeout" else "driver_crash"
            rec = _static_record(row, status_name, _driver_end(job, status, open_gate, gates_done, log_tail), file)
            rec["gates"] = [{k: v for k, v in g.items() if k not in ("type", "key")} for g in gates_done]
            # The gates that finished are evidence about the candidate; the stop itself is not (the row's time
            # limit, or the driver dying: out of memory, the f64 oracle), so it is marked but not counted.
            from .classify import classify
            found = classify(rec["gates"]) if rec["gates"] else "clean"
            rec["classification"] = found if found != "clean" else status_name
            if open_gate:
                rec["gates"].append({"gate": open_gate, "verdict": "TIMEOUT" if status == "timeout" else "CRASH",
                                     "summary": f"the row's driver {'ran out of time' if status == 'timeout' else 'died'}"
                                                f" in this gate", "row_stop": True})
            rec["seed"] = job.spec["seed"]
            final = rec
        final = {k: v for k, v in final.items() if k != "type"}
        final["row_seconds"] = round(time.monotonic() - job.started, 2)
        put(final)

    limits = {"compile": compile_jobs, "verify": jobs, "total": compile_jobs + jobs}
    counts = run_jobs(job_list, limits, on_finish, budget_s=budget_s, work_dir=work_dir, progress=progress)
    res.close()
    compiled.close()
    counts["rows_in_shard"] = len(rows)
    from .results import read_results
    finished = {x.get("key") for x in read_results(results_path)}
    counts["finished_total"] = sum(1 for r in rows if r.key in finished)
    counts["remaining"] = len(rows) - counts["finished_total"]
    counts["seconds"] = round(time.monotonic() - t_start, 1)
    counts["results"] = results_path
    if not quiet:
        print(f"audit: {counts}", file=sys.stderr)
    return counts
