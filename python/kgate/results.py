"""The results file: one JSON object per finished row, written by the audit driver alone.

Trust. Every record the driver writes carries `mac`, an HMAC-SHA256 over the record's canonical JSON (sorted
keys, without `mac`) under a 32-byte key the driver keeps in `<results stem>.key` (created 0600, owner only,
refused when anyone else can read it). The key is never in the row job's spec, argv or environment, nor in
the worker's. On open, a line whose MAC does not verify (a forged "clean" record, a hand edit, a line cut
by a kill) is not trusted: it moves to `<stem>.rejected.jsonl` and the row is treated as not done. The key
file is what a candidate would need; it holds only as far as the candidate cannot read files of the
driver's user (kgate-isolate's unprivileged uid and private mounts; see docs/security.md).

One record per row, newest wins. Records carry `written_at`; when a file holds several trusted records for
one key (a rewrite cut by a kill, two files concatenated), the newest is kept and the others move to
`<stem>.superseded.jsonl`; the results file is then rewritten (temporary file, fsync, rename), so `report`
never counts a row twice.

Resume: a row whose key and corpus line hash match a trusted record is never recomputed. A row whose line
changed runs once more; its new record replaces the old one in place (the old one goes to the superseded
file, with `superseded_because`), so the next run finds it done.

Appends are one write(2) of a whole line on an O_APPEND descriptor, then fsync; a rewrite goes through a
temporary file and rename, so at every instant the file holds at most one record per row.

Packed records. A run writes plain `X.jsonl` (appended as rows finish, so a crash loses nothing); a finished
file is committed packed, `X.jsonl.gz` (pack(): gzip with no name and mtime 0, so the same records pack to the
same bytes). Every reader opens records through open_records(), given either name; a writer resuming a packed
file unpacks it in place first (unpack_to_resume()). Outputs name a record file by its plain name, so packing
changes no table.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import hmac
import io
import json
import os
import secrets
import stat
import time
import zlib


class TrustError(Exception):
    """The results cannot be trusted or written as asked (key readable by others, unsigned records)."""


class RecordsError(Exception):
    """A records file that cannot be read or resumed as asked (both forms of it at once, a packed file that is not
    whole gzip, a plain file cut mid-line given to pack): one line naming the file, exit status 2."""


PACKED = ".gz"


def plain_name(path: str) -> str:
    """A record file's name as its run wrote it: X.jsonl for X.jsonl.gz (either given)."""
    return path[: -len(PACKED)] if path.endswith(PACKED) else path


def find_records(path: str) -> str | None:
    """The file holding the records named `path` (X.jsonl or X.jsonl.gz, either name given): the one of the two
    that exists, None when neither does. Both at once is a RecordsError: a pack cut short, or records written
    beside packed ones, and which of the two is current cannot be told."""
    plain = plain_name(path)
    packed = plain + PACKED
    here = [p for p in (plain, packed) if os.path.lexists(p)]
    if len(here) == 2:
        raise RecordsError(f"{plain} and {packed} both exist: keep one (scripts/results-pack "
                           f"{os.path.dirname(plain) or '.'} removes the plain one when both hold the same records)")
    return here[0] if here else None


@contextlib.contextmanager
def open_records(path: str, text: bool = False):
    """The one way records are read: opens X.jsonl or X.jsonl.gz, whichever exists (find_records), given either
    name; binary lines, or text (UTF-8) with text=True. FileNotFoundError naming `path` when neither exists;
    RecordsError naming the file when a packed one is not whole gzip."""
    found = find_records(path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    with _open_this(found, text) as f:
        yield f


@contextlib.contextmanager
def _open_this(found: str, text: bool = False):
    """One given file of records, gunzipped when its name ends with .gz."""
    f = gzip.open(found, "rb") if found.endswith(PACKED) else open(found, "rb")
    try:
        with f:
            yield io.TextIOWrapper(f, encoding="utf-8") if text else f
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise RecordsError(f"{found}: not a whole gzip file ({e})") from None


def _read_this(found: str) -> bytes:
    with _open_this(found) as f:
        return f.read()


def records_sha256(path: str) -> str:
    """SHA-256 of the records as their run wrote them (the unpacked bytes), so packing a file changes no hash."""
    h = hashlib.sha256()
    with open_records(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0 at level 9: the same bytes in, the same bytes out."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as g:
        g.write(data)
    return buf.getvalue()


def _write_beside(final: str, data: bytes, mode: int):
    """data into `final` through a temporary file beside it (fsync, rename, fsync of the folder), with `mode`."""
    tmp = f"{final}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def pack(path: str) -> str | None:
    """Packs the finished records file X.jsonl (either name given) into X.jsonl.gz in place: deterministic gzip
    (_gzip_bytes), the packed file read back from the disk and compared with the plain one before the plain one
    is removed, the file mode kept. Returns the packed path, None when the file was packed already. A plain file
    whose last line is not whole (a run still writing it, or cut by a kill) is refused. When both forms exist
    and hold the same records, the plain one is removed (a pack cut short); different records: RecordsError."""
    plain = plain_name(path)
    packed = plain + PACKED
    if not os.path.lexists(plain):
        if os.path.lexists(packed):
            return None
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), plain)
    with open(plain, "rb") as f:
        data = f.read()
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
    if data and not data.endswith(b"\n"):
        raise RecordsError(f"{plain}: its last line is not whole (a run still writing it, or cut): not packed")
    if os.path.lexists(packed):
        if _read_this(packed) != data:
            raise RecordsError(f"{plain} and {packed} both exist and hold different records: keep one")
    else:
        _write_beside(packed, _gzip_bytes(data), mode)
        if _read_this(packed) != data:
            os.unlink(packed)
            raise RecordsError(f"{packed}: does not read back as {plain}: not packed")
    os.unlink(plain)
    return packed


