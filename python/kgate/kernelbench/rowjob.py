"""One row of a corpus, in its own process: the C++ engine's gates (kgate._core.verify) over the candidate
in a worker below it (kernelbench/target.py), the task's Model as oracle and references and its
get_inputs() as the input source (kernelbench/frontend.py), a contract derived from the task
(kernelbench/derive.py); baseline and public_harness (other harnesses' logic, mirrored) around them. Reads a JSON spec on stdin; writes JSON lines on its stdout (the
task's and kgate's own prints are moved to stderr, so nothing can forge a record): "gate_start" and "gate" as
each gate runs, and a final "row" (verify) or "compile" record."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
import traceback

from .. import seeds
from ..classify import FAILING
from . import extstage

_out_fd = None


def emit(rec: dict):
    os.write(_out_fd, (json.dumps(rec, allow_nan=True, default=str) + "\n").encode())


def compile_only(spec, fw_name):
    """The row's compile job: the candidate's module imported in a worker, then ModelNew built there once as
    verification builds it (many candidates call load_inline in ModelNew.__init__, not at import), so what
    either compiles is in the cache before the row's verification starts. The build is there for its
    compilation only: whatever else it does (it raises, hangs, crashes) is a note on the record
    (init_build), never the record's status; verification builds ModelNew again and judges that."""
    from .client import Candidate, WorkerDied
    limit = spec.get("compile_timeout", 600)
    cand = Candidate(fw_name, spec["row"]["custom_code"], ext_cache=spec.get("ext_cache"), init_timeout=limit)
    t0 = time.monotonic()
    init_build = None
    try:
        reply = cand.start()
        if reply.get("status") == "ok":
            init_build = _init_build(cand, spec, fw_name, t0 + limit)
    except WorkerDied as d:
        reply = {"status": d.kind, "message": d.detail, "output": d.output[-2000:]}
    finally:
        cand.close()
    rec = {"type": "compile", "key": spec["key"], "sha": spec["sha"], "status": reply.get("status"),
           "message": reply.get("message", "")[:2000], "seconds": round(time.monotonic() - t0, 2),
           "compile_seconds": round(cand.compile_seconds, 2)}
    if cand.ext_failed:
        rec["extension_build_failed"] = cand.ext_failed
    if cand.ext_part:
        # what the cache holds for this candidate once the job is done (harvested at close): a later audit whose
        # cache lacks them (a fresh machine; a cache that did not travel) compiles the row again (audit.py)
        rec["ext_entries"] = extstage.count_entries(spec["ext_cache"], spec["row"]["custom_code"])
    if init_build is not None:
        rec["init_build"] = init_build
    emit(rec)


def _init_build(cand, spec, fw_name, deadline: float) -> str:
    """ModelNew built in the compile job's worker with the task's init inputs, drawn as verification draws
    them (frontend.build_request under the row seed's init seed), within what is left of the compile
    timeout. Returns how it went, in words: "ok", or why not."""
    from .client import WorkerDied
    from .frontend import build_request, init_seed
    from .task import Task
    try:
        fw = importlib.import_module(f"kgate.kernelbench.fw_{fw_name}")
        req = build_request(fw, Task(spec["row"]["ref_code"]), init_seed(int(spec.get("seed", "0"), 16)))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the task's failure is verification's to report
        return f"not run: the task's init inputs: {type(e).__name__}: {e}"[:1000]
    left = deadline - time.monotonic()
    if left <= 0:
        return "not run: the import took the whole compile timeout"
    cand.call_timeout = cand.init_timeout = left
    try:
        built = cand.build_with("kgate:", req)
    except WorkerDied as d:
        return f"{d.kind}: {d.detail}"[:1000]
    if built.get("status") == "ok":
        return "ok"
    return f"failed ({built.get('status')}): {built.get('message', '')}"[:1000]


