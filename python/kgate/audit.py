"""The corpus audit: every row in its own process, compiled candidates first (in parallel, into the
extension cache), results appended as rows finish, resumable, shardable, within a time budget.

A candidate that attacks its judge is a finding of its own, status and classification "judge_attacked",
with evidence (docs/security.md):
- its row job found stopped (SIGSTOP) is ended at once;
- its row job killed by a signal nothing of ours sends (SIGKILL while the kernel's OOM counter did not move,
  SIGTERM, SIGINT, SIGHUP, SIGUSR1, ...);
- the audit driver died twice while the row ran, the second time alone (the attempts journal: rows in flight
  when a driver died run alone first on the next call; a solo attempt that never ended names its row);
- the driver stopped (the watchdog continues it) while the row ran alone.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from . import gpumem, scheduler, seeds
from .classify import FAILING
from .corpus import in_shard, read_rows, stem_of
from .results import Journal, ResultsFile, TrustError, load_key, plain_name, stem as results_stem, unpack_to_resume
from .scheduler import DEFAULT_GPU_HEADROOM, Job, Progress, Watchdog, become_subreaper, run_jobs

JUDGE_ATTACKED = "judge_attacked"
GPU_OOM_STATUS = "gpu_out_of_memory"  # kernelbench/rowjob.py: ran out of GPU memory beside other rows
# kernelbench/casemem.py: the row's nominal case needs more memory than its share beside other rows
CASE_MEMORY_STATUS = "case_memory_shared"
# Statuses that are never a row's last word: the row runs again alone, and only that record counts.
RUN_ALONE_STATUSES = (GPU_OOM_STATUS, CASE_MEMORY_STATUS)
# Signals a row job dies of by itself (a fault in its own code); any other signal was sent to it.
_SELF_INFLICTED = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGXFSZ,
                   signal.SIGXCPU, signal.SIGSYS, signal.SIGPIPE}


def default_results(corpus: str, results_dir: str = "results") -> str:
    return os.path.join(results_dir, f"{stem_of(corpus)}.kgate.jsonl")


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _driver_end(job, status: str, open_gate: str | None, gates_done: list, log_tail: str) -> tuple[str, str]:
    """(status, message): what ended a row whose row job reported no final record, in words, with its stderr
    tail. open_gate: the gate it had started and not finished, if any."""
    where = f" in gate {open_gate}" if open_gate else f" after gate {gates_done[-1]['gate']}" if gates_done \
        else " before its first gate"
    name = "driver_crash"
    if status == "timeout":
        head = f"the row ran past its limit of {job.timeout_s:g} s{where} and was killed"
        name = "row_timeout"
    elif status == "stopped":
        st = job.stopped or {}
        head = (f"the row's judge (its row job) was found {st.get('how', 'stopped')} ({st.get('signal', '?')}) "
                f"after {st.get('after_s', '?')} s{where}; nothing of the audit stops a row job, so the candidate "
                f"did; the driver ended it")
        name = JUDGE_ATTACKED
    else:
        rc = job.proc.returncode
        if rc is not None and rc < 0:
            sig = -rc
            head = f"the row's judge (its row job) died of {_signal_name(sig)}{where}"
            if sig == signal.SIGKILL:
                before, after = job.oom_before, job.oom_after
                if before is not None and after is not None and after > before:
                    head += f" (the kernel's OOM killer acted meanwhile: oom_kill {before} -> {after})"
                elif before is not None and after is not None:
                    head += (f"; the kernel's OOM killer did not act (oom_kill stayed {after}), so a process "
                             f"sent it: the row's candidate attacked its judge")
                    name = JUDGE_ATTACKED
                else:
                    head += (" (a SIGKILL from outside; the kernel's OOM counter cannot be read here, so the "
                             "out-of-memory killer cannot be told from a candidate that kills its judge)")
            elif sig == signal.SIGXFSZ:
                head += " (a file passed the row's file size limit)"
            elif sig not in _SELF_INFLICTED:
                head += " (a signal only another process sends: the row's candidate attacked its judge)"
                name = JUDGE_ATTACKED
        else:
            head = f"the row's driver exited with status {rc}{where} without a final record"
    tail = log_tail[-1800:].strip()
    return name, head + (f"; its stderr ends: {tail}" if tail else "; its stderr is empty")


class RetryError(ValueError):
    """A --retry entry names a row key that is not in the corpus (or not in this shard)."""


def failed_with(rec: dict, findings) -> str | None:
    """'gate: finding' for the first (gate, finding) pair of `findings` some gate record of `rec` failed with
    (verdict FAIL, CRASH or TIMEOUT and that `finding`), else None: what --retry-finding selects rows by."""
    for gate, finding in findings or ():
        for g in rec.get("gates") or ():
            if g.get("gate") == gate and g.get("verdict") in FAILING and g.get("finding") == finding:
                return f"{gate}: {finding}"
    return None


def to_retry_for_finding(rec: dict, findings) -> bool:
    """Whether --retry-finding runs this row again: it failed with one of `findings`, and its record was not
    made by a run with this selection (retry_of.finding one of its findings, or finding_selection sharing one),
    so an audit resumed over several calls with the same selection (scripts/audit-gpu's AUDIT_RETRY_FINDING)
    runs each such row once."""
    why = failed_with(rec, findings)
    if why is None:
        return False
    # A record this selection already made is not run again, whichever of its findings the rerun failed with:
    # retried for "nan: X" and failing "inf: X" it once ran a second time (a100/L1/T77, 2026-12-07). A record a
    # run with this selection wrote for another reason (a row out of memory run alone, a row run the first time)
    # names the selection in `finding_selection` (audit's put).
    selection = {f"{gate}: {finding}" for gate, finding in findings}
    return (rec.get("retry_of") or {}).get("finding") not in selection and \
        not selection & set(rec.get("finding_selection") or ())


def to_retry_for_status(rec: dict, statuses) -> bool:
    """Whether --retry STATUS runs this row again: its status is one of `statuses`, and its record was not made by
    a run with any of them (retry_selection), so an audit resumed over several calls with the same --retry
    (scripts/audit-gpu's AUDIT_RETRY) runs each such row once."""
    return rec.get("status") in statuses and not set(statuses) & set(rec.get("retry_selection") or ())


def to_retry_selected(rec: dict, retry) -> str | None:
    """The --retry selector (cli.RETRY_SELECTORS) that runs this row again, else None. unguarded: an audited row
    whose candidate's own allocations ran without guard zones (report.unguarded) and whose record is not already
    the rerun for that reason (retry_of.selector), so a resumed audit runs each such row once."""
    if retry and "unguarded" in retry and rec.get("status") == "ok" \
            and (rec.get("retry_of") or {}).get("selector") != "unguarded":
        from .report import unguarded
        if unguarded(rec):
            return "unguarded"
    return None


def _static_record(row, status, message, file):
    return {"type": "row", "key": row.key, "sha": row.sha, "file": file, "level": row.data.get("level_id"),
            "task": row.data.get("task_id"), "status": status, "classification": status, "message": message,
            "gates": []}


def in_cache(compile_record: dict, ext_cache: str, custom_code: str) -> bool:
    """Whether the extension cache here holds what the row's compile job left in it: as many entries (built
    extensions, remembered failed builds) as the record counted (`ext_entries`), or, for a record written
    before it counted them, at least one when that job compiled anything. A compile record travels with the
    results; the cache may not (a fresh machine, a cache too large to return): without this check a resumed
    audit took such rows as compiled and their verification compiled them again inside its row time."""
    want = compile_record.get("ext_entries")
    if want is None:
        want = 1 if (compile_record.get("compile_seconds") or 0) > 0 or compile_record.get("extension_build_failed") \
            else 0
    if want <= 0:
        return True
    from .kernelbench import extstage
    return extstage.count_entries(ext_cache, custom_code) >= want


def spread_levels(rows: list) -> list:
    """The rows in an order that spreads each level evenly over the run (a row's place is its rank within its
    level over that level's size; file order within a level). The levels differ in what a row takes: level 1
    has inputs of up to 67M elements (host memory and time), level 3 whole networks whose float64 oracles take
    tens of GB of device memory each; in file order a dozen level-3 rows start together and run the GPU out
    of memory. Which rows run, and each row's seed, do not depend on the order."""
    by_level: dict = {}
    for r in rows:
        by_level.setdefault(str(r.level), []).append(r)
    place = {}
    for group in by_level.values():
        for i, r in enumerate(group):
            place[r.key] = (i + 0.5) / len(group)
    return sorted(rows, key=lambda r: place[r.key])  # stable: ties keep file order


def open_results(results_path: str, adopt: bool = False) -> tuple[bytes, ResultsFile, bool]:
    """The driver's key, its results file, and whether the file's records were adopted under a new key. A
    results file holding records but no key file (written before records were signed, or committed without
    the key of the run that wrote it) is refused unless adopt: then its records, signed or not, are signed
    as they stand with a new key. With a key file, adopt signs only records with no MAC at all. A packed
    results file (X.jsonl.gz, committed) is unpacked in place first and resumed as plain records."""
    results_path = unpack_to_resume(results_path)
    key = load_key(results_path, create=False)
    fresh = False
    if key is None:
        has_records = os.path.exists(results_path) and os.path.getsize(results_path) > 0
        if has_records and not adopt:
            raise TrustError(f"{results_path} holds records but there is no key file "
                             f"{results_stem(results_path)}.key to check them: pass --adopt-unsigned to vouch for "
                             f"them (they are signed as they stand), or start a new results file")
        key = load_key(results_path, create=True)
        fresh = True
    return key, ResultsFile(results_path, key, adopt=adopt, adopt_foreign=fresh), fresh


def audit(corpus: str, *, results_path: str | None = None, shard=(0, 1), budget_s: float | None = None,
          jobs: int = 4, compile_jobs: int = 8, fw: str = "numpy", seed: int | None = None,
          row_seed: int | None = None,
          gates: list[str] | None = None, row_timeout: float = 600.0, call_timeout: float = 60.0,
          compile_timeout: float = 600.0, ext_cache: str | None = None, work_dir: str | None = None,
          limit: int | None = None, keys: list[str] | None = None, retry: list[str] | None = None,
          retry_findings: list[tuple[str, str]] | None = None, quiet: bool = False, harden: bool = False, adopt_unsigned: bool = False,
          log_limit: int | None = None, file_limit: int | None = None,
          gpu_headroom: float = DEFAULT_GPU_HEADROOM, compile_only: bool = False,
          prestart: int | None = None, sanitizer: list[str] | None = None,
          sanitizer_timeout: float | None = None) -> dict:
    """retry: row statuses (row_timeout, oracle_error, ...) or row keys (containing "/") whose rows run again;
    each new record replaces the old one, which moves to <results stem>.superseded.jsonl.
    retry_findings: (gate, finding) pairs: rows whose record has a gate that failed with that finding run again
    the same way (failed_with; e.g. ("inf", "unexpected non-finite value") after a change to how it is judged).
    row_seed: the exact seed of the one row key `retry` names (a record's `seed`), so its rerun draws the very
    cases it drew; every other row's seed comes from `seed` (or is fresh).
    harden: the driver is a child subreaper that kills stray processes, and has a watchdog against SIGSTOP
    (the CLI sets it; off for in-process callers, whose other children it would take for strays).
    gpu_headroom: the fraction of the GPU's memory kept as a margin when a row starts beside other rows: each
    row is charged its expected peak (gpumem.estimate) from its start (torch audits, read through NVML; 0: rows
    start whatever the memory; scheduler.gpu_fits).
    compile_only: run the compile jobs of the rows that need one and nothing else (the extension cache and the
    compile records are filled; no row is verified), so that a later run verifies with compilation apart.
    prestart: verify jobs started ahead of their slot, each starting its candidate's worker process while it waits
    for its go (scheduler.run_jobs; default $KGATE_PRESTART, else 3; 0: off); one when rows run alone.
    sanitizer: compute-sanitizer tools (kgate._core.sanitizer_tools()) whose pass over the bounds gate's calls
    follows each audited row's run (kernelbench/sanitizer.py), `sanitizer_timeout` seconds per request of it
    (default sanitizer.DEFAULT_TIMEOUT); off by default."""
    t_start = time.monotonic()
    results_path = plain_name(results_path or default_results(corpus))  # open_results unpacks a packed one
    key, res, fresh_key = open_results(results_path, adopt_unsigned)
    compiled = ResultsFile(results_stem(results_path) + ".compile.jsonl", key, adopt=adopt_unsigned,
                           adopt_foreign=fresh_key)
    journal = Journal(results_stem(results_path) + ".attempts.jsonl", key)
    ext_cache = os.path.abspath(ext_cache or os.path.join("build-py", "ext-cache"))
    work_dir = os.path.abspath(work_dir or os.path.join("build-py", "audit-work", stem_of(corpus)))
    rows = [r for r in read_rows(corpus) if in_shard(r, shard)]
    if keys:
        missing = sorted(set(keys) - {r.key for r in rows})
        if missing:
            raise RetryError(f"--only: no row {', '.join(map(repr, missing))} in {corpus}"
                             f"{' (shard %d/%d)' % shard if shard != (0, 1) else ''}")
        rows = [r for r in rows if r.key in keys]
    retry_keys = {x for x in retry or () if "/" in x}
    # The statuses --retry names (not its keys, which run again on every call that names them, nor its selectors,
    # which keep their own mark: to_retry_selected). A record made by a run with them is not theirs to run again:
    # a row that ends with the same status again (a contract error, a row at its time limit) ran again on every
    # resumed call of scripts/audit-gpu, whose AUDIT_RETRY stays the same over a file's calls.
    retry_statuses = sorted(x for x in retry or () if "/" not in x and x != "unguarded")
    unknown = sorted(retry_keys - {r.key for r in rows})
    if unknown:
        raise RetryError(f"--retry: no row {', '.join(map(repr, unknown))} in {corpus}"
                         f"{' (shard %d/%d)' % shard if shard != (0, 1) else ''}")
    file = os.path.basename(plain_name(corpus))
    because = {}  # key -> why this run's record replaces the row's existing one
    notes: list = []

    def put(rec):
        k = rec["key"]
        if retry_findings:  # made by a run with this selection: it is not the selection's to run again
            rec["finding_selection"] = sorted(f"{gate}: {finding}" for gate, finding in retry_findings)
        if retry_statuses:  # likewise for the statuses --retry names
            rec["retry_selection"] = retry_statuses
        old = res.records.get(k)
        if old is not None:
            why = because.get(k) or "replaced"
            if why == "retried":
                rec["retry_of"] = {"status": old.get("status"), "message": (old.get("message") or "")[:300]}
                if finding := failed_with(old, retry_findings):
                    rec["retry_of"]["finding"] = finding
                if selector := to_retry_selected(old, retry):
                    rec["retry_of"]["selector"] = selector
            elif why.startswith("the corpus line changed"):
                rec["replaces"] = {"sha": old.get("sha"), "status": old.get("status"), "because": why}
            res.put(rec, why)
        else:
            res.put(rec)

    todo, suspects, alone_later = [], set(), set()
    for r in rows:
        if res.done(r.key, r.sha):
            if res.records[r.key].get("status") in RUN_ALONE_STATUSES:
                # Never a final status: the row still has to run alone, and only alone, whether or not `retry`
                # names its status (run beside others again it ends the same way: on 2026-12-07 such rows, named
                # in AUDIT_RETRY, ran beside others each call before their solo run, which the budget then cut).
                because[r.key] = "retried"
                alone_later.add(r.key)
            elif to_retry_for_status(res.records[r.key], retry_statuses) or r.key in retry_keys \
                    or to_retry_for_finding(res.records[r.key], retry_findings) \
                    or to_retry_selected(res.records[r.key], retry):
                because[r.key] = "retried"
            else:
                continue
        elif r.key in res.records:
            because[r.key] = f"the corpus line changed (sha {res.records[r.key].get('sha')} -> {r.sha})"
        unfinished = journal.unfinished(r.key, r.sha)
        if any(a.get("solo") for a in unfinished):
            # It ran alone and the driver never came back to end it: twice dead (or stopped for good) with it.
            rec = _static_record(r, JUDGE_ATTACKED, (
                f"the audit driver died {len(unfinished)} times while this row ran, the last time with no other "
                f"row beside it (attempts started at "
                f"{', '.join(time.strftime('%H:%M:%S', time.gmtime(a['t'])) for a in unfinished)} UTC never "
                f"ended): the candidate kills or stops the process that judges it; not run again"), file)
            rec["evidence"] = {"unfinished_attempts": unfinished}
            put(rec)
            for a in unfinished:
                journal.end(a["id"], "recorded as judge_attacked")
            continue
        if unfinished:
            suspects.add(r.key)
        if r.problem:
            put(_static_record(r, "bad_row", r.problem, file))
        elif not r.has_candidate():
            put(_static_record(r, "no_candidate", "the producer kept no solution (custom_code is \"None\")",
                               file))
        else:
            todo.append(r)
    if limit is not None:
        todo = todo[:limit]
    todo = spread_levels(todo)
    by_row = {r.key: r for r in todo}
    row_seeds = {r.key: seeds.derive(seed, r.key) if seed is not None else seeds.fresh_seed() for r in todo}
    if row_seed is not None:
        if len(retry_keys) != 1:
            raise RetryError("row_seed is one row's seed: name that row, and only it, in retry")
        (k,) = retry_keys
        if k in row_seeds:
            row_seeds[k] = int(row_seed)

    def compiled_here(r) -> bool:
        """The row's compile job is done for this candidate and what it left is in this machine's cache."""
        return compiled.done(r.key, r.sha) and in_cache(compiled.records[r.key], ext_cache,
                                                        r.data.get("custom_code") or "")

    def make_jobs(rs, alone=False) -> tuple[list[Job], dict]:
        job_list, verify_jobs = [], {}
        for r in rs:
            base = {"key": r.key, "sha": r.sha, "row": r.data, "fw": fw, "ext_cache": ext_cache, "file": file}
            needs = r.needs_compile()
            after = None
            if needs and not compiled_here(r):
                job_list.append(Job(r.key, "compile", {**base, "mode": "compile", "compile_timeout": compile_timeout,
                                                       "seed": f"{row_seeds[r.key]:016x}"}, compile_timeout + 60))
                after = r.key
            elif needs and compiled.records[r.key].get("status") != "ok":
                c = compiled.records[r.key]
                put(_static_record(r, c.get("status", "compile_error"), c.get("message", ""), file))
                continue
            if compile_only:
                continue
            v = Job(r.key, "verify", {**base, "mode": "verify", "seed": f"{row_seeds[r.key]:016x}", "gates": gates,
                                       "call_timeout": call_timeout, "needs_compile": needs, "alone": alone,
                                       # the row's own limit: the guard allocator's second pass runs only where
                                       # it fits in what is left (kernelbench/rowjob.py _guarded_pass)
                                       "row_timeout": row_timeout,
                                       # the bounds gate's compute-sanitizer passes (kernelbench/sanitizer.py)
                                       "sanitizer": sanitizer or [], "sanitizer_timeout": sanitizer_timeout,
                                       # how many verify jobs share the machine: a row's case memory share
                                       # (kernelbench/casemem.py)
                                       "rows_at_once": jobs},
                    row_timeout, after=after)
            if gpu_probe is not None:
                # What the row will hold on the GPU, charged from its start (scheduler.gpu_fits): its peak in an
                # earlier attempt (a record's, or a cut attempt's in the journal), else a prediction from its
                # task; at least what its compile job held (ModelNew built on the GPU).
                earlier = res.records.get(r.key)
                v.gpu_estimate, v.gpu_estimate_from = gpumem.estimate(
                    r.level, r.data.get("ref_code") or "", earlier=earlier, earlier_peak=journal.gpu_peaks.get(r.key),
                    oom_floor=(earlier or {}).get("status") == GPU_OOM_STATUS)
                floor = gpumem.observed_peak(compiled.records.get(r.key))
                if floor and floor > v.gpu_estimate:
                    v.gpu_estimate, v.gpu_estimate_from = floor, "compile job"
            verify_jobs[r.key] = v
            job_list.append(v)
        # Compile jobs first in the queue: they occupy the CPUs while the GPU verifies PyTorch-level rows.
        job_list.sort(key=lambda j: 0 if j.kind == "compile" else 1)
        return job_list, verify_jobs

    n_compile = sum(1 for r in todo if r.needs_compile() and not compiled_here(r))
    progress = None if quiet else Progress(n_compile if compile_only else n_compile + len(todo),
                                           os.path.basename(corpus))
    by_key: dict[str, Job] = {}

    def on_start(job):
        job.attempt = journal.start(job.key, by_row[job.key].sha, job.kind, job.solo)

    def attacked_alone(job, what):
        row = by_row[job.key]
        rec = _static_record(row, JUDGE_ATTACKED, f"{what} while this row ran with no other row beside it "
                             f"({job.kind}): the candidate stops or kills the process that judges it", file)
        rec["evidence"] = {"driver_events": (job.stopped or {}).get("events", []), "phase": job.kind}
        rec["gates"] = [{k: v for k, v in g.items() if k not in ("type", "key")}
                        for g in job.lines if g.get("type") == "gate"]
        if job.kind == "verify":
            rec["seed"] = job.spec["seed"]
        if job.key in by_key:
            by_key[job.key].cancelled = True
        put(rec)

    def on_finish(job, final, status, lines, log_tail):
        journal.end(job.attempt, status, job.gpu_peak)
        row = by_row[job.key]
        if job.kind == "compile":
            v = by_key.get(job.key)
            if v is not None and job.gpu_peak and v.gpu_estimate is not None and job.gpu_peak > v.gpu_estimate:
                v.gpu_estimate, v.gpu_estimate_from = job.gpu_peak, "compile job"
            if final is None and status in ("stopped", "crash"):
                name, message = _driver_end(job, status, None, [], log_tail)
                if name == JUDGE_ATTACKED:
                    if job.key in by_key:
                        by_key[job.key].cancelled = True
                    rec = _static_record(row, JUDGE_ATTACKED, "while compiling: " + message, file)
                    rec["evidence"] = _evidence(job, log_tail)
                    put(rec)
                    return
            if final is None:
                final = {"type": "compile", "key": job.key, "sha": row.sha, "status": f"compile_{status}",
                         "message": log_tail[-2000:]}
            final = {k: v for k, v in final.items() if k not in ("mac", "written_at")}
            if job.gpu:
                final["gpu"] = dict(job.gpu)
            compiled.put(final, "compiled again")
            if final.get("status") != "ok" and job.key in by_key:
                by_key[job.key].cancelled = True
                put(_static_record(row, final.get("status", "compile_error"), final.get("message", ""),
                                   file) | {"compile_seconds": final.get("seconds")})
            return
        if final is None:  # the row job died, hung or was stopped: keep what it reported, cost one verdict
            gates_done = [l for l in lines if l.get("type") == "gate"]
            started = [l["gate"] for l in lines if l.get("type") == "gate_start"]
            open_gate = started[-1] if started and (not gates_done or gates_done[-1]["gate"] != started[-1]) \
                else None
            status_name, message = _driver_end(job, status, open_gate, gates_done, log_tail)
            rec = _static_record(row, status_name, message, file)
            rec["gates"] = [{k: v for k, v in g.items() if k not in ("type", "key")} for g in gates_done]
            # The gates that finished are evidence about the candidate. A stop of ours (the row's time limit,
            # the OOM killer) is not, so it is marked but not counted; an attack on the judge is a finding.
            from .classify import classify
            found = classify(rec["gates"]) if rec["gates"] else "clean"
            rec["classification"] = status_name if status_name == JUDGE_ATTACKED else \
                found if found != "clean" else status_name
            if status_name == JUDGE_ATTACKED:
                rec["evidence"] = _evidence(job, log_tail)
            if open_gate:
                rec["gates"].append({"gate": open_gate, "verdict": "TIMEOUT" if status == "timeout" else "CRASH",
                                     "summary": f"the row's driver {'ran out of time' if status == 'timeout' else 'died'}"
                                                f" in this gate", "row_stop": True})
            rec["seed"] = job.spec["seed"]
            final = rec
        final = {k: v for k, v in final.items() if k not in ("type", "mac", "written_at")}
        sigsys = [g.get("gate") for g in final.get("gates", [])
                  if "SIGSYS" in str(g.get("summary", "")) + str(g.get("output", ""))[-4000:]]
        if sigsys:
            # kgate-isolate's seccomp filter ends a worker with SIGSYS when it reaches for a process outside its
            # own tree (ptrace, process_vm_*, a signal to its judge): contained, and a finding of its own.
            final["judge_attacked"] = {"gates": sigsys, "why": "the candidate's worker was ended by SIGSYS: it "
                                       "tried to trace, read or signal a process outside its own tree"}
            if final.get("status") == "ok":
                final["classification"] = JUDGE_ATTACKED
        final["row_seconds"] = round(time.monotonic() - job.started, 2)
        if job.gpu:
            # The row's admission (its estimate, what ran beside it, how long it waited) and the most its
            # processes held on the GPU (the driver's NVML readings): the next attempt's estimate.
            final["gpu"] = dict(job.gpu)
        if final.get("status") == GPU_OOM_STATUS:
            alone_later.add(job.key)
            because[job.key] = "run again alone: the GPU ran out of memory while other rows shared it"
        elif final.get("status") == CASE_MEMORY_STATUS:
            alone_later.add(job.key)
            because[job.key] = ("run again alone: its nominal case needs more memory than a row's share beside "
                                "others")
        if job.log_dropped:
            final["log_note"] = f"the row's output passed the log limit: {job.log_dropped} bytes dropped"
        put(final)

    limits = {"compile": compile_jobs, "verify": jobs, "total": compile_jobs + jobs}
    solo_limits = {"compile": 1, "verify": 1, "total": 1}
    counts = {"ok": 0, "crash": 0, "timeout": 0, "stopped": 0, "cut_by_budget": 0, "not_started": 0,
              "strays_killed": 0}
    watchdog = None
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if harden:
        # Orphans of a row's processes (a candidate's setsid double fork) come to the driver, which kills them.
        become_subreaper()
        watchdog = Watchdog(sys.executable, env)
    extra = {k: v for k, v in (("log_limit", log_limit), ("file_limit", file_limit)) if v is not None}
    if prestart is None:
        try:
            prestart = max(0, int(os.environ.get("KGATE_PRESTART", "3")))
        except ValueError:
            prestart = 3
    # Rows start only while the GPU has memory to spare (run_jobs); the probe is made once, in the driver, and
    # reads NVML (no CUDA context here). numpy audits never probe.
    gpu_probe = scheduler.gpu_probe_for(fw) if gpu_headroom > 0 else None
    if gpu_probe is not None and getattr(gpu_probe, "why", None):
        counts["gpu_probe"] = f"unknown: {gpu_probe.why}"
    gpu_free_min, per_process = [], []

    def phase(rs, solo):
        nonlocal by_key
        if not rs:
            return []
        left = None if budget_s is None else budget_s - (time.monotonic() - t_start)
        if left is not None and left <= 0:
            counts["not_started"] += len(rs)
            return []
        job_list, by_key = make_jobs(rs, alone=solo)
        c = run_jobs(job_list, solo_limits if solo else limits, on_finish, on_start=on_start, budget_s=left,
                     work_dir=work_dir, progress=progress, harden=harden, solo=solo, watchdog=watchdog,
                     notes=notes, preload=fw, gpu_probe=gpu_probe, gpu_headroom=gpu_headroom,
                     prestart=min(prestart, 1) if solo else prestart, **extra)
        for j in c.pop("cut"):
            journal.end(j.attempt, "cut by the budget", j.gpu_peak)
        out = []
        for j in c.pop("suspects"):
            journal.end(j.attempt, "the driver was stopped")
            if solo:
                attacked_alone(j, "the audit driver was stopped (SIGSTOP; its watchdog continued it)")
            elif j.key not in out:
                out.append(j.key)
        if "gpu_free_min" in c:
            gpu_free_min.append(c.pop("gpu_free_min"))
        if "gpu_per_process" in c:
            per_process.append(c.pop("gpu_per_process"))
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        return out

    try:
        first = [r for r in todo if r.key in suspects]
        phase(first, True)  # rows in flight when a driver died: alone, so a second death names its row
        again = phase([r for r in todo if r.key not in suspects and r.key not in alone_later], False)
        phase([by_row[k] for k in again if not res.done(k, by_row[k].sha)], True)
        # Rows that ran out of GPU memory beside others, or whose nominal case needs more than a row's share,
        # alone now (their record stays where the budget ends first, and the next call runs them).
        phase([r for r in todo if r.key in alone_later and
               res.records.get(r.key, {}).get("status") in RUN_ALONE_STATUSES], True)
    finally:
        if watchdog is not None:
            watchdog.close()
    if gpu_free_min:
        counts["gpu_free_min_gib"] = round(min(gpu_free_min) / 2**30, 1)
    if per_process:
        counts["gpu_per_process"] = any(per_process)
    counts["rows_in_shard"] = len(rows)
    if compile_only:
        counts["compile_only"] = True
        counts["compiled_total"] = sum(1 for r in rows if r.needs_compile() and compiled_here(r))
        counts["to_compile"] = sum(1 for r in rows if r.has_candidate() and r.needs_compile())
    counts["finished_total"] = sum(1 for r in rows if res.done(r.key, r.sha))
    counts["remaining"] = len(rows) - counts["finished_total"]
    counts["seconds"] = round(time.monotonic() - t_start, 1)
    counts["results"] = results_path
    if res.rejected:
        counts["records_rejected"] = len(res.rejected)
    if res.collapsed:
        counts["records_collapsed"] = res.collapsed
    if notes:
        counts["driver_stopped"] = sum(1 for n in notes if n.get("event") == "driver_stopped")
        servers = [n for n in notes if str(n.get("event", "")).startswith("forkserver")]
        if servers:
            counts["row_jobs"] = servers
    if not quiet:
        if res.rejected:
            print(f"audit: {len(res.rejected)} line(s) of {results_path} carried no valid MAC (not written by this "
                  f"driver: forged or edited); moved to {res.rejected_path}, their rows run again", file=sys.stderr)
        print(f"audit: {counts}", file=sys.stderr)
    return counts


def _evidence(job, log_tail: str) -> dict:
    ev = {"row_job_exit": job.proc.returncode if job.proc else None, "stopped": job.stopped,
          "oom_kill_before": job.oom_before, "oom_kill_after": job.oom_after,
          "seconds": round(time.monotonic() - job.started, 2), "stderr_tail": log_tail[-1500:]}
    if job.proc and job.proc.returncode is not None and job.proc.returncode < 0:
        ev["signal"] = _signal_name(-job.proc.returncode)
    return ev
