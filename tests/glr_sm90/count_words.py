#!/usr/bin/env python3
"""Compare two GLR_EMU_DUMP folders (tests/glr_sm90/emu_dump.hpp) word for word.

usage: count_words.py BEFORE AFTER
Per output name (o, ht, dq, dk, ...): files compared, words, words that differ, and of those how many are non-finite
in one run and finite in the other, and the largest difference relative to the output's largest |value| (the worst
relative move). Words are 2 bytes for bf16 outputs (o, dq, dk, dv), 4 for the fp32 ones and the int32 status word.
"""
import math
import os
import struct
import sys

BF16 = {"o", "dq", "dk", "dv"}
INT32 = {"status"}


def words(path, name):
    raw = open(path, "rb").read()
    if name in BF16:
        n = len(raw) // 2
        return [struct.unpack("<f", b"\0\0" + raw[2 * i:2 * i + 2])[0] for i in range(n)], [raw[2 * i:2 * i + 2] for i in range(n)]
    n = len(raw) // 4
    fmt = "<%d%s" % (n, "i" if name in INT32 else "f")
    return [float(x) for x in struct.unpack(fmt, raw[:4 * n])], [raw[4 * i:4 * i + 4] for i in range(n)]


def main():
    before, after = sys.argv[1], sys.argv[2]
    stats = {}
    for f in sorted(os.listdir(before)):
        name = f.split(".", 1)[1]
        pa = os.path.join(after, f)
        if not os.path.exists(pa):
            print("missing in AFTER:", f)
            continue
        vb, wb = words(os.path.join(before, f), name)
        va, wa = words(pa, name)
        s = stats.setdefault(name, [0, 0, 0, 0, 0.0])
        s[0] += 1
        s[1] += len(wb)
        scale = max((abs(x) for x in vb if math.isfinite(x)), default=0.0) or 1.0
        for x, y, bx, by in zip(vb, va, wb, wa):
            if bx == by:
                continue
            s[2] += 1
            if math.isfinite(x) != math.isfinite(y):
                s[3] += 1
            elif math.isfinite(x):
                s[4] = max(s[4], abs(x - y) / scale)
    for name, (files, n, d, nf, worst) in sorted(stats.items()):
        print("%-6s files %4d words %9d differ %8d (%.2f%%) finiteness changed %d worst |diff| / max|before| %.2e"
              % (name, files, n, d, 100.0 * d / max(n, 1), nf, worst))


if __name__ == "__main__":
    main()