def _gate_record(g: dict) -> dict:
    """One gate of the engine's report as a row's gate record: the engine's fields as they are (verdict,
    summary, error_ratio, evidence, counted, attributed_to, out_of_domain, precision_label, ...), the
    ratio "inf" as a number."""
    r = dict(g)
    if r.get("error_ratio") == "inf":
        r["error_ratio"] = float("inf")
    return r


def _classification(report: dict) -> str:
    c = str(report.get("classification", ""))
    return "broken" if c.startswith("broken") else c


def guard_library() -> str | None:
    """The CUDA guard allocator (kernelbench/guard_alloc), where it was built: KGATE_GUARD_ALLOC, or beside
    the package's extension."""
    env = os.environ.get("KGATE_GUARD_ALLOC")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "libkgate_guard_alloc.so")
    return here if os.path.exists(here) else None


# What torch says when a candidate asks the allocator for something a pluggable allocator cannot answer
# (cuDNN's algorithm search asks for cacheInfo, e.g. under torch.backends.cudnn.benchmark = True): the
# failure is the guard allocator's, not the candidate's.
ALLOCATOR_UNSUPPORTED = "CUDAPluggableAllocator does not yet support"


def _allocator_unsupported(evidence) -> bool:
    """Whether a message, a gate record or a list of them shows ALLOCATOR_UNSUPPORTED."""
    return ALLOCATOR_UNSUPPORTED in json.dumps(evidence, default=str)


# What torch and the CUDA runtime say when the GPU has no memory left. Twelve rows share one GPU, and each
# process's caching allocator keeps what it once held: a row can run out because of its neighbours.
GPU_OOM = ("CUDA out of memory", "CUDA error: out of memory", "cudaErrorMemoryAllocation", "OutOfMemoryError")


def gpu_out_of_memory(rec) -> str | None:
    """The first place (the row's message, or a gate that did not pass) where the GPU ran out of memory."""
    if any(m in str(rec.get("message", "")) for m in GPU_OOM):
        return "the row's " + str(rec.get("status"))
    for g in rec.get("gates", []):
        if g.get("verdict") not in ("PASS", "SKIP") and \
                any(m in str(g.get("summary", "")) + str(g.get("output", "")) for m in GPU_OOM):
            return f"gate {g.get('gate')} ({g.get('verdict')})"
    return None


def shared_gpu_status(rec, spec) -> dict:
    """A row that ran beside others and ran out of GPU memory gets the status gpu_out_of_memory, not a
    verdict: the audit runs it again alone, and only then is an out-of-memory the candidate's own (a kernel
    that leaks or asks for too much fails the same way alone, and that record counts)."""
    where = None if spec.get("alone") else gpu_out_of_memory(rec)
    if where:
        rec["evidence_shared_gpu"] = {"status": rec.get("status"), "message": str(rec.get("message", ""))[:1000],
                                      "where": where}
        from ..audit import GPU_OOM_STATUS
        rec["status"] = GPU_OOM_STATUS
        rec["message"] = (f"the GPU ran out of memory in {where} while other rows shared it; not a verdict: "
                          "the row runs again alone")
    return rec


# The gates whose findings need guard zones or poisoned fresh memory around the candidate's own allocations,
# which only the guard allocator gives: bounds (a write past memory the candidate allocated: its returned
# outputs, its scratch) and coverage (under the returning convention the engine's poisoned output buffers
# are overwritten by the tensors the candidate returns, so an element it never wrote shows the poison only
# if its own fresh allocation held the poison: the guard allocator fills every fresh block with it; torch's
# caching allocator gets best-effort poisoned free blocks, fw_torch.poison_allocator, which a block cached
# elsewhere or split differently escapes).
GUARDED_GATES = ("coverage", "bounds")
CUDNN_HELD = "torch.backends.cudnn.benchmark held off"


