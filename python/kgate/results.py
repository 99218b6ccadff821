"""The results file: one JSON object per finished row, appended as rows finish.

Resume: a row whose key and line hash are already in the file is never recomputed. A driver killed mid-write
leaves at most one partial last line; opening the file cuts it off (that row simply runs again), so nothing
finished is lost and nothing is written twice.
"""
from __future__ import annotations

import json
import os


class ResultsFile:
    def __init__(self, path: str):
        self.path = path
        self.records: dict[str, dict] = {}
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        self._repair_tail()
        self._load()
        self._fh = open(path, "a", encoding="utf-8")

    def _repair_tail(self):
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # Walk back to the last newline: everything after it is a record cut off by a kill.
            pos = size - 1
            chunk = 4096
            while pos > 0:
                start = max(0, pos - chunk)
                f.seek(start)
                buf = f.read(pos - start)
                nl = buf.rfind(b"\n")
                if nl >= 0:
                    f.truncate(start + nl + 1)
                    return
                pos = start
            f.truncate(0)

    def _load(self):
        if not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # cannot happen after _repair_tail unless edited by hand; skip, never crash
                key = rec.get("key")
                if key and key not in self.records:  # the first record of a key wins
                    self.records[key] = rec

    def done(self, key: str, sha: str | None = None) -> bool:
        rec = self.records.get(key)
        return rec is not None and (sha is None or rec.get("sha") == sha)

    def append(self, record: dict):
        key = record["key"]
        if key in self.records:
            return  # never duplicate a finished row
        self._fh.write(json.dumps(record, sort_keys=True, allow_nan=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.records[key] = record

    def close(self):
        self._fh.close()


def read_results(path: str) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out
