"""Placing input arrays in guarded buffers, framework-neutral: the arithmetic of where each input's bytes go.

Every input sits in its own buffer: [guard | payload | guard], guards filled with a pattern drawn from the
worker's guard seed. The payload holds the tensor in one of three layouts:
  dense    contiguous from the payload's start (256-byte aligned)
  offset   contiguous, starting one element past the aligned start (misaligned base)
  strided  the last dimension at stride 2 (a non-contiguous view), other strides to match
"""
from __future__ import annotations

import numpy as np

from .. import seeds

GUARD_BYTES = 4096
LAYOUTS = ("dense", "offset", "strided")


def guard_pattern(seed: int, buffer_index: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seeds.derive(seed, "guard", buffer_index) & ((1 << 63) - 1))
    return rng.integers(0, 256, size=n, dtype=np.uint8)


def plan(shape: tuple, itemsize: int, layout: str):
    """(payload_bytes, element_offset, strides_in_elements) for a tensor of `shape` in `layout`."""
    shape = tuple(int(s) for s in shape)
    if layout == "strided" and len(shape) >= 1 and shape[-1] > 1:
        strides = []
        acc = 2
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        strides = tuple(reversed(strides))
        # the last element sits at offset sum((n-1)*stride)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        return max(1, extent) * itemsize, 0, strides
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    strides = tuple(reversed(strides))
    n = int(np.prod(shape)) if shape else 1
    off = 1 if layout == "offset" else 0
    return max(1, n + off) * itemsize, off, strides


def first_guard_violation(buf: np.ndarray, pattern: np.ndarray, payload_bytes: int) -> dict | None:
    """The violation nearest the payload on each side ({'offset': bytes from the payload's start, negative
    before it}), or None. `buf` is the whole buffer as uint8 on the host."""
    g = GUARD_BYTES
    return guard_zone_violation(buf[:g], buf[g + payload_bytes:g + payload_bytes + g], pattern, payload_bytes)


def guard_zone_violation(front: np.ndarray, back: np.ndarray, pattern: np.ndarray,
                         payload_bytes: int) -> dict | None:
    """first_guard_violation from the two guard zones alone (uint8 on the host), for a buffer whose payload
    lives elsewhere (on a device): only 2 x GUARD_BYTES cross, not the payload."""
    g = GUARD_BYTES
    out = []
    bad = np.nonzero(front != pattern[:g])[0]
    if bad.size:
        i = int(bad[-1])
        out.append({"offset": i - g, "expected": int(pattern[i]), "found": int(front[i])})
    bad = np.nonzero(back != pattern[g:])[0]
    if bad.size:
        i = int(bad[0])
        out.append({"offset": payload_bytes + i, "expected": int(pattern[g + i]), "found": int(back[i])})
    return out[0] if out else None


def new_buffer_id(buffers, bid: int | None) -> int:
    """The id of a new buffer: the driver's choice (kernelbench/target.py names its buffers itself, so an alloc
    needs no reply), or else the next unused one; an id in use, or not a positive integer, is an error."""
    if bid is None:
        bid = buffers.next
    if not isinstance(bid, int) or bid <= 0 or bid in buffers.bufs:
        raise ValueError(f"alloc: buffer id {bid!r} is in use or not a positive integer")
    buffers.next = max(buffers.next, bid + 1)
    return bid
