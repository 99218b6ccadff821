"""The results file: one JSON object per finished row, appended as rows finish.

Resume: a row whose key and line hash are already in the file is never recomputed. A driver killed mid-write
leaves at most one partial last line; opening the file cuts it off (that row simply runs again), so nothing
finished is lost and nothing is written twice.

Retry (`kgate audit --retry STATUS`): a row whose record has one of the given statuses runs again, and its
new record takes the old one's place only once it exists. The old record goes first to the history file
beside the results (`<stem>.kgate.superseded.jsonl`), then the results file is rewritten whole to a
temporary file and renamed over the old one, so at every instant the results file holds exactly one record
per finished row.
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

    def replace(self, record: dict, history_path: str):
        """The record takes the place of the key's existing one (which is kept in history_path)."""
        key = record["key"]
        old = self.records.get(key)
        if old is None:
            return self.append(record)
        with open(history_path, "a", encoding="utf-8") as h:
            h.write(json.dumps(old, sort_keys=True, allow_nan=True) + "\n")
            h.flush()
            os.fsync(h.fileno())
        self._fh.close()
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(self.path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
            for line in src:
                try:
                    k = json.loads(line).get("key") if line.strip() else None
                except json.JSONDecodeError:
                    k = None
                if k == key:
                    line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
                dst.write(line)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)
        self.records[key] = record
        self._fh = open(self.path, "a", encoding="utf-8")

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
