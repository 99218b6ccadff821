"""What every gate works with: the task at a binding of its constants, the driver-side references (the
float64 oracle, fp32 with TF32 off, TF32, fp16), kgate's inputs from the task's own get_inputs under a
secret seed, and the candidate in its worker."""
from __future__ import annotations

import time

import numpy as np

from .. import seeds
from . import compare
from .client import Candidate, WorkerDied
from .task import Task, TaskError


class OracleError(Exception):
    """The reference could not run (at this binding, or with these inputs): never held against the
    candidate. At the nominal binding it ends the row as ORACLE_ERROR."""


class Outcome:
    """One candidate call, as the gates see it."""

    def __init__(self, reply: dict | None = None, died: WorkerDied | None = None):
        self.reply, self.died = reply or {}, died

    @property
    def ok(self) -> bool:
        return self.died is None and self.reply.get("status") == "ok"

    @property
    def outputs(self) -> list:
        return self.reply.get("outputs", [])

    @property
    def arrays(self) -> list:
        return [o.get("array") for o in self.outputs]

    def verdict(self) -> str:
        """The verdict a gate gives a call that did not complete normally."""
        if self.died is not None:
            return "TIMEOUT" if self.died.kind == "timeout" else "CRASH"
        if self.reply.get("status") == "cuda_error":
            return "CRASH"
        return "FAIL"

    def why(self) -> str:
        if self.died is not None:
            return self.died.detail
        return self.reply.get("message", self.reply.get("status", ""))


def gate_result(gate: str, verdict: str, summary: str, **kw) -> dict:
    r = {"gate": gate, "verdict": verdict, "summary": summary}
    r.update({k: v for k, v in kw.items() if v is not None})
    return r


