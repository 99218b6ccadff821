"""The candidate as a kgate::Target: the C++ gates drive a Python candidate running in its worker process.

The driver holds buffer ids only; every buffer (with its guard zones), the candidate and its own allocations
live in the worker (worker.py). A call sends the layouts of one CallRequest; the worker calls the candidate
on views of its buffers, copies what it returns into the output buffers (returning convention: a wrong
count, shape or dtype of outputs is a clean KGATE_ERROR with a message; an exception is a refusal, which
the engine counts as a failure at the nominal shape) and reports status, message and what it printed. A
worker that dies or hangs ends the call as CallOutcome.crashed / timed_out; reset() starts a fresh worker
and replays every build.

One implementation serves both front-ends: KernelBench rows (ModelNew built per binding of the task's
size constants, `CallPlan` below) and plain functions (kgate.target.WorkerTarget, `FunctionPlan`).
"""
from __future__ import annotations

import numpy as np

from .. import _core
from . import wire
from .client import Candidate, WorkerDied
from .worker import FOLDED_OPS

CODES = {"ok": int(_core.KGATE_OK), "refused": int(_core.KGATE_REFUSED), "error": int(_core.KGATE_ERROR)} \
    if _core else {}
_NP = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64,
       "bool": np.bool_}
# A GuardViolation whose buffer is this id names memory the candidate allocated itself (h1's reserved id).
CANDIDATE_BUFFER = int(getattr(_core, "CANDIDATE_OWNED_BUFFER", 0xFFFFFFFF)) if _core else 0xFFFFFFFF


def host_array(dtype: str, shape, data: bytes):
    """A HostArray holding `data` (dense bytes of `dtype`)."""
    shape = [int(s) for s in shape]
    if dtype == "bf16":  # numpy has no bf16; torch does, and crosses by DLPack
        import torch
        t = torch.frombuffer(bytearray(data), dtype=torch.bfloat16) if data else torch.empty(0, dtype=torch.bfloat16)
        return _core.HostArray.from_array(t.reshape(shape))
    return _core.HostArray.from_array(np.frombuffer(data, _NP[dtype]).reshape(shape) if data
                                      else np.zeros(shape, _NP[dtype]))


def _dense_nbytes(lay) -> int:
    n = _core.dtype_size(lay.dtype)
    for d in lay.shape:
        n *= int(d)
    return n


def _enum_name(v) -> str:
    return getattr(v, "name", None) or str(v).rsplit(".", 1)[-1]


def arg_spec(a) -> tuple:
    lay = a.layout
    return (int(a.buffer), _core.dtype_name(lay.dtype), [int(x) for x in lay.shape], [int(x) for x in lay.strides],
            int(lay.offset))


class FunctionPlan:
    """A plain function from the candidate's source, one slot for every call."""

    def __init__(self, entry: str, convention: str):
        self.entry, self.convention = entry, convention

    def plan(self, inputs, outputs):
        return "fn", {"function": self.entry, "convention": self.convention}, None


class OutputSink:
    """wire.recv's sink for an ecall's outputs: the k-th raw buffer is read straight into a fresh HostArray
    of the k-th output's layout (dense), where numpy can view it and the size is the layout's."""

    def __init__(self, layouts):
        self.layouts = list(layouts)
        self.arrays: list = [None] * len(self.layouts)

    def __call__(self, k: int, nbytes: int):
        if k >= len(self.layouts):
            return None
        lay = self.layouts[k]
        name = _core.dtype_name(lay.dtype)
        if name not in _NP:
            return None
        h = _core.HostArray(lay.dtype, [int(x) for x in lay.shape])
        if h.nbytes != nbytes or nbytes == 0:
            return None
        try:
            view = h.numpy().reshape(-1).view(np.uint8)
        except Exception:  # noqa: BLE001 - no numpy view of this dtype: the copying path
            return None
        self.arrays[k] = h
        return view


