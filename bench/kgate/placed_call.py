"""The worker protocol's cost per placed call, apart from the candidate and the engine: a kgate.target.WorkerTarget
(the KernelBench front-end's worker target, numpy framework) driven through what a gate's PlacedCall does for one
input and one output (alloc, write, alloc, fill, call, release, release), with a candidate that copies its input.
Prints, per placed call, the median wall time, and the CPU time of the driver and of the worker (from /proc).
A benchmark: it measures, it never fails on a timing.

    PYTHONPATH=build-py/site python3 bench/kgate/placed_call.py [CALLS] [ELEMENTS]   (default 400, 1024)

Compare two builds by running it with each one's site, interleaved (this machine's load moves wall times).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from kgate import _core as core
from kgate.target import WorkerTarget

SRC = """
def kernel(xs, ys):
    ys[0][...] = xs[0]
    return 0
"""


def _cpu_of(pid: int) -> float:
    """CPU seconds of `pid` and its descendants (the worker runs under its isolation launcher)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        kids = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(_cpu_of(k) for k in kids)


def _request(a, b, n):
    def arg(bid):
        t = core.TensorArg()
        t.buffer, t.layout = bid, core.Layout.dense(core.DType.f32, [n])
        return t
    inv = core.Invocation()
    inv.inputs, inv.outputs = [arg(a)], [arg(b)]
    req = core.CallRequest()
    req.invocations = [inv]
    return req


def main(calls: int = 400, n: int = 1024) -> None:
    t = WorkerTarget(SRC, "kernel")
    x = np.arange(n, dtype=np.float32).tobytes()
    walls = []
    worker = t.cand.proc.pid
    cpu0, wcpu0 = time.process_time(), _cpu_of(worker)
    for _ in range(calls):
        t0 = time.perf_counter()
        a = t.alloc(len(x))
        t.write(a, 0, x)
        b = t.alloc(len(x))
        t.fill(b, 0, len(x), 0xFF)
        r = t.call(_request(a, b, n))
        t.release(a)
        t.release(b)
        walls.append(time.perf_counter() - t0)
        assert r.outcome == core.CallOutcome.completed and r.results[0].status == 0
    cpu, wcpu = time.process_time() - cpu0, _cpu_of(worker) - wcpu0
    print(f"{calls} placed calls of {n} f32: median wall {1e6 * statistics.median(walls):.0f} us, "
          f"driver CPU {1e6 * cpu / calls:.0f} us, worker CPU {1e6 * wcpu / calls:.0f} us a call"
          + (f", {t.messages / calls:.1f} messages a call" if hasattr(t, "messages") else ""))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
