"""What the KernelBench front-end hands the engine besides the candidate: the task's own get_inputs() as the
input source, the task's Model in float64 as the oracle, Model below float64 as the reference runs, the
derived contract, and the call plan that tells the worker which ModelNew (built at which binding of the
size constants) a call is for. Everything here runs in the row job (the driver), never in the worker.

A binding of the contract's dims is a binding of the task's size constants: the task's source is executed
again with those constants rewritten (task.rebind), so constants derived from them follow.
"""
from __future__ import annotations

import ctypes
import os
from collections import OrderedDict

from .. import _core, seeds
from .derive import derive
from .task import Task, TaskError

KEEP_MODELS = 4   # (binding, precision) models kept at once: float64 copies of large models are large

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4   # glibc's mallopt parameters (malloc.h)
_host_memory_kept = False


def keep_freed_host_memory() -> bool:
    """The row job's large host arrays (inputs, oracle outputs and their float64 references, tens to
    hundreds of MB each) are allocated and freed again for every case. glibc serves blocks above 32 MB with
    a fresh mmap and unmaps them on free (its mmap threshold cannot be raised past 32 MB), so every such
    array costs a page fault per 4 KB page and the kernel zeroing it: on the CPU bench row
    (bench/kgate/rows) 40% of the row's time was system time. Served from the heap instead (no mmap, no trim
    of freed memory) a freed block is reused as it is. Values are unchanged: every array is written before
    it is read. The price is a higher resident set (freed blocks stay with the process until it ends, and
    heap fragments: +30% peak on the bench row); KGATE_HOST_MMAP=1 keeps glibc's defaults. Process-wide
    and for the driver only (the row job exits after its row); never in the worker, whose memory is the
    candidate's. Returns whether it took effect (glibc only)."""
    global _host_memory_kept
    if _host_memory_kept or os.environ.get("KGATE_HOST_MMAP") == "1":
        return _host_memory_kept
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _host_memory_kept = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    return _host_memory_kept


def init_seed(seed: int) -> int:
    """The seed ModelNew and the task's Model are built under: the row seed's "init" stream, as torch takes it."""
    return seeds.torch_seed(seeds.derive(seed, "init")) % (2**32)


def build_request(fw, task: Task, seed: int) -> dict:
    """The worker's build request for ModelNew: the task's get_init_inputs() drawn under `seed` (init_seed),
    tensors as host arrays. The row job's verification and its compile job (rowjob.compile_only) both ask
    for ModelNew this way."""
    fw.set_seed(seed)
    init = list(task.get_init_inputs())
    wire = [{"__tensor__": True, "array": fw.to_numpy(x)} if fw.is_tensor(x) else x for x in init]
    return {"init_inputs": wire, "seed": seed, "eval": True}


