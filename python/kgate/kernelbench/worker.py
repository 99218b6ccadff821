"""The candidate's worker process: holds ModelNew and nothing else.

It never receives oracle outputs, expected values, the row's seed or the results file's path: only the
candidate's source, init inputs, and the inputs of each call. It answers each request with what the candidate
returned (as host arrays) plus the input guards it was asked to report. Run as
`python -m kgate.kernelbench.worker FD`, FD a socket speaking multiprocessing.connection's framing.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from multiprocessing.connection import Connection

from .task import exec_module

_COMPILE_HINTS = ("Error building extension", "ninja", "nvcc", "CalledProcessError", "compilation terminated",
                  "error: ", "cpp_extension", "CompileError", "NVRTC", "nvrtc")


def _short_tb(limit: int = 6000) -> str:
    return traceback.format_exc()[-limit:]


class Worker:
    def __init__(self, fw):
        self.fw = fw
        self.ns: dict | None = None
        self.models: dict = {}
        self.placed = None

    # -- requests --------------------------------------------------------------------------------------
    def init(self, msg):
        if self.fw.NAME == "torch" and msg.get("ext_cache"):
            from . import extcache
            extcache.install(msg["ext_cache"])
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
        if "ModelNew" not in ns or not callable(ns["ModelNew"]):
            return {"status": "import_error", "message": "the candidate defines no callable ModelNew"}
        self.ns = ns
        compile_s = 0.0
        if self.fw.NAME == "torch":
            from . import extcache
            compile_s = extcache.stats["compile_seconds"]
        return {"status": "ok", "seconds": seconds, "compile_seconds": compile_s}

    def build(self, msg):
        init = self.fw.prepare_init_inputs(_from_wire(self.fw, msg["init_inputs"]))
        try:
            self.models[msg["slot"]] = self.fw.build(self.ns["ModelNew"], init, msg["seed"],
                                                     eval_mode=msg.get("eval", True))
        except BaseException as e:  # noqa: BLE001
            return {"status": "raised", "message": f"{type(e).__name__}: {e}"[:2000], "traceback": _short_tb()}
        return {"status": "ok"}

    def call(self, msg):
        fw = self.fw
        model = self.models[msg["slot"]]
        inputs = msg["inputs"]
        if msg.get("reuse") and self.placed is not None:
            self.placed.write(inputs)
        else:
            self.placed = None
            if msg.get("shift"):  # a throwaway allocation so fresh buffers land at other addresses
                self._shift = fw.Placed([i for i in inputs if hasattr(i, "dtype")], "dense", 1)
            self.placed = fw.Placed(inputs, msg.get("layout", "dense"), msg.get("guard_seed", 0))
        if msg.get("poison") is not None:
            fw.poison_allocator(msg["poison"], msg.get("poison_sizes", []))
        if msg.get("seed") is not None:
            fw.set_seed(msg["seed"])
        if msg.get("eval") and hasattr(model, "eval"):
            model.eval()
        t0 = time.monotonic()
        try:
            with fw.no_grad():
                if msg.get("stream") == "staged":
                    outs = fw.staged_call(model, self.placed)
                else:
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
        seconds = time.monotonic() - t0
        reply = {"status": "ok", "outputs": outs, "seconds": seconds, "guards": self.placed.guards()}
        if msg.get("return_inputs"):
            reply["inputs_after"] = self.placed.read_back()
        return reply

    def harness(self, msg):
        from . import harness
        return harness.run_in_process(self.fw, msg["ref_code"], msg["custom_code"], msg["mode"],
                                      msg.get("trials", 5))


def _from_wire(fw, values):
    out = []
    for v in values:
        if isinstance(v, dict) and v.get("__tensor__"):
            out.append(fw.from_numpy(v["array"]) if fw.NAME == "torch" else v["array"])
        else:
            out.append(v)
    return out


def main():
    fd = int(sys.argv[1])
    conn = Connection(fd)
    fw = importlib.import_module(f"kgate.kernelbench.fw_{os.environ.get('KGATE_FW', 'numpy')}")
    w = Worker(fw)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg.get("op")
        if op == "exit":
            conn.send({"status": "ok"})
            return
        try:
            reply = getattr(w, op)(msg)
        except BaseException as e:  # noqa: BLE001 - a worker-side failure is reported, never silent
            reply = {"status": "error", "message": f"{type(e).__name__}: {e}"[:2000], "traceback": _short_tb()}
        conn.send(reply)
        if reply.get("fatal"):
            sys.stdout.flush()
            os._exit(3)  # the CUDA context is gone: the driver restarts a fresh worker


if __name__ == "__main__":
    main()
