"""Seeds: the same counter-based derivation as the C++ core (kgate/rng.hpp), so a seed printed by the audit
reproduces the same case whether or not the extension is loaded. tests/python/test_seeds.py checks the two
agree bit for bit when the extension is present."""
from __future__ import annotations

import os

_M64 = (1 << 64) - 1


def mix64(z: int) -> int:
    """SplitMix64's finaliser, exactly as kgate::mix64."""
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def child(key: int, label: int | str) -> int:
    """kgate::Stream(key).child(label).key()."""
    if isinstance(label, str):
        h = 0xCBF29CE484222325
        for c in label.encode():
            h = ((h ^ c) * 0x100000001B3) & _M64
        label = h
    return mix64(key ^ mix64((label + 0x632BE59BD9B4E019) & _M64))


def derive(key: int, *labels: int | str) -> int:
    for label in labels:
        key = child(key, label)
    return key


def torch_seed(key: int) -> int:
    """A seed torch.manual_seed accepts (it takes < 2**63 on every version we meet)."""
    return key & ((1 << 63) - 1)


def fresh_seed() -> int:
    """A seed nobody can predict, for runs where the user fixes none."""
    return int.from_bytes(os.urandom(8), "little")
