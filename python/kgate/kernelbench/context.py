"""What baseline and public_harness (the other harnesses' logic, mirrored in Python on purpose) work with:
the task at its nominal binding and the candidate's worker. The twelve gates are the engine's (C++); none
of them reads this."""
from __future__ import annotations

import time

from .client import WorkerDied
from .task import TaskError


class Context:
    def __init__(self, fw, row: dict, seed: int, candidate, frontend):
        self.fw, self.row, self.seed, self.cand = fw, row, seed, candidate
        self.ref_code = row["ref_code"]
        self.nominal = frontend.task(frontend.nominal)


def gate_result(gate: str, verdict: str, summary: str, **kw) -> dict:
    r = {"gate": gate, "verdict": verdict, "summary": summary}
    r.update({k: v for k, v in kw.items() if v is not None})
    return r


def timed(fn):
    """Decorator: adds seconds; the task failing is SKIP (never the candidate's), the worker dying is the
    candidate's CRASH or TIMEOUT."""
    def wrapper(ctx: Context):
        t0 = time.monotonic()
        name = fn.__module__.rsplit(".", 1)[-1]
        try:
            r = fn(ctx)
        except TaskError as e:
            r = gate_result(name, "SKIP", f"the reference cannot run: {e}")
            r["oracle_error"] = True
        except WorkerDied as d:
            r = gate_result(name, "TIMEOUT" if d.kind == "timeout" else "CRASH", d.detail)
        r["seconds"] = round(time.monotonic() - t0, 3)
        return r
    wrapper.__name__ = fn.__name__
    wrapper.__module__ = fn.__module__
    return wrapper
