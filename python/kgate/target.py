"""kgate.target.WorkerTarget: a Python candidate as a kgate::Target, its code in a worker process.

The C++ gates speak only the Target interface (kgate/target.hpp). This subclass of the extension's Target
trampoline keeps every buffer, guard zone and call in a spawned worker process; the driver holds buffer ids
only, so the candidate never sees the driver's memory (oracle outputs, expected values, results). The callee
is `fn(inputs, outputs)` with numpy views (destination-passing, the C ABI's convention) returning a
kgate_status, or `fn(*inputs)` returning arrays (returning convention, copied into the outputs).
A crash or hang in the worker ends that call as CallOutcome.crashed / timed_out and leaves the target
unhealthy until reset(), exactly as the engine's own WorkerTarget.
"""
from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np

from . import _core
from .kernelbench import layout as L
from .kernelbench.task import exec_module

_DT = {_core.DType.f64: np.float64, _core.DType.f32: np.float32, _core.DType.f16: np.float16,
       _core.DType.i32: np.int32, _core.DType.i64: np.int64, _core.DType.bool: np.bool_} if _core else {}


def _worker(conn, source: str, entry: str, convention: str, guard_seed: int):
    ns = exec_module(source, "kgate_candidate", "<candidate>")
    fn = ns[entry]
    bufs: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
    next_id = 1
    while True:
        try:
            op, *args = conn.recv()
        except EOFError:
            return
        if op == "alloc":
            n = args[0]
            pat = L.guard_pattern(guard_seed, next_id, 2 * L.GUARD_BYTES)
            buf = np.empty(2 * L.GUARD_BYTES + n, np.uint8)
            buf[:L.GUARD_BYTES], buf[L.GUARD_BYTES + n:] = pat[:L.GUARD_BYTES], pat[L.GUARD_BYTES:]
            bufs[next_id] = (buf, pat, n)
            conn.send(next_id)
            next_id += 1
        elif op == "release":
            bufs.pop(args[0], None)
            conn.send(None)
        elif op == "write":
            bid, off, data = args
            buf, _, n = bufs[bid]
            buf[L.GUARD_BYTES + off:L.GUARD_BYTES + off + len(data)] = np.frombuffer(data, np.uint8)
            conn.send(None)
        elif op == "read":
            bid, off, k = args
            buf, _, n = bufs[bid]
            conn.send(buf[L.GUARD_BYTES + off:L.GUARD_BYTES + off + k].tobytes())
        elif op == "guards":
            buf, pat, n = bufs[args[0]]
            conn.send(L.first_guard_violation(buf, pat, n))
        elif op == "call":
            invocations, poison = args
            results = []
            for ins, outs in invocations:
                def view(bid, dtype, shape, strides, offset):
                    buf, _, n = bufs[bid]
                    dt = np.dtype(dtype)
                    base = buf[L.GUARD_BYTES:L.GUARD_BYTES + n]
                    return np.lib.stride_tricks.as_strided(base[offset * dt.itemsize:].view(dt), shape=shape,
                                                           strides=[s * dt.itemsize for s in strides])
                xs = [view(*a) for a in ins]
                ys = [view(*a) for a in outs]
                if poison:
                    for y in ys:
                        y.view(np.uint8)[...] = poison[0]
                status, message = 0, ""
                try:
                    if convention == "returning":
                        got = fn(*xs)
                        got = list(got) if isinstance(got, (tuple, list)) else [got]
                        for y, g in zip(ys, got):
                            y[...] = g
                    else:
                        status = int(fn(xs, ys) or 0)
                except Exception as e:  # noqa: BLE001
                    status, message = 2, f"{type(e).__name__}: {e}"
                results.append((status, message, [np.ascontiguousarray(y).tobytes() for y in ys]))
            conn.send(results)


class WorkerTarget(_core.Target if _core else object):
    def __init__(self, source: str, entry: str = "kernel", convention: str = "destination",
                 timeout: float = 10.0, guard_seed: int = 0x6B67617465):
        super().__init__()
        self.source, self.entry, self.convention = source, entry, convention
        self.timeout, self.guard_seed = timeout, guard_seed
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._healthy = False
        self.reset()

    def _rpc(self, *msg, timeout=None):
        if not self._healthy:
            raise RuntimeError("the worker died earlier: reset() first")
        self._conn.send(msg)
        limit = timeout or 60.0  # buffer traffic; the candidate's own time limit applies to calls
        if not self._conn.poll(limit):
            self._kill()
            raise TimeoutError(f"no answer within {limit} s")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self._kill()
            raise ChildProcessError(f"the worker died (exit {self._proc.exitcode})") from None

    def _kill(self):
        self._healthy = False
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join()

    # -- kgate::Target ---------------------------------------------------------------------------------
    def describe(self):
        return f"python:{self.entry} ({self.convention}, cpu, isolated)"

    def device(self):
        return 1  # kDLCPU

    def alloc(self, nbytes):
        return self._rpc("alloc", int(nbytes))

    def release(self, bid):
        self._rpc("release", int(bid))

    def write(self, bid, offset, data):
        self._rpc("write", int(bid), int(offset), bytes(data))

    def read(self, bid, offset, nbytes):
        return self._rpc("read", int(bid), int(offset), int(nbytes))

    def check_guards(self, bid):
        v = self._rpc("guards", int(bid))
        return [] if v is None else [_core.GuardViolation(int(bid), v["offset"], v["expected"], v["found"])]

    def call(self, request):
        def spec(a):
            lay = a.layout
            return (a.buffer, np.dtype(_DT[lay.dtype]).str, list(lay.shape), list(lay.strides), lay.offset)
        invs = [([spec(a) for a in inv.inputs], [spec(a) for a in inv.outputs]) for inv in request.invocations]
        result = _core.CallResult()
        t0 = time.monotonic()
        try:
            replies = self._rpc("call", invs, bytes(request.poison), timeout=self.timeout)
        except TimeoutError as e:
            result.outcome, result.detail = _core.CallOutcome.timed_out, str(e)
            return result
        except ChildProcessError as e:
            result.outcome, result.detail = _core.CallOutcome.crashed, str(e)
            return result
        result.seconds = time.monotonic() - t0
        out = []
        for (status, message, arrays), inv in zip(replies, request.invocations):
            r = _core.InvocationResult()
            r.status, r.message = status, message
            hs = []
            for data, a in zip(arrays, inv.outputs):
                h = _core.HostArray(a.layout.dtype, list(a.layout.shape))
                h.numpy().reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8)
                hs.append(h)
            r.outputs = hs
            out.append(r)
        result.results = out
        return result

    def reset(self):
        self._kill()
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker, args=(child, self.source, self.entry, self.convention,
                                                             self.guard_seed), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._healthy = True

    def healthy(self):
        return self._healthy and self._proc is not None and self._proc.is_alive()