class Frontend:
    def __init__(self, fw, ref_code: str, seed: int, *, call_timeout: float = 60.0, case_cap: int | None = None):
        self.fw, self.ref_code, self.seed = fw, ref_code, seed
        self.host_memory_kept = keep_freed_host_memory()
        self.init_seed = init_seed(seed)
        self._tasks: OrderedDict = OrderedDict()
        self._models: OrderedDict = OrderedDict()
        self._values: dict = {}
        nominal = self.task({})
        fw.set_seed(self.init_seed)
        try:
            xs = list(nominal.get_inputs())
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"get_inputs() failed: {type(e).__name__}: {e}") from e
        ranges, k = {}, 0
        for x in xs:
            if fw.is_tensor(x):
                if fw.dtype_name(x) in ("i32", "i64"):
                    a = fw.to_numpy(x)
                    ranges[k] = (int(a.min()), int(a.max())) if a.size else (0, 1)
                k += 1
        # case_cap: the bytes a row's largest case may need beside others (kernelbench/casemem.py), or None
        self.derived = derive(fw, ref_code, self.init_seed, timeout=call_timeout, int_ranges=ranges,
                              case_cap=case_cap)
        self.dims = self.derived.dims
        self.nominal = {d: v["nominal"] for d, v in self.dims.items()}

    # -- the task at a binding -----------------------------------------------------------------------------
    def overrides(self, bindings) -> dict:
        return {c: int(v) for c, v in dict(bindings).items() if c in self.dims and int(v) != self.dims[c]["nominal"]}

    def task(self, bindings) -> Task:
        key = tuple(sorted(self.overrides(bindings).items())) if hasattr(self, "dims") else ()
        if key not in self._tasks:
            self._tasks[key] = Task(self.ref_code, dict(key))  # TaskError propagates
            while len(self._tasks) > 16:
                self._tasks.popitem(last=False)
        return self._tasks[key]

    def values(self, bindings) -> list:
        """The non-tensor arguments get_inputs() gives at this binding (None at tensor positions)."""
        key = tuple(sorted(self.overrides(bindings).items()))
        if key not in self._values:
            task = self.task(bindings)
            self.fw.set_seed(self.init_seed)
            self._values[key] = [None if self.fw.is_tensor(x) else x for x in task.get_inputs()]
        return self._values[key]

    def arguments(self, tensors: list, bindings) -> list:
        vals = self.values(bindings)
        return [tensors[k] if kind == "tensor" else vals[i] for i, (kind, k) in enumerate(self.derived.args)]

    # -- the input source ------------------------------------------------------------------------------------
    def describe(self) -> str:
        return "the task's get_inputs(), size constants rebound to the bindings, seeded per draw"

    def draw(self, bindings, seed: int) -> list:
        task = self.task(bindings)
        self.fw.set_seed(seeds.torch_seed(int(seed)) % (2**32))
        xs = list(task.get_inputs())
        self._values.setdefault(tuple(sorted(self.overrides(bindings).items())),
                                [None if self.fw.is_tensor(x) else x for x in xs])
        return [self.fw.host_input(x) for x in xs if self.fw.is_tensor(x)]

    # -- the oracle and the references -----------------------------------------------------------------------
    def model(self, bindings, precision: str):
        key = (tuple(sorted(self.overrides(bindings).items())), precision)
        if key not in self._models:
            task = self.task(bindings)
            fw = self.fw
            fw.set_seed(self.init_seed)
            init = fw.prepare_init_inputs(list(task.get_init_inputs()))
            self._models[key] = fw.convert(fw.build(task.Model, init, self.init_seed), precision)
            while len(self._models) > KEEP_MODELS:
                self._models.popitem(last=False)
        self._models.move_to_end(key)
        return self._models[key]

    def run(self, inputs, bindings, precision: str) -> list:
        fw = self.fw
        model = self.model(bindings, precision)
        if model is None:
            raise TaskError(f"the task's Model has no {precision} form in {fw.NAME}")
        xs = self.arguments([fw.from_host(h, precision=precision) for h in inputs], bindings)
        return fw.flatten_outputs(fw.run(model, xs, precision))

    def oracle(self, inputs, bindings, attrs) -> list:
        """The task's Model in float64 (default dtype float64, parameters and buffers converted)."""
        try:
            return self.run_to_host(inputs, bindings, "f64", True)
        except Exception as e:  # noqa: BLE001 - the reference's failure, reported as the oracle's
            raise RuntimeError(f"the float64 oracle (the task's Model) cannot run: {type(e).__name__}: {e}") from e

    def run_to_host(self, inputs, bindings, precision: str, exact: bool) -> list:
        """One run of the Model, its outputs copied to the host; the device memory the run took goes back to
        the device (fw.release_cache), not to this process's cache: rows run side by side on one GPU, and a
        float64 oracle's peak kept cached in every row job is what ran the neighbours out of memory."""
        outs = self.run(inputs, bindings, precision)
        try:
            return [self.fw.result_to_host(o, exact) for o in outs]
        finally:
            del outs
            self.fw.release_cache()

    def reference_runs(self, inputs, bindings, attrs) -> list:
        """Model in fp32 with TF32 off: the working precision, whose error widens every bound."""
        return [("fp32", self.run_to_host(inputs, bindings, "f32", False))]

    def label_runs(self, inputs, bindings, attrs) -> list:
        """TF32 and fp16, where the framework has them: asked for by the engine only when a failure needs its
        precision label (two model runs and their host copies saved on every other case). A lower precision
        that cannot run is left out."""
        runs = []
        for label, precision in (("tf32", "tf32"), ("fp16", "f16")):
            if precision == "tf32" and not self.fw.CAPABILITIES.get("tf32"):
                continue
            try:
                runs.append((label, self.run_to_host(inputs, bindings, precision, False)))
            except Exception:  # noqa: BLE001 - a model without a half form only loses that label
                continue
        return runs

    # -- the call plan (kernelbench/target.py) ------------------------------------------------------------------
    def bindings_of(self, inputs, outputs) -> dict:
        """The dims' values behind one invocation's layouts (each dim read off an extent it makes)."""
        found = {}
        specs = [(e, a) for (_, _, shape), a in zip(self.derived.inputs, inputs) for e in zip(shape, a.layout.shape)]
        specs += [(e, a) for (_, _, shape, _), a in zip(self.derived.outputs, outputs) for e in zip(shape, a.layout.shape)]
        for (entry, extent), _ in specs:
            if not isinstance(entry, str):
                continue
            for sep in ("+", "-", "*"):
                if sep in entry:
                    name, k = entry.split(sep)
                    k = int(k)
                    value = extent - k if sep == "+" else extent + k if sep == "-" else extent // k
                    break
            else:
                name, value = entry, extent
            found.setdefault(name, int(value))
        return {d: found.get(d, v["nominal"]) for d, v in self.dims.items()}

    def slot(self, bindings) -> str:
        return "kgate:" + ",".join(f"{k}={v}" for k, v in sorted(self.overrides(bindings).items()))

    def build_request(self, bindings) -> dict:
        return build_request(self.fw, self.task(bindings), self.init_seed)

    def plan(self, inputs, outputs):
        b = self.bindings_of(inputs, outputs)
        vals = self.values(b)
        args = [("tensor", k) if kind == "tensor" else ("value", vals[i])
                for i, (kind, k) in enumerate(self.derived.args)]
        return self.slot(b), (lambda: self.build_request(b)), args


class Source(_core.InputSource if _core is not None and hasattr(_core, "InputSource") else object):
    """The Frontend's get_inputs() as the engine's InputSource."""

    def __init__(self, fe: Frontend):
        super().__init__()
        self.fe = fe

    def describe(self):
        return self.fe.describe()

    def draw(self, bindings, seed):
        return self.fe.draw(bindings, seed)
