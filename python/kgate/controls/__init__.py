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


def corpus_lines(controls: list[dict], seed_index: int = 0) -> list[str]:
    """One corpus row per control; the seed index is the row's level ("s3"), so every (control, seed) pair is
    its own row with its own key, and so its own seed (derived from the audit's seed and the key)."""
    return [json.dumps({"level_id": f"s{seed_index}", "task_id": c["name"], "ref_code": c["task"],
                        "custom_code": c["candidate"]}) for c in controls]


def run_controls(fw: str = "numpy", seeds_n: int = 3, results: str | None = None, jobs: int = 4,
                 call_timeout: float = 20.0, quiet: bool = True, ext_cache: str | None = None,
                 budget_s: float | None = None, work: str | None = None, records: list | None = None,
                 run: bool = True):
    """Every control over seeds_n seeds, in two audit runs: seed 0 alone (it compiles each control's
    extension once, into the cache the later runs read), then every further seed in one run, so no job slot
    idles between seeds. Both runs resume from their results files (RESULTS.seed0.jsonl and
    RESULTS.seeds.jsonl) and stop within budget_s; the matrix then says how many runs are missing.
    `records`, when given, receives every row record. run=False runs nothing: the matrix of the records
    already in the results files (a committed run's matrix, recomputed)."""
    import time
    from ..audit import audit
    from ..results import find_records, plain_name, read_results
    t0 = time.monotonic()
    controls = load(fw)
    work = work or tempfile.mkdtemp(prefix="kgpy-controls-")
    os.makedirs(work, exist_ok=True)
    ext_cache = ext_cache or os.path.join(work, "ext-cache")
    base = plain_name(results or os.path.join(work, f"controls-{fw}.jsonl"))
    recs = []
    for part, indices in (("seed0", [0]), ("seeds", list(range(1, seeds_n)))):
        if not indices:
            continue
        corpus = os.path.join(work, f"corpus-{fw}.{part}.jsonl")
        with open(corpus, "w") as f:
            f.write("\n".join(line for s in indices for line in corpus_lines(controls, s)) + "\n")
        path = base.replace(".jsonl", f".{part}.jsonl")
        left = None if budget_s is None else budget_s - (time.monotonic() - t0)
        if run and (left is None or left > 30):
            audit(corpus, results_path=path, fw=fw, seed=0xC0DE, jobs=jobs, call_timeout=call_timeout,
                  row_timeout=300, quiet=quiet, work_dir=os.path.join(work, f"w-{part}"), ext_cache=ext_cache,
                  budget_s=left)
        if find_records(path):  # RESULTS.seed0.jsonl, or .jsonl.gz once packed
            recs.extend(read_results(path))
    if records is not None:
        records.extend(recs)
    return matrix(controls, recs, seeds_n)


def matrix(controls, recs, seeds_n: int | None = None):
    by_name = {}
    for r in recs:
        by_name.setdefault(str(r.get("task")), []).append(r)
    gates = KGATE_GATES
    header = f"{'control':22s} {'expect':14s} " + " ".join(f"{g[:5]:>5s}" for g in gates) + "  field  result"
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
        # A control stands for a defect the field's test misses only if it passes that test (the producer's
        # 5 trials, allclose 1e-2: the `baseline` record) in every run; a precision-downgrade control must be
        # labelled with the precision it matches (issue 14, Deliver 5 and 6). Both used to be checked for the
        # numpy controls only (tests/python/test_audit.py), so the torch matrix on the GPU never looked.
        why = []
        if c.get("producer_passes", True):
            passed = sum(next((x for x in r.get("gates", []) if x["gate"] == "baseline"), {}).get("verdict")
                         == "PASS" for r in runs)
            field = f"{passed}/{len(runs)}"
            if passed != len(runs):
                why.append("the producer's test rejects it")
        else:
            field = "-"
        if c.get("precision"):
            labelled = sum(any(x.get("precision_label") == c["precision"] for x in r.get("gates", [])
                               if x.get("gate") in c["expect"]) for r in runs)
            if labelled != len(runs):
                why.append(f"labelled {c['precision']} in {labelled} of {len(runs)} runs")
        ok &= not why
        all_ok &= ok
        exp = ",".join(sorted(c["expect"])) or "(correct)"
        lines.append(f"{c['name']:22s} {exp:14s} " + " ".join(cells) + f"  {field:>5s}"
                     + ("  ok" if ok else "  MISSED" + (f" ({'; '.join(why)})" if why else "")))
    lines.append("")
    lines.append("cells: caught/runs for the intended gate; '.' passed; 'x' also failed (allowed for broken"
                 " controls); '!n' a correct control failed n times; field: runs that pass the producer's own"
                 " test (baseline), '-' for a control it rejects too (PRODUCER_PASSES = False)")
    if seeds_n is not None:
        missing = sum(max(0, seeds_n - len(by_name.get(c["name"], []))) for c in controls)
        if missing:
            all_ok = False
            lines.append(f"incomplete: {missing} of {seeds_n * len(controls)} runs have no record yet "
                         f"(rerun the same command to resume)")
    lines.append("all controls behave as intended" if all_ok else "SOME CONTROLS DID NOT BEHAVE AS INTENDED")
    return all_ok, "\n".join(lines)
