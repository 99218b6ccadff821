"""One row of a corpus, in its own process: the driver side of every gate (references, oracle, comparisons)
with the candidate in a worker below it. Reads a JSON spec on stdin; writes JSON lines on its stdout (the
task's and kgate's own prints are moved to stderr, so nothing can forge a record): "gate_start" and "gate" as
each gate runs, and a final "row" (verify) or "compile" record."""
from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback

from .. import seeds
from ..classify import classify

_out_fd = None
DEAD_LIMIT = 3


def emit(rec: dict):
    os.write(_out_fd, (json.dumps(rec, allow_nan=True, default=str) + "\n").encode())


def compile_only(spec, fw_name):
    from .client import Candidate, WorkerDied
    cand = Candidate(fw_name, spec["row"]["custom_code"], ext_cache=spec.get("ext_cache"),
                     init_timeout=spec.get("compile_timeout", 600))
    t0 = time.monotonic()
    try:
        reply = cand.start()
    except WorkerDied as d:
        reply = {"status": d.kind, "message": d.detail, "output": d.output[-2000:]}
    finally:
        cand.close()
    emit({"type": "compile", "key": spec["key"], "sha": spec["sha"], "status": reply.get("status"),
          "message": reply.get("message", "")[:2000], "seconds": round(time.monotonic() - t0, 2),
          "compile_seconds": round(reply.get("compile_seconds", 0.0), 2)})


def verify(spec, fw_name):
    from .client import Candidate, WorkerDied
    from .context import Context, OracleError
    from .gates import ORDER, get
    from .task import TaskError

    fw = importlib.import_module(f"kgate.kernelbench.fw_{fw_name}")
    row = spec["row"]
    seed = int(spec["seed"], 16)
    rec = {"type": "row", "key": spec["key"], "sha": spec["sha"], "file": spec.get("file"),
           "level": row.get("level_id"), "task": row.get("task_id"), "seed": f"{seed:016x}", "fw": fw_name,
           "gates": [], "status": "ok", "needs_compile": spec.get("needs_compile", False)}
    t0 = time.monotonic()
    cand = Candidate(fw_name, row["custom_code"], ext_cache=spec.get("ext_cache"),
                     call_timeout=spec.get("call_timeout", 60), init_timeout=spec.get("init_timeout", 300))
    try:
        try:
            init = cand.start()
        except WorkerDied as d:
            init = {"status": "import_error" if d.kind == "crash" else "import_timeout", "message": d.detail}
        rec["import_seconds"] = round(init.get("seconds", 0.0), 2)
        rec["compile_seconds"] = round(init.get("compile_seconds", 0.0), 2)
        if init.get("status") != "ok":
            rec["status"] = init.get("status", "import_error")
            rec["message"] = init.get("message", "")[:2000]
            return rec
        try:
            ctx = Context(fw, row, seed, cand, tolerance_scale=spec.get("tolerance_scale", 1.0))
            ctx.reference(ctx.nominal, ctx.inputs(ctx.nominal, "probe"), "f64")
        except (TaskError, OracleError) as e:
            rec["status"] = "oracle_error"
            rec["message"] = str(e)[:2000]
            return rec
        built = ctx.ensure_built(ctx.nominal)
        if not built.ok:
            rec["status"] = "candidate_init_error" if built.died is None else f"candidate_init_{built.died.kind}"
            rec["message"] = built.why()[:2000]
            return rec
        wanted = spec.get("gates") or ORDER
        dead_run = []  # verdicts of the latest consecutive gates that crashed or timed out
        for name in [g for g in ORDER if g in wanted]:
            ctx.current_gate = name
            emit({"type": "gate_start", "key": spec["key"], "gate": name})
            if len(dead_run) >= DEAD_LIMIT:
                # A candidate that dies in every gate would cost a restart per gate; its verdict is known.
                r = {"gate": name, "verdict": dead_run[-1], "summary": f"not run: the candidate ended as "
                     f"{dead_run[-1]} in the previous {len(dead_run)} gates"}
                rec["gates"].append(r)
                emit({"type": "gate", "key": spec["key"], **r})
                continue
            try:
                r = get(name)(ctx)
            except Exception as e:  # noqa: BLE001 - a bug of kgate's, reported as ERROR, never a verdict
                r = {"gate": name, "verdict": "ERROR", "summary": f"{type(e).__name__}: {e}"[:500],
                     "traceback": traceback.format_exc()[-3000:]}
            if r.get("verdict") in ("CRASH", "TIMEOUT"):
                r["output"] = cand.output_tail()[-2000:]
                dead_run.append(r["verdict"])
            elif r.get("verdict") not in ("SKIP",):
                dead_run = []
            rec["gates"].append(r)
            emit({"type": "gate", "key": spec["key"], **r})
        rec["worker_restarts"] = cand.restarts
        rec["calls"] = ctx.calls
    finally:
        cand.close()
        rec["seconds"] = round(time.monotonic() - t0, 2)
    return rec


def main():
    global _out_fd
    _out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spec = json.loads(sys.stdin.read())
    fw_name = spec.get("fw", "numpy")
    if spec["mode"] == "compile":
        compile_only(spec, fw_name)
        return
    rec = verify(spec, fw_name)
    rec["classification"] = classify(rec["gates"]) if rec["status"] == "ok" else rec["status"]
    emit(rec)


if __name__ == "__main__":
    main()