def unpack_to_resume(path: str) -> str:
    """The plain file a writer appends to, given either name. When only the packed form exists (a finished file
    resumed: --adopt-unsigned on committed records, a run continued in its folder), it is unpacked in place
    first (the plain file written beside it and read back, then the .gz removed), so the run appends to plain
    records as every run does; scripts/results-pack packs it again once the run is done. Returns the plain
    name; RecordsError when both forms exist or the packed one is not whole."""
    plain = plain_name(path)
    found = find_records(plain)
    if found is None or found == plain:
        return plain
    data = _read_this(found)
    # closed to others as every file the driver writes (RESULTS_MODE, _closed_to_others): a committed .gz is 0644
    _write_beside(plain, data, stat.S_IMODE(os.stat(found).st_mode) & 0o770)
    if _read_this(plain) != data:
        os.unlink(plain)
        raise RecordsError(f"{plain}: unpacked from {found}, does not read back the same: left packed")
    os.unlink(found)
    return plain


# Left plain when a folder is packed: glr's training logs (results/train/*/metrics.jsonl), which glr.plot and
# glr.sweep read; the glr package does not depend on kgate, and a second reader of packed files is what
# open_records exists to avoid.
LEFT_PLAIN = ("metrics.jsonl",)


def pack_paths(paths) -> list[tuple[str, int, int]]:
    """pack() on every *.jsonl file under each folder in `paths` (recursively, names sorted, LEFT_PLAIN left) and
    on each file named. Returns (packed path, plain bytes, packed bytes) per file packed; stops at the first
    RecordsError or OSError, leaving the files packed so far packed (a rerun goes on from there)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            for d, subdirs, names in os.walk(p):
                subdirs.sort()
                files += [os.path.join(d, n) for n in sorted(names)
                          if n.endswith(".jsonl") and n not in LEFT_PLAIN and not os.path.islink(os.path.join(d, n))]
        elif find_records(p) is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
        else:
            files.append(plain_name(p))
    out = []
    for f in files:
        size = os.path.getsize(f) if os.path.lexists(f) else None
        packed = pack(f)
        if packed is not None:
            out.append((packed, size, os.path.getsize(packed)))
    return out


def stem(path: str) -> str:
    path = plain_name(path)
    return path[: -len(".jsonl")] if path.endswith(".jsonl") else path


def key_path(results_path: str) -> str:
    """Where the MAC key of a results file lives (the compile log and journals share their results' key)."""
    s = stem(results_path)
    for suffix in (".compile", ".attempts"):
        if s.endswith(suffix):
            s = s[: -len(suffix)]
    return s + ".key"


def _canonical(rec: dict) -> bytes:
    return json.dumps({k: v for k, v in rec.items() if k != "mac"}, sort_keys=True, allow_nan=True).encode()


def sign(rec: dict, key: bytes) -> dict:
    out = {k: v for k, v in rec.items() if k != "mac"}
    out["mac"] = hmac.new(key, _canonical(out), hashlib.sha256).hexdigest()
    return out


def verify(rec: dict, key: bytes) -> bool:
    mac = rec.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(
        mac, hmac.new(key, _canonical(rec), hashlib.sha256).hexdigest())


def load_key(results_path: str, create: bool) -> bytes | None:
    """The driver's key: read (refused when group or others may read it, or another user owns it), or created
    0600 when `create`. None when there is none and create is false."""
    path = key_path(results_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        if not create:
            return None
        key = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, key.hex().encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        return key
    except OSError as e:
        raise TrustError(f"cannot read the results key {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise TrustError(f"the results key {path} is readable by others or not ours (mode "
                             f"{st.st_mode & 0o777:o}, uid {st.st_uid}): anyone who reads it can forge records")
        text = os.read(fd, 200).decode(errors="replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise TrustError(f"the results key {path} is not 64 hex digits")
    return key


# Results, journals and their side files are closed to others (a candidate's worker runs as uid 65534 and,
# outside its private /tmp, could read them by path: a row's seed is in its record, and a retried or changed
# row runs again with the same seed). The group keeps read access.
RESULTS_MODE = 0o640


def _closed_to_others(fd: int):
    st = os.fstat(fd)
    if st.st_mode & 0o007 and st.st_uid == os.geteuid():
        os.fchmod(fd, st.st_mode & 0o770)


def _append_line(path: str, rec: dict):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, RESULTS_MODE)
    try:
        _closed_to_others(fd)
        os.write(fd, (json.dumps(rec, sort_keys=True, allow_nan=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_lines(path: str):
    """(position, record or None, raw line) for every non-empty line."""
    out = []
    with open_records(path) as f:
        for pos, raw in enumerate(f):
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError:
                rec = None
            if not isinstance(rec, dict):
                rec = None
            out.append((pos, rec, text))
    return out


def _newest(a: tuple, b: tuple) -> bool:
    """Is record b (position, rec) newer than a?"""
    ta, tb = a[1].get("written_at", 0) or 0, b[1].get("written_at", 0) or 0
    return (tb, b[0]) >= (ta, a[0])


class ResultsFile:
    """One trusted record per key. adopt: sign records that carry no MAC (a file from before records were
    signed, vouched for by the user with --adopt-unsigned) instead of rejecting them; adopt_foreign as well:
    records signed under a key that is not here (a committed results file, whose key stayed with the run
    that wrote it). The caller allows adopt_foreign only with a key it has just created: a driver's own key
    never lets a line it cannot verify in."""

    def __init__(self, path: str, key: bytes, *, adopt: bool = False, adopt_foreign: bool = False):
        self.path = unpack_to_resume(path)
        self.key = key
        self.records: dict[str, dict] = {}
        self.rejected: list[str] = []    # lines not trusted on open (moved to <stem>.rejected.jsonl)
        self.collapsed = 0               # older trusted duplicates moved to the superseded file
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        self.history_path = unpack_to_resume(stem(path) + ".superseded.jsonl")
        self.rejected_path = unpack_to_resume(stem(path) + ".rejected.jsonl")
        self._load(adopt, adopt and adopt_foreign)
        _append_line_probe(self.path)

    def _load(self, adopt: bool, adopt_foreign: bool = False):
        if not os.path.exists(self.path):
            return
        best: dict[str, tuple] = {}
        older: list[dict] = []
        changed = False
        for pos, rec, text in _parse_lines(self.path):
            if rec is not None and adopt and rec.get("key") and (
                    "mac" not in rec or (adopt_foreign and not verify(rec, self.key))):
                rec = sign(rec, self.key)
                changed = True
            # A record moved to the superseded file carries superseded_because: replayed here it is not current.
            if rec is None or not rec.get("key") or "superseded_because" in rec or not verify(rec, self.key):
                self.rejected.append(text)
                changed = True
                continue
            k = rec["key"]
            if k in best:
                changed = True
                if _newest(best[k], (pos, rec)):
                    older.append(best[k][1])
                    best[k] = (pos, rec)
                else:
                    older.append(rec)
            else:
                best[k] = (pos, rec)
        self.records = {k: v[1] for k, v in sorted(best.items(), key=lambda kv: kv[1][0])}
        if self.rejected:
            for text in self.rejected:
                _append_line(self.rejected_path, {"line": text[:100000], "rejected_at": time.time(),
                                                  "why": "no valid MAC: not written by this audit's driver"})
        for rec in older:
            _append_line(self.history_path, sign(dict(rec, superseded_because="a newer record of the row"),
                                                 self.key))
        self.collapsed = len(older)
        if changed:
            self._rewrite()
        elif not _ends_with_newline(self.path):
            self._rewrite()

    def _rewrite(self):
        tmp = f"{self.path}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, RESULTS_MODE)
        try:
            for rec in self.records.values():
                os.write(fd, (json.dumps(rec, sort_keys=True, allow_nan=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def done(self, key: str, sha: str | None = None) -> bool:
        rec = self.records.get(key)
        return rec is not None and (sha is None or rec.get("sha") == sha)

    def put(self, record: dict, because: str = "") -> dict:
        """Writes the row's record: appended when the row has none, else replacing the old one in place (the
        old kept in the superseded file, with `because`). Returns the signed record."""
        rec = sign(dict(record, written_at=round(time.time(), 6)), self.key)
        old = self.records.get(rec["key"])
        if old is None:
            _append_line(self.path, rec)
        else:
            _append_line(self.history_path, sign(dict(old, superseded_because=because or "replaced"), self.key))
            self.records[rec["key"]] = rec
            self._rewrite()
        self.records[rec["key"]] = rec
        return rec

    # Kept for callers of the old interface.
    def append(self, record: dict):
        if record["key"] not in self.records:
            self.put(record)

    def replace(self, record: dict, history_path: str | None = None):
        self.put(record, "retried")

    def close(self):
        pass


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _append_line_probe(path: str):
    """Fails early (OSError) when the results file cannot be written."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, RESULTS_MODE)
    _closed_to_others(fd)
    os.close(fd)


def read_results(path: str) -> list[dict]:
    """The records a report counts: one per key, newest wins; when the results' key file is readable, only
    records whose MAC verifies (the driver's own). Without a key file (a results file copied without it, or
    from before records were signed) every well-formed record counts, still once per key."""
    try:
        key = load_key(path, create=False)
    except TrustError:
        key = None
    best: dict[str, tuple] = {}
    for pos, rec, _ in _parse_lines(path):
        if rec is None or not rec.get("key"):
            continue
        if key is not None and ("superseded_because" in rec or not verify(rec, key)):
            continue
        k = rec["key"]
        if k not in best or _newest(best[k], (pos, rec)):
            best[k] = (pos, rec)
    return [v[1] for v in sorted(best.values(), key=lambda v: v[0])]


class Journal:
    """The driver's journal of row attempts (`<stem>.attempts.jsonl`, signed like the records): a "start" line
    before a row job starts, an "end" line when the driver itself ended it (finished, cut by the budget). A
    start without an end is an attempt during which the driver died: the next run runs that row alone first,
    and a row whose solo attempt also went unfinished killed (or stopped for good) the driver."""

    def __init__(self, path: str, key: bytes):
        path = unpack_to_resume(path)
        self.path, self.key = path, key
        self.starts: dict[str, dict] = {}
        self.ended: set[str] = set()
        self.gpu_peaks: dict[str, int] = {}  # row key -> the largest GPU peak an ended attempt of it measured
        if os.path.exists(path):
            ends = []
            for _, rec, _ in _parse_lines(path):
                if rec is None or not verify(rec, key):
                    continue
                if rec.get("event") == "start":
                    self.starts[rec["id"]] = rec
                elif rec.get("event") == "end":
                    self.ended.add(rec.get("id"))
                    ends.append(rec)
            for rec in ends:
                self._note_peak(rec.get("id"), rec.get("gpu_peak"))

    def _note_peak(self, aid, peak):
        start = self.starts.get(aid)
        if start is not None and isinstance(peak, int) and peak > 0:
            k = start["key"]
            self.gpu_peaks[k] = max(self.gpu_peaks.get(k, 0), peak)

    def start(self, key: str, sha: str, kind: str, solo: bool) -> str:
        aid = secrets.token_hex(8)
        rec = {"event": "start", "id": aid, "key": key, "sha": sha, "kind": kind, "solo": solo,
               "t": round(time.time(), 3), "pid": os.getpid()}
        _append_line(self.path, sign(rec, self.key))
        self.starts[aid] = rec
        return aid

    def end(self, aid: str, how: str, gpu_peak: int | None = None):
        """gpu_peak: the most GPU memory the attempt's processes held (bytes), where the driver measured it;
        kept even for an attempt that left no record (cut by the budget), for the row's next estimate."""
        if not aid or aid in self.ended:
            return
        rec = {"event": "end", "id": aid, "how": how, "t": round(time.time(), 3)}
        if isinstance(gpu_peak, int) and gpu_peak > 0:
            rec["gpu_peak"] = gpu_peak
        _append_line(self.path, sign(rec, self.key))
        self.ended.add(aid)
        self._note_peak(aid, gpu_peak)

    def unfinished(self, key: str, sha: str) -> list[dict]:
        return [s for aid, s in self.starts.items()
                if s["key"] == key and s["sha"] == sha and aid not in self.ended]
