"""The candidate's worker process: holds ModelNew and nothing else.

It never receives oracle outputs, expected values, the row's seed or the results file's path: only the
candidate's source, init inputs, and the inputs of each call. Two ways to call it:
- the engine's (kgate._core.Target, kernelbench/target.py): buffers the driver allocates, writes and reads
  by id (`alloc`, `write`, `read`, `guards`, `release`), each between seeded guard zones; `ecall` calls the
  candidate on views of them and copies what it returns into the output buffers (returning convention) or
  lets it write them (destination-passing, `fn(inputs, outputs)`);
- baseline's (`call`): host arrays in, the candidate's outputs out, as the producer's test sees them.
Run as `python -m kgate.kernelbench.worker FD`, FD a socket speaking multiprocessing.connection's framing.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from multiprocessing.connection import Connection

from . import wire
from .task import exec_module

_COMPILE_HINTS = ("Error building extension", "ninja", "nvcc", "CalledProcessError", "compilation terminated",
                  "error: ", "cpp_extension", "CompileError", "NVRTC", "nvrtc")


def _short_tb(limit: int = 6000) -> str:
    return traceback.format_exc()[-limit:]


# Buffer ops a message may carry ahead of it ("before").
FOLDED_OPS = ("alloc", "fill", "release")


class Worker:
    def __init__(self, fw):
        self.fw = fw
        self.ns: dict | None = None
        self.models: dict = {}
        self.placed = None
        self.buffers = None
        self.conventions: dict = {}
        self.progress = None   # sends {"progress": what} before a long request's reply (main sets it)
        # The guard allocator's second pass (rowjob.verify): cuDNN's benchmark mode held off after the
        # candidate's import and before every build and call; how many times the candidate had turned it on.
        self.hold_cudnn = False
        self.cudnn_turned_on = 0
        self.shared = None  # wire.SharedReader: the driver's areas, once it sends them (main sets it)

    # -- one message --------------------------------------------------------------------------------------
    def handle(self, msg) -> dict:
        """The reply to one message. A message may carry buffer ops to run first, in order ("before": alloc,
        fill, release): the driver's target folds a placed call's allocs and releases into its next message
        rather than a round trip each (kernelbench/target.py). A failure of any of them is the reply, naming
        that op ("op"), and the message's own op does not run."""
        what = msg.get("op")
        try:
            for op in msg.get("before") or ():
                what = op.get("op") if isinstance(op, dict) else op
                if what not in FOLDED_OPS:
                    raise ValueError(f"{what!r} cannot ride before another message (only {', '.join(FOLDED_OPS)})")
                getattr(self, what)(op)
            what = msg.get("op")
            return getattr(self, what)(msg)
        except BaseException as e:  # noqa: BLE001 - a worker-side failure is reported, never silent
            return {"status": "error", "op": what, "message": f"{type(e).__name__}: {e}"[:2000],
                    "traceback": _short_tb()}

    # -- requests --------------------------------------------------------------------------------------
    def init(self, msg):
        if self.fw.NAME == "torch" and msg.get("ext_cache"):
            from . import extcache
            extcache.install(msg["ext_cache"])
        if msg.get("guard_bytes") is not None:  # 0 under memcheck (kernelbench/sanitizer.py), before any buffer
            from . import layout
            layout.GUARD_BYTES = int(msg["guard_bytes"])
        self.buffers = self.fw.Buffers(msg.get("guard_seed", 0))
        guard_note = ""
        if self.fw.NAME == "torch":  # before the candidate's module can take any CUDA memory
            guard_note = self.fw.install_guard_allocator(msg.get("guard_library"), msg.get("guard_seed", 0))
        t0 = time.monotonic()
        try:
            ns = exec_module(msg["custom_code"], "kgate_candidate", "<candidate>")
        except SyntaxError as e:
            return {"status": "import_error", "message": f"SyntaxError: {e}"}
        except BaseException as e:  # noqa: BLE001 - anything the candidate's module does is its verdict
            text = _short_tb()
            kind = "compile_error" if any(h in text for h in _COMPILE_HINTS) else "import_error"
            return {"status": kind, "message": f"{type(e).__name__}: {e}"[:2000], "traceback": text}
        seconds = time.monotonic() - t0
        self.hold_cudnn = bool(msg.get("hold_cudnn_benchmark"))
        self._hold()
        entry = msg.get("entry", "ModelNew")
        if entry not in ns or not callable(ns[entry]):
            return {"status": "import_error", "message": f"the candidate defines no callable {entry}"}
        self.ns = ns
        return {"status": "ok", "seconds": seconds, "guard": guard_note, **_ext_stats(self.fw)}

    def _hold(self):
        """torch.backends.cudnn.benchmark = False where the init request asked for it (fw.hold_cudnn_benchmark;
        a framework without it has nothing to hold)."""
        hold = getattr(self.fw, "hold_cudnn_benchmark", None) if self.hold_cudnn else None
        if hold is not None and hold():
            self.cudnn_turned_on += 1

    def build(self, msg):
        if msg.get("function"):  # a plain function, called as it is (kgate.target.WorkerTarget)
            self.models[msg["slot"]] = self.ns[msg["function"]]
            self.conventions[msg["slot"]] = msg.get("convention", "returning")
            return {"status": "ok"}
        self.conventions[msg["slot"]] = "returning"
        self._hold()
        init = self.fw.prepare_init_inputs(_from_wire(self.fw, msg["init_inputs"]))
        # Many candidates compile their extension in ModelNew.__init__: the reply says how long that took
        # (extcache's builds during this request), so the row's record counts it as compilation.
        since = _ext_stats(self.fw)["compile_seconds"]
        try:
            self.models[msg["slot"]] = self.fw.build(self.ns["ModelNew"], init, msg["seed"],
                                                     eval_mode=msg.get("eval", True))
        except BaseException as e:  # noqa: BLE001
            return {"status": "raised", "message": f"{type(e).__name__}: {e}"[:2000], "traceback": _short_tb(),
                    **_ext_stats(self.fw, since)}
        return {"status": "ok", **_ext_stats(self.fw, since)}

    def call(self, msg):
        """baseline's call: the inputs in guarded buffers, the candidate's outputs back as host arrays."""
        fw = self.fw
        model = self.models[msg["slot"]]
        self.placed = fw.Placed(msg["inputs"], "dense", msg.get("guard_seed", 0))
        if msg.get("seed") is not None:
            fw.set_seed(msg["seed"])
        if msg.get("eval") and hasattr(model, "eval"):
            model.eval()
        self._hold()
        t0 = time.monotonic()
        try:
            with fw.no_grad():
                out = model(*self.placed.views)
                fw.sync()
                outs = [fw.describe_output(o) | ({"array": fw.output_to_numpy(o)} if fw.is_tensor(o) else {})
                        for o in fw.flatten_outputs(out)]
                if not isinstance(out, (tuple, list)):
                    outs[0]["single"] = True
        except BaseException as e:  # noqa: BLE001
            seconds = time.monotonic() - t0
            ok = fw.healthy()
            return {"status": "raised" if ok else "cuda_error", "message": f"{type(e).__name__}: {e}"[:2000],
                    "traceback": _short_tb(), "seconds": seconds, "fatal": not ok}
        return {"status": "ok", "outputs": outs, "seconds": time.monotonic() - t0, "guards": self.placed.guards()}

    # -- the engine's buffers (Target::alloc, write, fill, read, check_guards, release) -------------------------
    def alloc(self, msg):
        bid = msg.get("id")  # the driver's choice (kernelbench/target.py), or else the next free id
        return {"status": "ok", "id": self.buffers.alloc(int(msg["bytes"]), None if bid is None else int(bid))}

    def release(self, msg):
        self.buffers.release(int(msg["id"]))
        return {"status": "ok"}

    def write(self, msg):
        self.buffers.write(int(msg["id"]), int(msg["offset"]), msg[wire.RAW][0])
        return {"status": "ok"}

    def fill(self, msg):
        self.buffers.fill_bytes(int(msg["id"]), int(msg["offset"]), int(msg["bytes"]), int(msg["value"]))
        return {"status": "ok"}

    def read(self, msg):
        return {"status": "ok", wire.RAW: [self.buffers.read(int(msg["id"]), int(msg["offset"]), int(msg["bytes"]))]}

    def guards(self, msg):
        return {"status": "ok", "violation": self.buffers.guards(int(msg["id"]))}

    def ecall(self, msg):
        """One CallRequest: every invocation (in flight together where the framework can), then each
        output gathered dense from its buffer, then the guards of the candidate's own allocations."""
        fw, bufs = self.fw, self.buffers
        fn = self.models[msg["slot"]]
        convention = self.conventions.get(msg["slot"], "returning")
        codes = msg["codes"]
        poison = msg.get("poison") or b""
        invs = msg["invocations"]
        if poison:
            for inv in invs:
                for a in inv["outputs"]:
                    bufs.fill(a, poison)
            if not fw.set_allocator_poison(poison):
                fw.poison_allocator(poison[0], [_nbytes(fw, a) for inv in invs for a in inv["outputs"]])
        if msg.get("eval") and hasattr(fn, "eval"):
            fn.eval()
        fw.sync()
        t0 = time.monotonic()
        results = [None] * len(invs)
        stream = msg.get("stream", "own_stream")

        def one(k):
            inv = invs[k]
            xs = [bufs.view(*a) for a in inv["inputs"]]
            ys = [bufs.view(*a) for a in inv["outputs"]]
            args = [xs[v] if kind == "tensor" else v for kind, v in inv.get("args") or [("tensor", i) for i in range(len(xs))]]
            self._hold()
            started = time.monotonic() - t0
            try:
                with fw.no_grad():
                    if convention == "destination":
                        status = int(fn(xs, ys) or 0)
                        message = ""
                    else:
                        out = fn(*args)
                        got = fw.flatten_outputs(out)
                        status, message = codes["ok"], ""
                        if len(got) != len(ys):
                            status, message = codes["error"], f"returned {len(got)} outputs, the contract has {len(ys)}"
                        else:
                            for i, (y, g) in enumerate(zip(ys, got)):
                                why = fw.store_output(y, g)
                                if why:
                                    status, message = codes["error"], f"output {i}: {why}"
                                    break
            except BaseException as e:  # noqa: BLE001 - the candidate's exception is its refusal
                if not fw.healthy():
                    raise
                status, message = codes["refused"], f"{type(e).__name__}: {e}"[:2000]
            results[k] = {"status": status, "message": message, "started": started,
                          "finished": time.monotonic() - t0}

        try:
            if stream == "staged_inputs" and fw.NAME == "torch" and fw.DEVICE.type == "cuda":
                fw.staged_invocations(one, [[bufs.view(*a) for a in inv["inputs"]] for inv in invs])
            elif len(invs) > 1:
                fw.concurrent(one, len(invs))
            else:
                one(0)
            fw.sync()
        except BaseException as e:  # noqa: BLE001 - the process's device state is gone: a crash
            return {"status": "cuda_error", "message": f"{type(e).__name__}: {e}"[:2000], "fatal": True}
        # Each output's dense bytes, in order: into the outputs' area the driver offered (wire.py), which it
        # copies into the engine's arrays; else raw after the reply, read straight into them.
        outs = [a for inv in invs for a in inv["outputs"]]
        placed = None
        if msg.get(wire.OUT_AREA) and self.shared is not None:
            try:
                placed = self.shared.out_views([_nbytes(fw, a) for a in outs])
            except KeyError:  # a dtype _nbytes does not size: the socket
                placed = None
        if placed is not None:
            try:
                for a, dest in zip(outs, placed[1]):
                    bufs.dense_into(a, dest)
                payload = {wire.SHARED: placed[0]}
            except Exception as e:  # noqa: BLE001 - a copy the area cannot take (not yet seen): the socket's, below
                print(f"kgate worker: outputs' area copy failed, sent on the socket: {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
                placed = None
        if placed is None:
            payload = {wire.RAW: [bufs.dense_array(a) for a in outs]}
        touched = dict.fromkeys(a[0] for inv in invs for a in inv["inputs"] + inv["outputs"])
        guards = []
        for bid in touched:  # the first violation of every buffer the call touched (CallResult::guards)
            v = bufs.guards(bid)
            if v:
                guards.append({"buffer": bid, **v})
        return {"status": "ok", "results": results, "seconds": time.monotonic() - t0, "guards": guards,
                "allocator_guards": fw.allocator_violations(), **payload}

    def harness(self, msg):
        from . import harness
        return harness.run_in_process(self.fw, msg["ref_code"], msg["custom_code"], msg["mode"],
                                      msg.get("trials", 5), progress=self.progress if msg.get("progress") else None)


def _ext_stats(fw, since: float = 0.0) -> dict:
    """What a reply says of this worker's extension builds (extcache.py; torch only): the seconds spent
    compiling after `since` (a request's start, 0: since the worker began), and the names of the extensions
    whose build failed so far."""
    if fw.NAME != "torch":
        return {"compile_seconds": 0.0, "ext_failed": []}
    from . import extcache
    return {"compile_seconds": extcache.stats["compile_seconds"] - since,
            "ext_failed": list(extcache.stats["failed"])[:20]}


def _nbytes(fw, arg) -> int:
    n = 1
    for e in arg[2]:
        n *= int(e)
    return n * {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "bool": 1}[arg[1]]


def _from_wire(fw, values):
    out = []
    for v in values:
        if isinstance(v, dict) and v.get("__tensor__"):
            out.append(fw.from_numpy(v["array"]) if fw.NAME == "torch" else v["array"])
        else:
            out.append(v)
    return out


class Staging:
    """wire.recv's sink in the worker: a write's payload is read into one buffer kept for the worker's life
    (grown when a larger one comes) and copied from there into the engine's buffer before the next message.
    A fresh buffer per write of a large input (hundreds of MB, every case) cost a page fault per page."""

    def __init__(self):
        self.buf = bytearray(0)

    def __call__(self, k: int, n: int):
        if k != 0:
            return None
        if len(self.buf) < n:
            self.buf = bytearray(n)  # a new one: the last message may still hold a view of the old
        return memoryview(self.buf)[:n]


def main():
    fd = int(sys.argv[1])
    conn = Connection(fd)
    fw = importlib.import_module(f"kgate.kernelbench.fw_{os.environ.get('KGATE_FW', 'numpy')}")
    w = Worker(fw)
    w.progress = lambda what: conn.send({"progress": what})
    staging = Staging()
    shared = wire.SharedReader(conn)  # the driver's staging areas, once it sends them (wire.py)
    w.shared = shared
    while True:
        try:
            msg = wire.recv(conn, staging, shared)
        except EOFError:
            return
        op = msg.get("op")
        if op == "exit":
            conn.send({"status": "ok"})
            return
        reply = w.handle(msg)
        wire.send(conn, reply)
        if reply.get("fatal"):
            sys.stdout.flush()
            os._exit(3)  # the CUDA context is gone: the driver restarts a fresh worker


if __name__ == "__main__":
    main()