def verify(spec, fw_name):
    """One row. Where the candidate needs what the guard allocator cannot give (ALLOCATOR_UNSUPPORTED in
    any gate's evidence; the first run stops as soon as its build or baseline calls show it), the row runs
    once more from the start on torch's own allocator with every gate and the candidate's own settings, and
    the record says so in guard_allocator. The gates that need the guard allocator (GUARDED_GATES) then run a
    second pass with it installed and cuDNN's benchmark mode held off in the worker (the usual reason for the
    failure): its results replace that run's for those gates, and the engine classifies the merged set
    (_guarded_pass). Where that pass fails too, the record is the caching allocator's run alone, and says so:
    its bounds gate then guards the buffers the engine places, not the candidate's own allocations."""
    library = guard_library()
    t0 = time.monotonic()
    rec = _verify_once(spec, fw_name, library)
    if library and _needs_fallback(rec):
        first = rec.get("guard_allocator", "guard allocator")
        t_first = rec.get("seconds")
        rec = _verify_once(spec, fw_name, None)
        rec["first_run_seconds"] = t_first
        rec["guard_allocator"] = (f"off: with {first} the candidate's calls failed with \"{ALLOCATOR_UNSUPPORTED} "
                                  "...\" (it asks the allocator for what a pluggable allocator cannot answer); "
                                  "this record is the row run again on torch's caching allocator")
        _guarded_pass(rec, spec, fw_name, library, time.monotonic() - t0)
    _sanitizer_passes(rec, spec, fw_name, library, t0)
    return rec


def _sanitizer_passes(rec, spec, fw_name, library, t0: float):
    """The bounds gate's compute-sanitizer passes the spec asks for (`sanitizer`: tools), each in a fresh
    worker under the tool (kernelbench/sanitizer.py), its record the row's gate `bounds/<tool>`; then the
    engine classifies the row's gates again, a bounds/<tool> FAIL counting as the bounds gate's."""
    from . import sanitizer
    tools = list(spec.get("sanitizer") or ())
    if not tools or not sanitizer.applies(rec):
        return  # the row was not audited, or its bounds gate did not run: nothing to run again
    # the guard allocator the row's bounds gate had, for the tools that keep the guards
    guarded = str(rec.get("guard_allocator") or "").startswith(("guard allocator", "on for"))
    for tool in tools:
        emit({"type": "gate_start", "key": spec["key"], "gate": f"bounds/{tool}"})
        who = f"the worker under compute-sanitizer {tool}"
        g = sanitizer.run(rec, spec, fw_name, library if guarded else None, tool, time.monotonic() - t0,
                          lambda *a, **k: _verify_again(*a, who=who, **k))
        emit({"type": "gate", "key": spec["key"], **g})
    before = _reclassify(rec)
    rec["sanitizer_pass"] = {"tools": tools, **({"classification_before": before} if before else {})}


# The status of a second run (_verify_again) that ended with an exception instead of a record.
SECOND_RUN_FAILED = "second_run_failed"


def _verify_again(spec, fw_name, library, *, who: str, **kw) -> dict:
    """A second run of some of the row's gates (_verify_once), for the guard allocator's pass and the
    compute-sanitizer pass: it must never cost the row the verdicts of its first run. Any exception of that
    run (the worker died or did not answer a request, client.WorkerDied: e.g. a build under memcheck past the
    pass's timeout on the first GPU run, 2026-12-06; or anything else) ends it as a record with status
    SECOND_RUN_FAILED and a one-line message naming the request (second_run_failure; `who` names the worker),
    beside what the run had gathered (the tool's logs). The callers keep the row as it was and say why."""
    partial: dict = {}
    try:
        return _verify_once(spec, fw_name, library, partial=partial, **kw)
    except Exception as e:  # noqa: BLE001 - the row's first run stands; the reason is in the record
        rec = partial.get("rec") or {"gates": []}
        rec["status"] = SECOND_RUN_FAILED
        rec["message"] = second_run_failure(e, who)
        rec["traceback"] = traceback.format_exc()[-3000:]
        return rec