class CandidateTarget(_core.Target if _core else object):
    def __init__(self, cand: Candidate, planner, *, describe: str = "", device: int = 1):
        super().__init__()
        self.cand, self.planner = cand, planner
        self._describe, self._device = describe or f"worker:{cand.entry} ({cand.fw_name})", device
        self.built: set[str] = set()
        self.calls = 0
        # Buffer ids are this side's choice, from 1 for each fresh worker (its guard patterns derive from them),
        # so alloc and release need no reply: they wait here and ride ahead of the next message
        # (worker.Worker.handle). A placed call (per tensor an alloc, a write or fill and a release; the call)
        # costs a round trip per tensor and one for the call, not three per tensor. Writes and fills still
        # await their reply: the engine times Target::call as the candidate's, so work the worker does for
        # kgate must be done before call() is entered.
        self._pending: list[dict] = []
        self._ids_of, self._next_id = None, 1
        self.messages = 0  # messages sent to the worker (bench/kgate: round trips per call)

    # -- kgate::Target ---------------------------------------------------------------------------------
    def describe(self):
        return self._describe

    def device(self):
        return self._device

    def _same_worker(self):
        """Forgets the ids and pending ops of a worker that is gone: a fresh one numbers its buffers from 1."""
        if self._ids_of is not self.cand.proc:
            self._ids_of, self._next_id = self.cand.proc, 1
            self._pending.clear()

    def _carry(self, msg) -> dict:
        """`msg` with the pending allocs and releases riding ahead of it."""
        self._same_worker()
        if self._pending:
            msg["before"], self._pending = self._pending, []
        self.messages += 1
        return msg

    @staticmethod
    def _folded_failure(reply) -> str | None:
        """What a reply says failed when it is one of the ops that rode ahead of the message ("worker alloc:
        ..."), else None."""
        if isinstance(reply, dict) and reply.get("status") != "ok" and reply.get("op") in FOLDED_OPS:
            return f"worker {reply['op']}: {reply.get('message')}"
        return None

    def _req(self, msg, timeout=None):
        try:
            reply = self.cand.request(self._carry(msg), timeout)
        except WorkerDied as d:
            raise RuntimeError(f"the candidate's worker {d.kind}: {d.detail}") from None
        if not isinstance(reply, dict) or reply.get("status") != "ok":
            folded = self._folded_failure(reply)
            raise RuntimeError(folded or f"worker {msg['op']}: "
                               f"{reply.get('message') if isinstance(reply, dict) else type(reply).__name__}")
        return reply

    def alloc(self, nbytes):
        if not self.cand.alive():
            raise RuntimeError("the candidate's worker crash: the worker is not running")
        self._same_worker()
        bid, self._next_id = self._next_id, self._next_id + 1
        self._pending.append({"op": "alloc", "id": bid, "bytes": int(nbytes)})
        return bid

    def release(self, bid):
        if self.cand.alive():
            self._same_worker()
            self._pending.append({"op": "release", "id": int(bid)})

    def write(self, bid, offset, data):
        # `data` (any bytes-like, the engine's lent memoryview included) goes out raw, uncopied (wire.py)
        self._req({"op": "write", "id": int(bid), "offset": int(offset), wire.RAW: [data]})

    def fill(self, bid, offset, nbytes, value):
        # an output's gap fill: one byte crosses, not the output's size of it
        self._req({"op": "fill", "id": int(bid), "offset": int(offset), "bytes": int(nbytes), "value": int(value)})

    def read(self, bid, offset, nbytes):
        return self._req({"op": "read", "id": int(bid), "offset": int(offset), "bytes": int(nbytes)})[wire.RAW][0]

    def check_guards(self, bid):
        v = self._req({"op": "guards", "id": int(bid)})["violation"]
        return [] if v is None else [_core.GuardViolation(int(bid), v["offset"], v["expected"], v["found"])]

    def _ensure_built(self, slot, build) -> dict:
        if slot in self.built and slot in self.cand.builds:
            return {"status": "ok"}
        reply = self.cand.build_with(slot, build() if callable(build) else build)
        if reply.get("status") == "ok":
            self.built.add(slot)
        return reply

    def call(self, request):
        result = _core.CallResult()
        invs, slot = [], None
        try:
            for inv in request.invocations:
                s, build, args = self.planner.plan(inv.inputs, inv.outputs)
                if slot is not None and s != slot:
                    raise ValueError("the invocations of one request are at different bindings")
                slot = s
                reply = self._ensure_built(s, build)
                if reply.get("status") != "ok":
                    return self._refused(request, f"the candidate cannot be built here: {reply.get('message')}")
                invs.append({"inputs": [arg_spec(a) for a in inv.inputs],
                             "outputs": [arg_spec(a) for a in inv.outputs], "args": args})
            start = self.cand.output_size()
            self.calls += 1
            # Each output arrives raw, in order, straight into a fresh HostArray of its layout (OutputSink)
            sink = OutputSink([a.layout for inv in request.invocations for a in inv.outputs])
            msg = self._carry({"op": "ecall", "slot": slot, "invocations": invs, "codes": CODES,
                               "poison": bytes(request.poison), "stream": _enum_name(request.stream), "eval": True})
            # the outputs' area offered for them where they are large (wire.py): copied from there, once
            _, out_bytes = wire.spans_of(_dense_nbytes(a.layout) for inv in request.invocations for a in inv.outputs)
            reply = self.cand.request(msg, sink=sink, out_bytes=out_bytes)
        except WorkerDied as d:
            result.outcome = _core.CallOutcome.timed_out if d.kind == "timeout" else _core.CallOutcome.crashed
            result.detail = d.detail
            result.output = d.output[-16384:]
            return result
        result.output, result.output_bytes = self.cand.output_since(start)
        # an alloc or release that rode ahead of the call (only if some did: otherwise a failed ecall is a crash)
        folded = self._folded_failure(reply) if "before" in msg else None
        if folded:
            raise RuntimeError(folded)
        if reply.get("status") != "ok":  # the device context is gone: the worker exited
            self.cand.kill()
            result.outcome, result.detail = _core.CallOutcome.crashed, reply.get("message", "")
            return result
        results, raws = reply.get("results"), reply.get(wire.RAW, [])
        outputs = sum(len(inv.outputs) for inv in request.invocations)
        if not isinstance(results, list) or len(results) != len(request.invocations) or len(raws) != outputs:
            raise RuntimeError(f"worker ecall: a malformed reply ({len(results) if isinstance(results, list) else 'no'} "
                               f"results for {len(request.invocations)} invocations, {len(raws)} output buffers "
                               f"for {outputs} outputs)")
        result.seconds = float(reply.get("seconds", 0.0))
        out = []
        raw = iter(zip(sink.arrays, reply.get(wire.RAW, [])))
        for r, inv in zip(reply["results"], request.invocations):
            ir = _core.InvocationResult()
            ir.status, ir.message = int(r["status"]), r["message"]
            for a, (h, data) in zip(inv.outputs, raw):
                if h is not None and data is not None:
                    ir.take_output(h)  # the bytes were read into h itself: no copy
                else:  # bf16 (numpy has no view of it) or an unexpected size: copied, and checked there
                    ir.add_output(a.layout.dtype, [int(x) for x in a.layout.shape], bytes(data))
            if hasattr(ir, "started"):
                ir.started, ir.finished = float(r["started"]), float(r["finished"])
            out.append(ir)
        result.results = out
        result.guards = [_core.GuardViolation(int(v["buffer"]), v["offset"], v["expected"], v["found"])
                         for v in reply.get("guards", [])]
        result.guards += [self._owned_violation(v) for v in reply.get("allocator_guards", [])]
        return result

    def _owned_violation(self, v):
        g = _core.GuardViolation(CANDIDATE_BUFFER, v["offset"], v["expected"], v["found"])
        if hasattr(g, "region"):
            g.region = v["region"]
        return g

    def _refused(self, request, why):
        result = _core.CallResult()
        out = []
        for inv in request.invocations:
            ir = _core.InvocationResult()
            ir.status, ir.message = CODES["refused"], why[:2000]
            ir.outputs = [host_array(_core.dtype_name(a.layout.dtype), a.layout.shape, b"")
                          if 0 in list(a.layout.shape) else
                          _core.HostArray(a.layout.dtype, [int(x) for x in a.layout.shape]) for a in inv.outputs]
            out.append(ir)
        result.results = out
        return result

    def reset(self):
        self.cand.kill()
        self._pending.clear()
        self.built.clear()
        self.cand.ensure()  # a fresh worker; every build replayed
        self.built.update(self.cand.builds)

    def healthy(self):
        return self.cand.alive()

    def close(self):
        self.cand.close()