class Context:
    def __init__(self, fw, row: dict, seed: int, candidate: Candidate, *, tolerance_scale: float = 1.0):
        self.fw, self.row, self.seed, self.cand = fw, row, seed, candidate
        self.tolerance_scale = tolerance_scale
        self.ref_code = row["ref_code"]
        self._tasks: dict[tuple, Task] = {}
        self._refs: dict[tuple, dict] = {}
        self._built: set[tuple] = set()
        self.init_seed = seeds.torch_seed(seeds.derive(seed, "init")) % (2**32)
        self.current_gate = ""
        self.guard_log: list[tuple[str, dict]] = []   # (gate, violation) for every call of the row
        self.calls = 0
        self.nominal = self.task({})

    # -- task and references -------------------------------------------------------------------------
    def task(self, overrides: dict) -> Task:
        k = tuple(sorted(overrides.items()))
        if k not in self._tasks:
            self._tasks[k] = Task(self.ref_code, overrides)  # TaskError propagates
        return self._tasks[k]

    def init_inputs(self, task: Task):
        self.fw.set_seed(self.init_seed)
        try:
            return list(task.get_init_inputs())
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"get_init_inputs() failed: {type(e).__name__}: {e}") from e

    def reference_model(self, task: Task, precision: str):
        k = tuple(sorted(task.overrides.items()))
        models = self._refs.setdefault(k, {})
        if precision not in models:
            try:
                init = self.fw.prepare_init_inputs(self.init_inputs(task))
                m = self.fw.build(task.Model, init, self.init_seed)
                models[precision] = self.fw.convert(m, precision)
            except TaskError:
                raise
            except Exception as e:  # noqa: BLE001
                if precision in ("f64", "f32"):
                    raise OracleError(f"Model({precision}) cannot be built: {type(e).__name__}: {e}") from e
                models[precision] = None
        return models[precision]

    def reference(self, task: Task, inputs: list, precision: str = "f64") -> list | None:
        """The task's Model at `precision` on inputs, as host arrays. f64 and f32 failing raise OracleError;
        tf32/f16 failing (or unavailable) give None."""
        caps = self.fw.CAPABILITIES
        if precision == "tf32" and not caps.get("tf32"):
            return None
        model = self.reference_model(task, precision)
        if model is None:
            return None
        try:
            out = self.fw.flatten_outputs(self.fw.run(model, inputs, precision))
            arrays = [self.fw.output_to_numpy(o) for o in out]
        except Exception as e:  # noqa: BLE001
            if precision in ("f64", "f32"):
                raise OracleError(f"Model in {precision} failed: {type(e).__name__}: {e}") from e
            return None
        return arrays

    def inputs(self, task: Task, *labels) -> list:
        """The task's own get_inputs() under a seed derived from the row's secret seed and labels."""
        s = seeds.torch_seed(seeds.derive(self.seed, "inputs", *labels)) % (2**32)
        self.fw.set_seed(s)
        try:
            values = list(task.get_inputs())
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"get_inputs() failed: {type(e).__name__}: {e}") from e
        return [self.fw.to_numpy(v) if self.fw.is_tensor(v) else v for v in values]

    # -- candidate -------------------------------------------------------------------------------------
    def slot(self, task: Task) -> str:
        return "kgate:" + ",".join(f"{k}={v}" for k, v in sorted(task.overrides.items()))

    def ensure_built(self, task: Task) -> Outcome:
        k = tuple(sorted(task.overrides.items()))
        if k in self._built and self.slot(task) in self.cand.builds:
            return Outcome({"status": "ok"})
        wire = [{"__tensor__": True, "array": self.fw.to_numpy(x)} if self.fw.is_tensor(x) else x
                for x in self.init_inputs(task)]
        try:
            reply = self.cand.build(self.slot(task), wire, self.init_seed)
        except WorkerDied as d:
            return Outcome(died=d)
        if reply.get("status") == "ok":
            self._built.add(k)
        return Outcome(reply)

    def call(self, task: Task, inputs: list, **opts) -> Outcome:
        built = self.ensure_built(task)
        if not built.ok:
            built.reply.setdefault("message", "ModelNew could not be built")
            return built
        opts.setdefault("guard_seed", seeds.derive(self.seed, "guards") & 0xFFFFFFFF)
        self.calls += 1
        try:
            out = Outcome(self.cand.call(self.slot(task), inputs, **opts))
        except WorkerDied as d:
            return Outcome(died=d)
        for v in out.reply.get("guards", []):
            self.guard_log.append((self.current_gate, v))
        return out

    # -- comparison helpers --------------------------------------------------------------------------------
    def judge(self, outcome: Outcome, oracle: list, ref: list | None) -> dict:
        """Error report of one call against the oracle (worst output), or the reason it cannot be judged."""
        if not outcome.ok:
            return {"ratio": float("inf"), "verdict": outcome.verdict(), "detail": outcome.why()}
        problem = compare.structure_problem(outcome.outputs, oracle)
        if problem:
            return {"ratio": float("inf"), "verdict": "FAIL", "detail": problem}
        reps = []
        for i, (c, o) in enumerate(zip(outcome.arrays, oracle)):
            r = compare.error_report(c, o, ref[i] if ref else None, self.tolerance_scale)
            r["tensor"] = f"output{i}"
            reps.append(r)
        w = compare.worst(reps)
        w["verdict"] = "PASS" if w["ratio"] <= 1.0 else "FAIL"
        return w


def timed(fn):
    """Decorator for gates: adds seconds and turns an unexpected exception into an ERROR verdict."""
    def wrapper(ctx: Context):
        t0 = time.monotonic()
        try:
            r = fn(ctx)
        except (OracleError, TaskError) as e:
            r = gate_result(fn.__module__.rsplit(".", 1)[-1], "SKIP", f"the reference cannot run: {e}")
            r["oracle_error"] = True
        except WorkerDied as d:  # a gate that talks to the worker directly (baseline, public_harness)
            r = gate_result(fn.__module__.rsplit(".", 1)[-1], "TIMEOUT" if d.kind == "timeout" else "CRASH",
                            d.detail)
        r["seconds"] = round(time.monotonic() - t0, 3)
        return r
    wrapper.__name__ = fn.__name__
    wrapper.__module__ = fn.__module__
    return wrapper


def evidence(ctx: Context, task: Task, variant: str, rep: dict, case_labels=()) -> dict:
    ev = {"seed": f"{ctx.seed:016x}", "case": "/".join(str(x) for x in case_labels), "variant": variant,
          "bindings": task.constants()}
    for k in ("tensor", "index", "expected", "got", "detail", "error", "bound", "e_ref"):
        if k in rep:
            ev[k] = rep[k]
    return ev


def float_inputs(inputs: list) -> list[int]:
    return [i for i, x in enumerate(inputs) if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.size > 0]