def second_run_failure(e: BaseException, who: str) -> str:
    """One line for a second run that ended with `e`: "<who> did not answer its build request within 180 s",
    "<who> died during its init request (SIGSEGV)", or the exception's type and first line."""
    from .client import WorkerDied
    if isinstance(e, WorkerDied):
        if e.kind == "timeout" and e.request:
            return f"{who} did not answer its {e.request} request within {e.limit or 0:.0f} s"
        if e.request:
            return f"{who} died during its {e.request} request ({e.how or e.detail})"
        return f"{who}: {e.kind}: {e.detail}"[:500]
    first = (str(e).splitlines() or [""])[0]
    return f"{who}: the run ended with {type(e).__name__}: {first}"[:500]


def _needs_fallback(rec) -> bool:
    return bool(rec.get("allocator_unsupported") or
                _allocator_unsupported([rec.get("gates", []), rec.get("message", "")]))


def _guarded_pass(rec, spec, fw_name, library, elapsed: float = 0.0):
    """The guard allocator's second pass over a row that ran on torch's caching allocator (verify): the
    GUARDED_GATES the row asked for and ran, again, in a worker with the guard allocator installed and
    torch.backends.cudnn.benchmark = False after the candidate's import and before every build and call. On
    success (no ERROR among them: a gate the pass could not judge leaves the row as it was) each of those
    gate records is the second pass's (marked "pass", with the caching allocator's
    verdict beside it in "caching_allocator_run"), except that a failure the caching allocator's run found
    and the second pass did not stays as it was (both runs are the candidate's, same seed and cases: a
    finding is never dropped); the row's classification, broken_reasons and exit code are then the
    engine's over the merged gates (kgate._core.classify). `guarded_pass` says what ran and how it ended;
    `guard_allocator` says what ran where. Where the spec gives the row's time limit (row_timeout) and the
    pass, at twice what the caching allocator's run spent on its start, build and those gates, would likely
    not end within it (`elapsed`: the row's seconds so far), it is not run, and the record says so: a row
    cut by its limit would lose the verdicts it has."""
    wanted = spec.get("gates") or []
    ran = {g.get("gate") for g in rec.get("gates", [])}
    gates = [g for g in GUARDED_GATES if (not wanted or g in wanted) and g in ran]
    if not gates or rec.get("status") != "ok" or "classification" not in rec:
        return
    from .. import _core
    names = ", ".join(gates)
    phases = rec.get("phases") or {}
    estimate = (phases.get("start", 0.0) + phases.get("build", 0.0) + phases.get("close", 0.0)
                + sum(float(g.get("seconds") or 0.0) for g in rec.get("gates", []) if g.get("gate") in gates))
    limit = spec.get("row_timeout")
    if limit and elapsed + 2 * estimate + 30 > float(limit):
        why = (f"was not run: the row had taken {elapsed:.0f} s of its {float(limit):.0f} s, and the pass would "
               f"take about {estimate:.0f} s more")
        rec["guarded_pass"] = {"gates": gates, "merged": False, "why": why}
        rec["guard_allocator"] += f"; a second pass of {names} with the guard allocator and {CUDNN_HELD} {why}"
        return
    second = _verify_again({**spec, "gates": gates}, fw_name, library, hold_cudnn_benchmark=True,
                           who="the pass's worker")
    info = {"gates": gates, "seconds": second.get("seconds"), "guard_allocator": second.get("guard_allocator"),
            "cudnn_benchmark": "held off (False after the candidate's import and before every build and call)"}
    got = {g.get("gate"): g for g in second.get("gates", []) if g.get("gate") in gates}
    note = str(second.get("guard_allocator") or "")
    why = None
    if _needs_fallback(second):
        why = (f"failed the same way (\"{ALLOCATOR_UNSUPPORTED} ...\") with {CUDNN_HELD} before every call: "
               "the candidate turns it on again itself, or something else asks the allocator for what it cannot "
               "answer")
    elif second.get("status") == SECOND_RUN_FAILED:
        why = f"failed: {second.get('message')}"
    elif second.get("status") != "ok":
        why = f"ended {second.get('status')}: {str(second.get('message', ''))[:500]}"
    elif not note.startswith("guard allocator"):
        why = f"could not install the guard allocator ({note or 'the worker installed none'})"
    elif set(got) != set(gates):
        why = f"reported no result for {', '.join(g for g in gates if g not in got)}"
    elif any(got[g].get("verdict") == "ERROR" for g in gates):
        g = next(g for g in gates if got[g].get("verdict") == "ERROR")
        why = f"could not judge {g} (ERROR: {str(got[g].get('summary', ''))[:300]})"
    elif not hasattr(_core, "classify"):
        why = "could not be merged: this build of kgate._core has no classify (the engine's classification)"
    if why:
        rec["guarded_pass"] = {**info, "merged": False, "why": why}
        rec["guard_allocator"] += (f"; a second pass of {names} with the guard allocator and {CUDNN_HELD} {why}, "
                                   "so every gate here is the caching allocator's")
        return
    replaced, kept = [], []
    for k, old in enumerate(rec["gates"]):
        g = old.get("gate")
        if g not in got:
            continue
        new = got[g]
        if old.get("verdict") in FAILING and new.get("verdict") not in FAILING:
            rec["gates"][k] = {**old, "guarded_run": {"verdict": new.get("verdict"), "summary": new.get("summary")}}
            kept.append(g)
            continue
        rec["gates"][k] = {**new, "pass": f"second pass: guard allocator on, {CUDNN_HELD}",
                           "caching_allocator_run": {"verdict": old.get("verdict"), "summary": old.get("summary")}}
        replaced.append(g)
    before = _reclassify(rec)
    if before:
        info["caching_allocator_classification"] = before
    rec["guarded_pass"] = {**info, "merged": True, "replaced": replaced, "kept": kept}
    rec["guard_allocator"] = (f"on for {names}: a second pass with {note} and {CUDNN_HELD}; these gates' records "
                              "are that pass's" + (f", except {', '.join(kept)}: this run's failure stands, which the "
                                                   "second pass did not find" if kept else "")
                              + "; off for every other gate: " + rec["guard_allocator"][len("off: "):])


