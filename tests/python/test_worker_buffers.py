"""The worker's engine buffers: the guard check from the two zones alone finds what the whole-buffer check
finds, and fill_bytes (Target::fill) writes exactly its range."""
import numpy as np
import pytest

from kgate.kernelbench import fw_numpy
from kgate.kernelbench import layout as L


@pytest.mark.parametrize("hits", [(), (-1,), (7,), (-4096, 0), (-3, 4095), (-1, 1)])
def test_the_guard_zones_alone_give_the_whole_buffers_violation(hits):
    n = 100
    g = L.GUARD_BYTES
    pattern = L.guard_pattern(1234, 5, 2 * g)
    buf = np.concatenate([pattern[:g], np.zeros(n, np.uint8), pattern[g:]])
    for h in hits:  # bytes from the payload's start: negative before it, >= 0 after its end
        at = g + h if h < 0 else g + n + h
        buf[at] ^= 0x5A
    whole = L.first_guard_violation(buf, pattern, n)
    zones = L.guard_zone_violation(buf[:g].copy(), buf[g + n:].copy(), pattern, n)
    assert zones == whole
    assert (whole is None) == (not hits)


def test_fill_bytes_fills_its_range_and_nothing_else():
    b = fw_numpy.Buffers(guard_seed=99)
    bid = b.alloc(64)
    b.write(bid, 0, bytes(range(64)))
    b.fill_bytes(bid, 8, 16, 0xA5)
    got = bytes(b.read(bid, 0, 64))
    assert got == bytes(range(8)) + b"\xa5" * 16 + bytes(range(24, 64))
    assert b.guards(bid) is None
    with pytest.raises(IndexError):
        b.fill_bytes(bid, 60, 8, 0)
    with pytest.raises(IndexError):
        b.fill_bytes(bid, 0, 8, 256)
