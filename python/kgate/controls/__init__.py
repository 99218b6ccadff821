"""Positive controls (defence 1): KernelBench-format candidates with one planted defect each, and correct
ones. `python -m kgate controls --fw torch|numpy` audits them all over several seeds, through exactly the
audit path (rowjob, worker, gates), and prints the detection matrix: every broken control must be caught by
its intended gate on every seed, and every correct control must pass every gate."""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import tempfile

from ..classify import GATES as KGATE_GATES, counted_failure

FAILING = ("FAIL", "CRASH", "TIMEOUT")


def load(fw: str) -> list[dict]:
    pkg = importlib.import_module(f"{__name__}.{fw}")
    out = []
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
        first = (mod.__doc__ or open(mod.__file__).readline().lstrip("# ").strip())
        out.append({"name": m.name, "task": pkg.TASKS[mod.TASK], "candidate": mod.CANDIDATE,
                    "expect": set(mod.EXPECT), "what": first,
                    # the lower precision a precision-downgrade control must be labelled with, if any
                    "precision": getattr(mod, "PRECISION", None),
                    # whether the control passes the producer's own test (5 trials, allclose 1e-2): every
                    # defect control does, a control of a status (a crash, a hang) cannot
                    "producer_passes": getattr(mod, "PRODUCER_PASSES", True)})
    return out


def corpus_lines(controls: list[dict]) -> list[str]:
    return [json.dumps({"level_id": "control", "task_id": c["name"], "ref_code": c["task"],
                        "custom_code": c["candidate"]}) for c in controls]


def run_controls(fw: str = "numpy", seeds_n: int = 3, results: str | None = None, jobs: int = 4,
                 call_timeout: float = 20.0, quiet: bool = True, records: list | None = None):
    """The detection matrix (ok, text); `records`, when given, receives every row record."""
    from ..audit import audit
    from ..results import read_results
    controls = load(fw)
    work = tempfile.mkdtemp(prefix="kgpy-controls-")
    corpus = os.path.join(work, f"controls-{fw}.jsonl")
    with open(corpus, "w") as f:
        f.write("\n".join(corpus_lines(controls)) + "\n")
    recs = []
    for s in range(seeds_n):
        path = (results or os.path.join(work, f"controls-{fw}.jsonl")).replace(".jsonl", f".seed{s}.jsonl")
        audit(corpus, results_path=path, fw=fw, seed=0xC0DE + s, jobs=jobs, call_timeout=call_timeout,
              row_timeout=300, quiet=quiet, work_dir=os.path.join(work, f"w{s}"))
        recs.extend(read_results(path))
    if records is not None:
        records.extend(recs)
    return matrix(controls, recs)


def matrix(controls, recs):
    by_name = {}
    for r in recs:
        by_name.setdefault(str(r.get("task")), []).append(r)
    gates = KGATE_GATES
    header = f"{'control':22s} {'expect':14s} " + " ".join(f"{g[:5]:>5s}" for g in gates) + "  result"
    lines = [header, "-" * len(header)]
    all_ok = True
    for c in controls:
        runs = by_name.get(c["name"], [])
        cells = []
        ok = bool(runs)
        for g in gates:
            recs = [next((x for x in r.get("gates", []) if x["gate"] == g), {}) for r in runs]
            # caught: a failure the engine counts (not attributed to another gate, not out of domain);
            # for a correct control any failing verdict inside the task's domain is a false positive (one
            # outside it is labelled, never counted: a kernel may rely on the structure its task guarantees)
            failed = sum(counted_failure(x) if g in c["expect"]
                         else x.get("verdict") in FAILING and not x.get("out_of_domain", False) for x in recs)
            if g in c["expect"]:
                ok &= failed == len(runs)
                cells.append(f"{failed}/{len(runs)}".rjust(5))
            else:
                if not c["expect"]:  # a correct control: nothing may fail
                    ok &= failed == 0
                cells.append(("x" if failed else ".").rjust(5) if failed == 0 or c["expect"] else f"!{failed}".rjust(5))
        for r in runs:
            ok &= r.get("status") == "ok"
        all_ok &= ok
        exp = ",".join(sorted(c["expect"])) or "(correct)"
        lines.append(f"{c['name']:22s} {exp:14s} " + " ".join(cells) + ("  ok" if ok else "  MISSED"))
    lines.append("")
    lines.append("cells: caught/runs for the intended gate; '.' passed; 'x' also failed (allowed for broken"
                 " controls); '!n' a correct control failed n times")
    lines.append("all controls behave as intended" if all_ok else "SOME CONTROLS DID NOT BEHAVE AS INTENDED")
    return all_ok, "\n".join(lines)
