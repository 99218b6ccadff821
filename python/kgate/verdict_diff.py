"""Row-by-row difference between two audits of one corpus file: for every row whose verdict changed, the old
and the new classification, the gates whose verdict or attribution changed, and the new gate's own words as
the reason. Used when an audit is rerun under a changed engine (results/README.md), so no verdict changes
without a stated reason.

    python -m kgate diff OLD.jsonl NEW.jsonl [--out DIFF.md]
"""
from __future__ import annotations

import json
from collections import Counter

from .classify import finite_ratio
from .results import open_records, plain_name

_FAILING = ("FAIL", "CRASH")


def _latest(path: str) -> dict[str, dict]:
    """The current record of each row: the last 'row' record with that key."""
    out: dict[str, dict] = {}
    with open_records(path, text=True) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
            if rec.get("type", "row") == "row" and "key" in rec:
                out[rec["key"]] = rec
    return out


def _verdict(rec: dict) -> str:
    return rec.get("classification") or rec.get("status") or "?"


def _gate_state(g: dict) -> str:
    """One word for what a gate record says: its verdict, with 'not counted' or 'out of domain' where the
    finding was set aside."""
    v = g.get("verdict", "?")
    if v in _FAILING and g.get("out_of_domain"):
        return f"{v} (out of domain)"
    if v in _FAILING and g.get("counted") is False:
        return f"{v} (counted under {g.get('attributed_to', 'another gate')})"
    return v


def _gates(rec: dict) -> dict[str, dict]:
    return {g["gate"]: g for g in rec.get("gates", []) if "gate" in g}


def row_changes(old: dict, new: dict) -> list[tuple[str, str, str, str]]:
    """(gate, old state, new state, new summary) for every gate whose state differs."""
    a, b = _gates(old), _gates(new)
    out = []
    for name in list(dict.fromkeys([*a, *b])):
        sa = _gate_state(a[name]) if name in a else "absent"
        sb = _gate_state(b[name]) if name in b else "absent"
        if sa != sb:
            out.append((name, sa, sb, (b.get(name) or {}).get("summary", "")))
    return out


def ratio_changes(old: dict, new: dict) -> list[tuple[str, float | None, float | None]]:
    """(gate, old error ratio, new error ratio) for every gate that failed in either record and whose error ratio
    (largest error / bound) differs by more than 1%: where a tolerance failure's ratio crosses the 100x line, the
    class changes with no gate verdict changing (docs/report.md, "Near the line")."""
    a, b = _gates(old), _gates(new)
    out = []
    for name in list(dict.fromkeys([*a, *b])):
        ga, gb = a.get(name), b.get(name)
        if not any((g or {}).get("verdict") in _FAILING for g in (ga, gb)):
            continue
        ra, rb = finite_ratio(ga), finite_ratio(gb)
        if ra is None and rb is None:
            continue
        if ra is not None and rb is not None and abs(ra - rb) <= 0.01 * max(abs(ra), abs(rb)):
            continue
        out.append((name, ra, rb))
    return out


def _x(r: float | None) -> str:
    return f"{r:.3g}x" if r is not None else "none"


def diff(old_path: str, new_path: str) -> str:
    old, new = _latest(old_path), _latest(new_path)
    keys = list(dict.fromkeys([*old, *new]))
    moves: Counter = Counter()
    lines = [f"# Verdicts, {plain_name(old_path)} -> {plain_name(new_path)}", "",
             "Every row whose classification or status changed, with each gate whose verdict or attribution "
             "changed and that gate's new summary as the reason, and each failing gate whose error ratio (error / "
             "bound) moved: a tolerance failure at or past 100x its bound is broken, below it a violation, so a "
             "ratio crossing that line changes the class with no verdict changing.", ""]
    body = []
    for k in keys:
        o, n = old.get(k), new.get(k)
        vo = _verdict(o) if o else "absent"
        vn = _verdict(n) if n else "absent"
        moves[(vo, vn)] += 1
        if vo == vn:
            continue
        body.append(f"## {k}: {vo} -> {vn}")
        if o and n:
            ch = row_changes(o, n)
            for gate, sa, sb, why in ch:
                body.append(f"- {gate}: {sa} -> {sb}" + (f": {why}" if why else ""))
            rc = ratio_changes(o, n) if {vo, vn} <= {"broken", "violation", "clean", "incomplete"} else []
            for gate, ra, rb in rc:
                body.append(f"- {gate}: error ratio {_x(ra)} -> {_x(rb)} of its bound")
            if not ch and not rc:
                body.append(f"- no gate changed; status {o.get('status')} -> {n.get('status')}: "
                            f"{n.get('message', '')}".rstrip(": "))
        elif n:
            body.append(f"- new row: {n.get('message', '')}")
        body.append("")
    lines.append("| old | new | rows |")
    lines.append("|---|---|---|")
    for (vo, vn), c in sorted(moves.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {vo} | {vn} | {c} |")
    lines.append("")
    changed = sum(c for (vo, vn), c in moves.items() if vo != vn)
    lines.append(f"{len(keys)} rows, {changed} changed.")
    lines.append("")
    return "\n".join(lines + body)
