"""Reading a corpus file (JSON Lines, one KernelBench task and its candidate per line).

A line that is not JSON, or lacks a field, is still a row: it gets a key and a verdict that says what is
wrong (BAD_ROW), and the audit goes on. Keys are stable across reruns of the same file, so resume works.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

from .results import open_records, plain_name

REQUIRED_FIELDS = ("level_id", "task_id", "ref_code", "custom_code")

# Markers of candidates that build native code when their module is executed; these go through the
# parallel compile phase first (their compile time is reported apart).
COMPILE_MARKERS = ("load_inline", "cpp_extension.load", "RawKernel", "RawModule", "cupy", "triton.jit", "@triton")


@dataclass
class Row:
    index: int               # 0-based line number in the file
    key: str                 # stable identifier: "<stem>/L<level>/T<task>" (or "<stem>/line<n>")
    sha: str                 # sha256 of the line, so a changed line is not mistaken for a finished one
    data: dict = field(default_factory=dict)
    problem: str | None = None   # why the row cannot be audited (BAD_ROW), if it cannot

    @property
    def level(self):
        return self.data.get("level_id")

    @property
    def task(self):
        return self.data.get("task_id")

    def has_candidate(self) -> bool:
        c = self.data.get("custom_code")
        return isinstance(c, str) and c.strip() not in ("", "None")

    def needs_compile(self) -> bool:
        c = self.data.get("custom_code") or ""
        return isinstance(c, str) and any(m in c for m in COMPILE_MARKERS)


def stem_of(path: str) -> str:
    base = os.path.basename(plain_name(path))
    for ext in (".jsonl", ".json"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def read_rows(path: str) -> list[Row]:
    stem = stem_of(path)
    rows: list[Row] = []
    seen: dict[str, int] = {}
    with open_records(path) as f:  # a corpus file may be packed too (X.jsonl.gz)
        for index, raw in enumerate(f):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            sha = hashlib.sha256(raw.rstrip(b"\n")).hexdigest()[:16]
            row = Row(index=index, key=f"{stem}/line{index + 1}", sha=sha)
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                row.problem = f"line {index + 1} is not JSON: {e.msg} at column {e.colno}"
                rows.append(row)
                continue
            if not isinstance(data, dict):
                row.problem = f"line {index + 1} is JSON but not an object"
                rows.append(row)
                continue
            row.data = data
            missing = [k for k in REQUIRED_FIELDS if k not in data]
            if missing:
                row.problem = f"line {index + 1} lacks field(s) {', '.join(missing)}"
            elif not isinstance(data.get("ref_code"), str):
                row.problem = f"line {index + 1}: ref_code is not a string"
            if "level_id" in data and "task_id" in data:
                key = f"{stem}/L{data['level_id']}/T{data['task_id']}"
                if key in seen:  # a duplicated task keeps its line number so both rows survive
                    key = f"{key}/line{index + 1}"
                seen[key] = index
                row.key = key
            rows.append(row)
    return rows


def parse_shard(text: str | None) -> tuple[int, int]:
    """'i/N' (0-based i) -> (i, N). None -> (0, 1)."""
    if not text:
        return 0, 1
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard wants i/N with integers, got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {text}: need 0 <= i < N")
    return i, n


def in_shard(row: Row, shard: tuple[int, int]) -> bool:
    """Rows are dealt round-robin by line number: stable, and balanced across levels."""
    i, n = shard
    return row.index % n == i
