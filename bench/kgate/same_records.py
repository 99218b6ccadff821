"""Whether two audits of one corpus wrote the same records apart from timings: for every row key, every
field but the ones that measure time (seconds, phases, written_at) or sign the record (mac), compared
recursively. Prints each difference with its path; exit 1 if any, 0 if none. For checking that a change
that only removes waste (bench/kgate/host_overhead.sh before and after) leaves every verdict, count and
piece of evidence as it was.

    PYTHONPATH=build-py/site python3 bench/kgate/same_records.py OLD.jsonl NEW.jsonl

The stream gate's counters and overlap count ("k of n rounds overlapped") depend on how the two calls were
scheduled, so they may differ between any two runs; they are listed apart, not counted as differences.
"""
from __future__ import annotations

import re
import sys

from kgate.results import read_results

_TIMING = re.compile(r"seconds|^phases$|^written_at$|^mac$")
_SCHEDULED = {"candidate_calls", "summary", "input_draws", "oracle_reuses", "oracle_evaluations"}


def _diff(a, b, path: str, out: list):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if _TIMING.search(k):
                continue
            _diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            tag = x.get("gate", i) if isinstance(x, dict) else i
            _diff(x, y, f"{path}[{tag}]", out)
    elif a != b:
        out.append((path, a, b))


def main(old: str, new: str) -> int:
    olds = {r["key"]: r for r in read_results(old)}
    news = {r["key"]: r for r in read_results(new)}
    diffs, scheduled = [], []
    for key in sorted(set(olds) | set(news)):
        if key not in olds or key not in news:
            diffs.append((key, "present" if key in olds else "<absent>", "present" if key in news else "<absent>"))
            continue
        found: list = []
        _diff(olds[key], news[key], key, found)
        for d in found:
            (scheduled if "[stream]" in d[0] and d[0].rsplit(".", 1)[-1] in _SCHEDULED else diffs).append(d)
    for path, a, b in scheduled:
        print(f"scheduling-dependent (stream): {path}: {str(a)[:120]!r} -> {str(b)[:120]!r}")
    for path, a, b in diffs:
        print(f"DIFFERS: {path}: {str(a)[:200]!r} -> {str(b)[:200]!r}")
    print(f"{len(olds)} and {len(news)} rows; {len(diffs)} differences beyond timings"
          + (f" ({len(scheduled)} scheduling-dependent stream fields apart)" if scheduled else ""))
    return 1 if diffs else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
