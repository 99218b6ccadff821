"""DESIGN.md's classification of a kernel from its gate records, under a tolerance multiplier (the threshold
sweep) and a precision-downgrade policy. Pure Python: the report uses it on results files alone."""
from __future__ import annotations

import math

from .kernelbench.gates import BROKEN_RATIO, KGATE_GATES, RATIO_GATES, TOLERANCE_FREE

FAILING = ("FAIL", "CRASH", "TIMEOUT")


def gate_fails(g: dict, scale: float = 1.0, excuse_downgrade: bool = False) -> bool:
    """Whether this gate record counts as a failure when every tolerance is multiplied by `scale`."""
    v = g.get("verdict")
    if v not in FAILING:
        return False
    if v in ("CRASH", "TIMEOUT"):
        return True
    if g["gate"] in TOLERANCE_FREE:
        return True
    if excuse_downgrade and g.get("downgrade"):
        return False
    r = g.get("error_ratio")
    if r is None or (isinstance(r, float) and math.isnan(r)):
        return True  # a structural failure (wrong shape, exception): no tolerance explains it
    return r > scale


def classify(gates: list[dict], scale: float = 1.0, excuse_downgrade: bool = False) -> str:
    mine = [g for g in gates if g.get("gate") in KGATE_GATES]
    broken = False
    violation = False
    for g in mine:
        if not gate_fails(g, scale, excuse_downgrade):
            continue
        violation = True
        if g["gate"] in TOLERANCE_FREE:
            broken = True
        elif g["gate"] in RATIO_GATES:
            r = g.get("error_ratio")
            if g.get("verdict") in ("CRASH", "TIMEOUT") or r is None or (isinstance(r, float) and math.isnan(r)) \
                    or r >= BROKEN_RATIO * scale:
                broken = True
    return "broken" if broken else "violation" if violation else "clean"
