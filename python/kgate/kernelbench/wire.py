"""Large byte payloads between the driver and the worker, beside the pickled messages.

A message is a dict sent with multiprocessing.connection's framing (pickled). Buffers listed under "_raw"
travel after it as raw bytes on the same socket, their sizes in the message ("_raw_sizes"): no pickling,
and the receiver reads each straight into a buffer of its choice (a `sink`), e.g. the HostArray the engine
keeps. An input set of a large task is hundreds of MB and crosses once per case; pickled, each payload was
copied four more times on the way (pickle, unpickle, and a bytes object on each side).

The driver's large payloads (the inputs of each case) skip the socket: SharedStaging, a memfd the driver
creates, sizes, maps and seals, then passes to the worker once over the same socket (SCM_RIGHTS); a message
then names where in it each raw buffer lies ("_shared"), and the worker reads them from its read-only mapping.
One user copy (the driver's, into the area) instead of two kernel copies (send, recv), and the area is mapped
once per worker, not faulted in per case. What the worker can do to it (docs/security.md): nothing the driver
reads; the seals keep it from shrinking the file under the driver's mapping (no SIGBUS), from growing it, and
(F_SEAL_FUTURE_WRITE, Linux 5.1+) from mapping it writable. Where memfd is unavailable, or
KGATE_SHARED_STAGING=0, or for the numpy worker unless KGATE_SHARED_STAGING=1 (shared_staging_enabled), every
payload crosses the socket as before.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import socket

RAW, SIZES = "_raw", "_raw_sizes"
# Raw buffers placed in the shared staging area: [(offset, nbytes)], and the size of a new area whose
# descriptor follows the message on the socket (one byte carrying it, SCM_RIGHTS).
SHARED, NEW_AREA = "_shared", "_shared_new"
# The outputs' area: a second driver-made memfd the worker maps writable (sealed for size only), into which
# an ecall's reply may place its outputs ("_shared" in the reply); OUT_AREA: its size, offered with the
# request; NEW_OUT_AREA: its descriptor follows the message (after a new inputs' area's, if both).
OUT_AREA, NEW_OUT_AREA = "_out_area", "_out_area_new"
SHARED_MIN = 64 << 10        # a message's raw bytes below this cross the socket (the area is for inputs)
_AREA_MIN = 1 << 20
_ALIGN = 4096
# Linux 5.1+: no new writable shared mapping, no write(2); the driver's own mapping, made before, stays writable
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)


def spans_of(sizes) -> tuple[list, int]:
    """Where buffers of `sizes` bytes lie in an area, in order (page-aligned), and the bytes they need."""
    spans, end = [], 0
    for n in sizes:
        spans.append((end, int(n)))
        end += -(-int(n) // _ALIGN) * _ALIGN
    return spans, end


def shared_staging_enabled(fw: str = "torch") -> bool:
    """Whether a worker of framework `fw` gets the areas: KGATE_SHARED_STAGING=1 for any, 0 for none; unset,
    the torch worker's (the GPU audit's large inputs) and not the numpy worker's. The numpy worker's buffers
    are host memory from its own heap, and where they land decides which gate first meets a candidate that
    caches by input address (controls cache_first_last, caches_result): taking the inputs' bytes off its heap
    moved that (CI's numpy control matrix: cache_first_last then failed determinism before freshness)."""
    want = os.environ.get("KGATE_SHARED_STAGING", "")
    return (want == "1" or (want == "" and fw == "torch")) and hasattr(os, "memfd_create") \
        and hasattr(socket, "send_fds")


class SharedStaging:
    """The driver's side of the staging area of one worker connection. The driver only ever writes it: a
    worker can read what lies there (the inputs it is sent anyway) and nothing it does to the area reaches
    anything the driver reads. `broken` once no area can be had here (no memfd, no seals): the socket from then
    on; a payload too large for an area (RLIMIT_FSIZE) crosses the socket alone."""

    def __init__(self, conn, peer_writes: bool = False):
        self.conn = conn
        # the outputs' area: the worker writes it, so no write seal; the driver copies out of it, once, into
        # memory of its own (recv), and reads nothing of it twice
        self.peer_writes = peer_writes
        self.mm: mmap.mmap | None = None
        self.size = 0
        self.sock: socket.socket | None = None
        self.broken = False
        self.seals = 0  # the seals of the current area (tests, docs)

    def _new_area(self, size: int) -> int:
        """A fresh sealed memfd of `size` bytes, mapped here; its descriptor (the caller passes it on and
        closes it). An area that cannot take the size seals is closed and never used."""
        fd = os.memfd_create("kgate-staging", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        mm = None
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            if not self.peer_writes:  # the worker only reads it: no writes either, where the kernel has the seal
                try:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | F_SEAL_FUTURE_WRITE)
                    seals |= F_SEAL_FUTURE_WRITE
                except OSError:  # a kernel before 5.1: the size seals alone (the driver reads nothing back)
                    pass
            if not seals & F_SEAL_FUTURE_WRITE:
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except BaseException:
            if mm is not None:
                mm.close()
            os.close(fd)
            raise
        if self.mm is not None:
            self.mm.close()
        self.mm, self.size, self.seals = mm, size, seals
        return fd

    def place(self, views) -> tuple[list, int | None] | None:
        """Copies `views` (flat byte memoryviews) into the area: their [(offset, nbytes)] and the descriptor
        of a new area to pass first (None: the current one), or None where no area can be had."""
        spans, end = spans_of(v.nbytes for v in views)
        ok, fd = self.ensure(end)
        if not ok:
            return None
        for (off, n), v in zip(spans, views):
            self.mm[off:off + n] = v
        return spans, fd

    def ensure(self, end: int) -> tuple[bool, int | None]:
        """An area of at least `end` bytes: (whether there is one, the descriptor of a new one to pass)."""
        if self.broken:
            return False, None
        fd = None
        if end > self.size:
            # a power of two (pages are only allocated where written: the slack costs nothing, and sizes that
            # grow case by case seldom make a new area), else just enough (RLIMIT_FSIZE bounds a memfd too)
            for size in dict.fromkeys((max(_AREA_MIN, 1 << (end - 1).bit_length()), -(-end // _AREA_MIN) * _AREA_MIN)):
                try:
                    fd = self._new_area(size)
                    break
                except OSError as e:
                    if e.errno not in (errno.EFBIG, errno.ENOSPC, errno.ENOMEM):
                        self.broken = True  # no memfd or no seals here: the socket from now on
                        return False, None
            if fd is None:
                return False, None  # too large for an area: this message's bytes cross the socket
        return True, fd

    def copy_out(self, spans, sink) -> list:
        """The outputs' area's buffers at `spans` (the worker's reply says where), each copied once into
        sink(k, nbytes) or a fresh bytearray: the driver keeps its own copy, whatever the worker writes next."""
        if self.mm is None:
            raise ValueError("a reply names the outputs' area before one was made")
        out = []
        with memoryview(self.mm) as m:
            for k, (off, n) in enumerate(spans):
                off, n = int(off), int(n)
                if off < 0 or n < 0 or off + n > self.size:
                    raise ValueError(f"output bytes {off}..{off + n} outside the area of {self.size}")
                buf, v = _sink_buffer(sink, k, n)
                v[:] = m[off:off + n]
                out.append(buf)
        return out

    def pass_fd(self, fd: int) -> None:
        try:
            if self.sock is None:
                self.sock = socket.socket(fileno=os.dup(self.conn.fileno()))
            socket.send_fds(self.sock, [b"\0"], [fd])
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        self.size = 0


class SharedReader:
    """The worker's side: the current area, mapped read-only (the seals refuse a writable shared mapping)."""

    def __init__(self, conn):
        self.conn = conn
        self.sock: socket.socket | None = None
        self.mm: mmap.mmap | None = None
        self.out: mmap.mmap | None = None  # the outputs' area, writable

    def _fd(self) -> int:
        if self.sock is None:
            self.sock = socket.socket(fileno=os.dup(self.conn.fileno()))
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise EOFError("no staging area came with its message")
        return fds[0]

    def take(self, size: int) -> None:
        fd = self._fd()
        try:
            self.mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # views of it are read-only
        finally:
            os.close(fd)

    def take_out(self, size: int) -> None:
        fd = self._fd()
        try:
            self.out = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    def out_views(self, sizes) -> tuple[list, list] | None:
        """Writable views of the outputs' area for buffers of `sizes` bytes and their spans, or None where
        the area is missing or too small (the reply's bytes then cross the socket)."""
        spans, end = spans_of(sizes)
        if self.out is None or end > len(self.out):
            return None
        m = memoryview(self.out)
        return spans, [m[off:off + n] for off, n in spans]

    def views(self, spans) -> list:
        if self.mm is None:
            raise ValueError("a message names the staging area before one came")
        m = memoryview(self.mm)
        out = []
        for off, n in spans:
            off, n = int(off), int(n)
            if off < 0 or n < 0 or off + n > len(self.mm):
                raise ValueError(f"staged bytes {off}..{off + n} outside the area of {len(self.mm)}")
            out.append(m[off:off + n])
        return out


def _flat(buf) -> memoryview:
    m = memoryview(buf)
    return m if m.ndim == 1 and m.format == "B" else m.cast("B")


def _sink_buffer(sink, k: int, n: int):
    """Where raw buffer k's n bytes go: the sink's buffer (the engine's array), else a fresh bytearray; with its
    flat byte view, checked to hold exactly n bytes."""
    buf = sink(k, n) if sink is not None else None
    if buf is None:
        buf = bytearray(n)
    v = _flat(buf)
    if v.nbytes != n:
        raise ValueError(f"raw buffer {k}: the sink gave {v.nbytes} bytes for {n}")
    return buf, v


def send(conn, msg, shared: SharedStaging | None = None, out: SharedStaging | None = None,
         out_bytes: int = 0) -> None:
    """Sends `msg`; its raw buffers through `shared` (the driver's staging area) where there is one and they
    are large, else raw after it on the socket. `out`, with the reply's `out_bytes` (spans_of's end): the
    outputs' area offered for the reply, where they are large."""
    raw = msg.get(RAW) if isinstance(msg, dict) else None
    fds = []
    head = msg
    if out is not None and out_bytes >= SHARED_MIN:
        ok, fd = out.ensure(out_bytes)
        if ok:
            head = dict(msg)
            head[OUT_AREA] = out.size
            if fd is not None:
                head[NEW_OUT_AREA] = True
                fds.append((out, fd))
    if not raw:
        _send_head(conn, head, fds)
        return
    views = [_flat(b) for b in raw]
    head = {k: v for k, v in head.items() if k != RAW}
    if shared is not None and not shared.broken and sum(v.nbytes for v in views) >= SHARED_MIN:
        placed = shared.place(views)
        if placed is not None:
            head[SHARED], fd = placed
            if fd is not None:
                head[NEW_AREA] = shared.size
                fds.insert(0, (shared, fd))
            _send_head(conn, head, fds)
            return
    head[SIZES] = [v.nbytes for v in views]
    _send_head(conn, head, fds)
    fd = conn.fileno()
    for v in views:
        pos = 0
        while pos < v.nbytes:
            pos += os.write(fd, v[pos:])


def _send_head(conn, head, fds) -> None:
    """The message, then the descriptors of the new areas it names (inputs' first), one byte each."""
    conn.send(head)
    for k, (area, fd) in enumerate(fds):
        try:
            area.pass_fd(fd)
        except BaseException:
            for _, rest in fds[k + 1:]:
                os.close(rest)
            raise


def recv(conn, sink=None, shared: SharedReader | SharedStaging | None = None):
    """The next message; its raw buffers under "_raw", each read into sink(k, nbytes) (a writable buffer of
    exactly that many bytes, or None for a fresh bytearray), or, where the message staged them in a shared
    area: in the worker (`shared` its SharedReader), read-only views of the inputs' area; in the driver
    (`shared` its outputs' SharedStaging), copied out of it into sink's buffers the same way."""
    msg = conn.recv()
    if isinstance(msg, dict) and isinstance(shared, SharedReader):
        if NEW_AREA in msg:
            shared.take(int(msg.pop(NEW_AREA)))
        if msg.pop(NEW_OUT_AREA, False):
            shared.take_out(int(msg[OUT_AREA]))
    if isinstance(msg, dict) and SHARED in msg:
        if isinstance(shared, SharedReader):
            msg[RAW] = shared.views(msg.pop(SHARED))
        elif isinstance(shared, SharedStaging):  # the driver: a reply placed in the outputs' area
            msg[RAW] = shared.copy_out(msg.pop(SHARED), sink)
        else:
            raise ValueError("a message staged its buffers in a shared area this side does not read")
        return msg
    if not isinstance(msg, dict) or SIZES not in msg:
        return msg
    fd = conn.fileno()
    bufs = []
    for k, n in enumerate(msg.pop(SIZES)):
        buf, v = _sink_buffer(sink, k, n)
        pos = 0
        while pos < n:
            got = os.readv(fd, [v[pos:]])
            if got == 0:
                raise EOFError("the peer closed the connection inside a raw buffer")
            pos += got
        bufs.append(buf)
    msg[RAW] = bufs
    return msg
