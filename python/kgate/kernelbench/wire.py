"""Large byte payloads between the driver and the worker, beside the pickled messages.

A message is a dict sent with multiprocessing.connection's framing (pickled). Buffers listed under "_raw"
travel after it as raw bytes on the same socket, their sizes in the message ("_raw_sizes"): no pickling,
and the receiver reads each straight into a buffer of its choice (a `sink`), e.g. the HostArray the engine
keeps. An input set of a large task is hundreds of MB and crosses once per case; pickled, each payload was
copied four more times on the way (pickle, unpickle, and a bytes object on each side).
"""
from __future__ import annotations

import os

RAW, SIZES = "_raw", "_raw_sizes"


def _flat(buf) -> memoryview:
    m = memoryview(buf)
    return m if m.ndim == 1 and m.format == "B" else m.cast("B")


def send(conn, msg) -> None:
    raw = msg.get(RAW) if isinstance(msg, dict) else None
    if not raw:
        conn.send(msg)
        return
    views = [_flat(b) for b in raw]
    head = {k: v for k, v in msg.items() if k != RAW}
    head[SIZES] = [v.nbytes for v in views]
    conn.send(head)
    fd = conn.fileno()
    for v in views:
        pos = 0
        while pos < v.nbytes:
            pos += os.write(fd, v[pos:])


def recv(conn, sink=None):
    """The next message; its raw buffers under "_raw", each read into sink(k, nbytes) (a writable buffer of
    exactly that many bytes, or None for a fresh bytearray)."""
    msg = conn.recv()
    if not isinstance(msg, dict) or SIZES not in msg:
        return msg
    fd = conn.fileno()
    bufs = []
    for k, n in enumerate(msg.pop(SIZES)):
        buf = sink(k, n) if sink is not None else None
        if buf is None:
            buf = bytearray(n)
        v = _flat(buf)
        if v.nbytes != n:
            raise ValueError(f"raw buffer {k}: the sink gave {v.nbytes} bytes for {n}")
        pos = 0
        while pos < n:
            got = os.readv(fd, [v[pos:]])
            if got == 0:
                raise EOFError("the peer closed the connection inside a raw buffer")
            pos += got
        bufs.append(buf)
    msg[RAW] = bufs
    return msg