def _reclassify(rec) -> str | None:
    """The row's classification, broken_reasons and exit code again from its gates, the engine's
    (kgate._core.classify; a bounds/<tool> record of a compute-sanitizer pass counts as its gate family's), for
    a row whose gate records come from more than one run. Returns the classification it had where it
    changed, else None."""
    from ..classify import engine_classification
    c = engine_classification(rec["gates"])
    before = rec.get("classification")
    rec["classification"] = _classification(c)
    rec["broken_reasons"] = list(c["broken_reasons"])
    if isinstance(rec.get("engine"), dict):
        rec["engine"]["exit_code"] = c["exit_code"]
    return before if before != rec["classification"] else None


def _verify_once(spec, fw_name, library, hold_cudnn_benchmark=False, tool=None, partial=None):
    """One run of the row's gates in a fresh worker. `tool`: the worker starts under a wrapper tool (the
    compute-sanitizer pass, sanitizer.py): {launch_prefix, timeout (every request: the worker's init and
    build too, which under memcheck instrument every module loaded), guard_bytes, env}; its gates are not
    reported as they run (the pass reports its own record), and its logs come back in the record's
    "tool_logs". `partial` (a dict) gets the record as it is built, under "rec", for a caller that must
    keep what a run that raised had gathered (_verify_again)."""
    from .. import _core, isolation
    from .client import Candidate, WorkerDied
    from . import casemem
    from .context import Context
    from .derive import ContractError
    from .frontend import Frontend, Source
    from .gates import get
    from .target import CandidateTarget
    from .task import TaskError

    global _early
    fw = importlib.import_module(f"kgate.kernelbench.fw_{fw_name}")
    row = spec["row"]
    seed = int(spec["seed"], 16)
    rec = {"type": "row", "key": spec["key"], "sha": spec["sha"], "file": spec.get("file"),
           "level": row.get("level_id"), "task": row.get("task_id"), "seed": f"{seed:016x}", "fw": fw_name,
           "gates": [], "status": "ok", "needs_compile": spec.get("needs_compile", False)}
    if partial is not None:
        partial["rec"] = rec
    t0 = time.monotonic()
    tool = tool or {}
    call_timeout = tool.get("timeout") or spec.get("call_timeout", 60)
    cand = Candidate(fw_name, row["custom_code"], ext_cache=spec.get("ext_cache"), call_timeout=call_timeout,
                     init_timeout=tool.get("timeout") or spec.get("init_timeout", 300),
                     guard_seed=seeds.derive(seed, "guards") & 0xFFFFFFFF, guard_library=library,
                     hold_cudnn_benchmark=hold_cudnn_benchmark, launch_prefix=tool.get("launch_prefix"),
                     guard_bytes=tool.get("guard_bytes"))
    cand.env.update(tool.get("env") or {})
    say = emit if not tool else (lambda _rec: None)  # a tool's pass reports its own record
    if _early is not None:  # the worker started while the row waited for its go (main)
        cand.adopt(_early)
        _early = None
        rec["worker_started_ahead"] = cand.alive()
    if not isolation.drops_uid():  # never silent: a worker that keeps the driver's uid is in the record
        rec["isolation_warning"] = cand.isolation_note
    # The task's side (contract derivation, an oracle probe) is built while the worker imports: both take
    # seconds, and neither needs the other.
    side: dict = {}
    # What one case may take (the engine's estimate): the machine's limit alone, its share beside others.
    where = f"<derived: {spec['key']}>"
    machine = casemem.machine_limit()
    limit, limit_why = casemem.row_limit(spec, machine)
    # Wall seconds of the row's phases (host_threads: what each job's libraries may use), so a row's time
    # that its gates do not account for is placed.
    phases: dict = {}
    rec["phases"] = phases
    rec["host_threads"] = os.environ.get("OMP_NUM_THREADS", "")

    @contextlib.contextmanager
    def timed(name):
        since = time.monotonic()
        try:
            yield
        finally:
            phases[name] = round(phases.get(name, 0.0) + time.monotonic() - since, 3)

    def build_frontend():
        with timed("frontend"):
            _build_frontend()

    def _build_frontend():
        try:
            fe = Frontend(fw, row["ref_code"], seed, call_timeout=call_timeout,
                          case_cap=casemem.shared_limit(spec, machine)[0])
            # Before anything runs at the nominal shape (the oracle probe below is a float64 run of it): a
            # nominal case larger than the row's share beside others runs again alone (casemem.py).
            side["contract"] = fe.derived.toml
            mem = _core.case_memory(fe.derived.toml, where)
            side["case_memory"] = {"nominal": mem["nominal"], "largest": mem["largest"], "limit": limit,
                                   "limit_why": limit_why}
            alone_why = casemem.needs_alone(mem["nominal"], spec, machine)
            if alone_why:
                side["status"], side["message"] = casemem.CASE_MEMORY_STATUS, alone_why
                return
            # A case past what this row may take is refused here, in the engine's words, before the probe runs it.
            _core.check_contract(fe.derived.toml, where, case_memory=limit, case_memory_why=limit_why)
            fe.oracle(fe.draw(fe.nominal, seeds.derive(seed, "probe")), fe.nominal, [])
            side["fe"] = fe
        except ContractError as e:
            side["status"], side["message"] = "contract_error", str(e)[:2000]
        except RuntimeError as e:
            if not str(e).startswith(where):
                side["status"], side["message"] = "oracle_error", str(e)[:2000]
            else:  # the engine refused the derived contract (case_memory reads it)
                side["status"], side["message"] = "contract_error", str(e)[:2000]
        except TaskError as e:
            side["status"], side["message"] = "oracle_error", str(e)[:2000]
        except Exception as e:  # noqa: BLE001 - raised again below, as if it had happened there
            side["raise"] = e

    try:
        with timed("start"):  # the worker's start, the frontend's build inside it
            try:
                init = cand.start(meanwhile=build_frontend)
            except WorkerDied as d:
                init = {"status": "import_error" if d.kind == "crash" else "import_timeout", "message": d.detail}
        rec["import_seconds"] = round(init.get("seconds", 0.0), 2)
        if init.get("guard"):
            rec["guard_allocator"] = init["guard"]
        if init.get("status") != "ok":
            rec["status"] = init.get("status", "import_error")
            rec["message"] = init.get("message", "")[:2000]
            return rec
        if "raise" in side:
            raise side["raise"]
        for k in ("contract", "case_memory"):
            if k in side:
                rec[k] = side[k]
        if "fe" not in side:
            rec["status"], rec["message"] = side.get("status", "oracle_error"), side.get("message", "")
            return rec
        fe = side["fe"]
        rec["contract"] = fe.derived.toml
        target = CandidateTarget(cand, fe, describe=f"ModelNew ({fw_name}, worker)",
                                 device=2 if fw_name == "torch" and getattr(fw, "DEVICE", None) is not None
                                 and fw.DEVICE.type == "cuda" else 1)
        with timed("build"):
            built = cand.build_with(fe.slot(fe.nominal), fe.build_request(fe.nominal))
        if library and _allocator_unsupported(built.get("message", "")):
            rec["allocator_unsupported"] = "build"  # verify() runs the row again without it
            return rec
        if built.get("status") != "ok":
            rec["status"] = "candidate_init_error"
            rec["message"] = built.get("message", "")[:2000]
            return rec
        target.built.add(fe.slot(fe.nominal))
        wanted = spec.get("gates") or []
        ctx = Context(fw, row, seed, cand, fe)
        if not wanted or "baseline" in wanted:
            say({"type": "gate_start", "key": spec["key"], "gate": "baseline"})
            with timed("baseline"):
                r = _run_python_gate(get("baseline"), ctx, "baseline", cand)
            rec["gates"].append(r)
            say({"type": "gate", "key": spec["key"], **r})
            if library and _allocator_unsupported(r):
                # The first calls already show it: the rest of this run would only be thrown away.
                rec["allocator_unsupported"] = "baseline"
                return rec
        engine_gates = [g for g in _core.list_gates() if not wanted or g in wanted]
        engine_gates = [g for g in engine_gates if g != "baseline"]
        if engine_gates:
            order = list(engine_gates)
            say({"type": "gate_start", "key": spec["key"], "gate": order[0]})

            def on_result(text):
                g = _gate_record(json.loads(text))
                say({"type": "gate", "key": spec["key"], **g})
                nxt = order.index(g["gate"]) + 1 if g.get("gate") in order else len(order)
                if nxt < len(order):
                    say({"type": "gate_start", "key": spec["key"], "gate": order[nxt]})

            try:
                with timed("engine"):
                    report = json.loads(_core.verify(fe.derived.toml, where, target, fe.oracle,
                                                     seed=seed, gates=engine_gates,
                                                     tolerance_scale=spec.get("tolerance_scale", 1.0),
                                                     source=Source(fe), reference_runs=fe.reference_runs,
                                                     label_runs=fe.label_runs, on_result=on_result,
                                                     case_memory=limit, case_memory_why=limit_why))
            except RuntimeError as e:
                # The engine refused the derived contract before any gate ran (e.g. its nominal case needs more
                # memory than the judge allows one case): a status with the engine's reason, never a verdict
                # and never a crash of the driver.
                if not str(e).startswith(where):
                    raise
                rec["status"], rec["message"] = "contract_error", str(e)[:2000]
                return rec
            rec["gates"].extend(_gate_record(g) for g in report.get("gates", []) if g.get("gate") != "baseline")
            rec["classification"] = _classification(report)
            rec["broken_reasons"] = report.get("broken_reasons", [])
            rec["engine"] = {k: report.get(k) for k in ("schema", "kgate_version", "exit_code", "seed_str")}
        if not wanted or "public_harness" in wanted:
            say({"type": "gate_start", "key": spec["key"], "gate": "public_harness"})
            with timed("public_harness"):
                r = _run_python_gate(get("public_harness"), ctx, "public_harness", cand)
            rec["gates"].append(r)
            say({"type": "gate", "key": spec["key"], **r})
        rec["worker_restarts"] = cand.restarts
        rec["calls"] = target.calls
    finally:
        with timed("close"):
            cand.close()
        if tool:
            rec["tool_logs"] = cand.tool_logs
        rec["seconds"] = round(time.monotonic() - t0, 2)
        # What the row's workers compiled (a cache miss: at import, or in a ModelNew build), inside the
        # row's seconds, not apart from them.
        rec["compile_seconds"] = round(cand.compile_seconds, 2)
        if cand.ext_failed:  # the verdict is on the candidate's fallback, not on the kernel it meant to build
            rec["extension_build_failed"] = cand.ext_failed
    return rec


