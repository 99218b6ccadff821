"""Reading the engine's classification out of row records. The definition of *broken*, *violation*,
*incomplete* and *clean* lives in C++ only (kgate::classify, docs/report.md; which FAIL findings are
violation-only, never broken, is kgate::violation_only: "indeterminate form" and "non-finite value past the
oracle's spread"): each row record carries the engine's
`classification` and `broken_reasons`, and each gate record the engine's `counted`, `attributed_to`,
`out_of_domain` and `precision_label` (a row whose gate records come from two runs, the guard allocator's
second pass, is classified by the engine through kgate._core.classify). Nothing here decides a class; it
reads one, and says which gate records still fail when every tolerance is multiplied by m (the threshold
sweep reads a ratio, it does not reclassify)."""
from __future__ import annotations

import math

# The twelve gates in the engine's order (kgate._core.list_gates(); tests/python/test_kernelbench.py checks
# the two agree): a display order for reports rendered without the extension.
GATES = ["oracle", "nan", "inf", "determinism", "shapes", "accumulation", "immutability", "coverage", "bounds",
         "freshness", "stream", "layout"]
FAILING = ("FAIL", "CRASH", "TIMEOUT")
CLASSES = ("broken", "violation", "incomplete", "clean")
REJECTS = ("broken", "violation", "judge_attacked")  # the classes that reject a kernel (incomplete does not)


def classification(rec: dict) -> str:
    """The engine's class of an audited row; for a row that never reached the engine, its status (a row
    whose driver died keeps its status: the stop is the audit's, never evidence against the candidate)."""
    c = str(rec.get("classification") or rec.get("status") or "")
    return "broken" if c.startswith("broken") else c


def gate_family(name) -> str:
    """The gate a gate record's `gate` belongs to: "bounds/memcheck" (the bounds gate's compute-sanitizer pass,
    kernelbench/sanitizer.py) is the bounds gate's, judged as it is (tolerance-free) by the engine."""
    return str(name or "").partition("/")[0]


def deeper_pass(name) -> bool:
    """Whether a gate record's `gate` names a gate's deeper pass ("bounds/memcheck"), not the gate itself."""
    return gate_family(name) != str(name or "")


def counted_failure(g: dict) -> bool:
    """A gate record the engine counts against the candidate: a failing verdict, not attributed to another
    gate, not out of the task's domain. A compute-sanitizer pass's failure counts (as its gate family's)."""
    return (gate_family(g.get("gate")) in GATES and g.get("verdict") in FAILING and g.get("counted", True)
            and not g.get("out_of_domain", False))


def engine_classification(gates: list[dict]) -> dict:
    """The engine's {'classification', 'broken_reasons', 'exit_code'} of a row's gate records: kgate._core.classify
    over the records of the engine's gates (a bounds/<tool> record of a compute-sanitizer pass counts as its gate
    family's; the baseline and the public harnesses' mirrors are not the engine's and are left out). Needs the
    extension; the class is the engine's, as verify() gives it for those results."""
    from . import _core
    engine_gates = set(_core.list_gates()) - {"baseline"}
    return _core.classify([g for g in gates if gate_family(g.get("gate")) in engine_gates])


def finite_ratio(g: dict | None) -> float | None:
    """A gate record's error ratio (largest error / bound) where it is a finite number, else None (no bound behind the
    finding, or an infinite or NaN error)."""
    r = (g or {}).get("error_ratio")
    return r if isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) else None


def fails_at_scale(g: dict, scale: float = 1.0) -> bool:
    """Whether a counted failure still fails with its bound multiplied by `scale`: a failure with no bound
    behind it (error_ratio null: tolerance-free, crash, wrong shape) always does."""
    if not counted_failure(g):
        return False
    r = g.get("error_ratio")
    if r is None or r == "inf" or (isinstance(r, float) and (math.isnan(r) or math.isinf(r))):
        return True
    return float(r) > scale


# Kept for callers that classify a partial record (audit.py: a row whose driver died mid-row): the engine
# never saw the whole row, so the only honest reading is "violation" when a counted gate failed, else the
# row's status. Never "broken": that is the engine's word alone.
def classify(gates: list[dict]) -> str:
    return "violation" if any(counted_failure(g) for g in gates) else "clean"
