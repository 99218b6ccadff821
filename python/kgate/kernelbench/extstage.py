"""The driver's side of the compiled-extension cache (extcache.py is the worker's side).

The cache folder belongs to the audit's user alone (mode 0700): no candidate reads or writes it. Each
candidate has its own part of it, named by the hash of its source (computed here, in the driver), so what
one candidate compiled, or planted, can only ever be loaded by the same source again. Before a worker starts,
its part is copied into the worker's private scratch (`stage_in`), which the worker alone reaches (through
its cwd); what the worker adds there is copied back into its part (`harvest`) while it runs, since its
scratch is emptied when it ends. The worker is hostile: harvest copies regular files only, by names of the
cache's own shape, opened without following links, up to a size limit.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat

STAGE = "ext-cache"                 # the staged copy, relative to the worker's scratch (its cwd)
MAX_FILE = 1 << 30                  # bytes of one cached extension
_KEY = re.compile(r"^[0-9a-f]{24}$")  # extcache.py's key: 24 hex digits of a hash
_NAME = re.compile(r"^[A-Za-z0-9_]{1,200}\.(so|failed)$")  # a built extension, or a remembered failed build
MAX_FAILED = 1 << 20                # bytes of a remembered failure (extcache.py keeps 64 K characters)


def private_root(cache: str) -> str:
    """The cache folder, created 0700 (and made so when it exists and is ours)."""
    os.makedirs(cache, mode=0o700, exist_ok=True)
    st = os.stat(cache)
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(cache, 0o700)
    return cache


def part_of(cache: str, custom_code: str) -> str:
    """The candidate's own part of the cache (created 0700)."""
    part = os.path.join(private_root(cache), "src-" + hashlib.sha256(custom_code.encode()).hexdigest()[:32])
    os.makedirs(part, mode=0o700, exist_ok=True)
    return part


def _entries(root: str):
    """(key, name) of every cached file under root that has the cache's shape; links and others skipped."""
    try:
        keys = list(os.scandir(root))
    except OSError:
        return
    for k in keys:
        if not _KEY.match(k.name) or not k.is_dir(follow_symlinks=False):
            continue
        try:
            files = list(os.scandir(k.path))
        except OSError:
            continue
        for f in files:
            if _NAME.match(f.name) and f.is_file(follow_symlinks=False):
                yield k.name, f.name


def _copy_regular(src: str, dst: str, mode: int) -> bool:
    """Copies src (a regular file, not a link, at most MAX_FILE bytes, MAX_FAILED for a .failed) to dst
    atomically."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > (MAX_FAILED if src.endswith(".failed") else MAX_FILE):
            return False
        tmp = f"{dst}.tmp{os.getpid()}"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode), "wb") as out:
            with os.fdopen(os.dup(fd), "rb") as src_f:
                shutil.copyfileobj(src_f, out, 1 << 20)
        os.replace(tmp, dst)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def count_entries(cache: str, custom_code: str) -> int:
    """How many cached files (built extensions and remembered failures) the candidate's part holds, without
    creating anything: 0 when the cache or the part does not exist."""
    part = os.path.join(cache, "src-" + hashlib.sha256(custom_code.encode()).hexdigest()[:32])
    return sum(1 for _ in _entries(part)) if os.path.isdir(part) else 0


def stage_in(part: str, scratch: str) -> str:
    """The candidate's part copied into its scratch; returns the staged folder. The worker may add to it (it
    compiles there), so its folders are open to the worker's uid: the scratch itself is reachable by no one
    else (its parent is the row job's private folder)."""
    stage = os.path.join(scratch, STAGE)
    os.makedirs(stage, exist_ok=True)
    os.chmod(stage, 0o777)
    for key, name in _entries(part):
        d = os.path.join(stage, key)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
        _copy_regular(os.path.join(part, key, name), os.path.join(d, name), 0o644)
    return stage


def harvest(stage: str, part: str) -> int:
    """Copies into the candidate's part what its worker added to the staged folder; returns how many."""
    n = 0
    for key, name in _entries(stage):
        dst_dir = os.path.join(part, key)
        dst = os.path.join(dst_dir, name)
        if os.path.exists(dst):
            continue
        os.makedirs(dst_dir, mode=0o700, exist_ok=True)
        n += _copy_regular(os.path.join(stage, key, name), dst, 0o600)
    return n