def _run_python_gate(fn, ctx, name, cand):
    """baseline and public_harness: the other harnesses' logic, mirrored in Python on purpose."""
    try:
        r = fn(ctx)
    except Exception as e:  # noqa: BLE001 - a bug of kgate's, reported as ERROR, never a verdict
        r = {"gate": name, "verdict": "ERROR", "summary": f"{type(e).__name__}: {e}"[:500],
             "traceback": traceback.format_exc()[-3000:]}
    if r.get("verdict") in ("CRASH", "TIMEOUT"):
        r["output"] = cand.output_tail()[-2000:]
    return r


_early = None  # a Candidate whose worker was started before the driver's go (main), taken over by _verify_once


def _await_go(spec) -> bool:
    """A row job the driver started ahead (scheduler.run_jobs' prestart: the spec says await_go) starts its
    candidate's worker process now (interpreter and imports; no CUDA context, no candidate code yet) and then
    waits for the driver's "go" line on stdin: only then may the row use the GPU. False: no go came (the driver
    ended the wait: the budget ran out, or the row was cancelled)."""
    global _early
    if spec.get("mode") == "verify":
        try:
            from .client import Candidate
            early = Candidate(spec.get("fw", "numpy"), spec["row"]["custom_code"], ext_cache=spec.get("ext_cache"))
            early.prespawn()
            _early = early
        except Exception:  # noqa: BLE001 - the worker then starts as it always did, after the go
            traceback.print_exc()
    line = sys.stdin.readline()
    if line.strip() != "go":
        if _early is not None:
            _early.close()
            _early = None
        return False
    return True


def main():
    global _out_fd
    _out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # The spec is one JSON line (json.dumps writes no raw newline); a row job started ahead then gets "go".
    spec = json.loads(sys.stdin.readline())
    if spec.get("await_go") and not _await_go(spec):
        return
    fw_name = spec.get("fw", "numpy")
    if spec["mode"] == "compile":
        compile_only(spec, fw_name)
        return
    rec = shared_gpu_status(verify(spec, fw_name), spec)
    if rec["status"] != "ok":
        rec["classification"] = rec["status"]
    elif "classification" not in rec:  # no engine gate was asked for: baseline alone classifies nothing
        rec["classification"] = "clean"
    emit(rec)


if __name__ == "__main__":
    main()
