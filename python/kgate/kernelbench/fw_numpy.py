"""The numpy framework: KernelBench-format tasks whose Model/ModelNew compute with numpy on the CPU.

It exists so CI (no PyTorch, no GPU) runs the adapter, the worker protocol and the gates end to end. Tasks
in this format: `Model` is a class with `forward(*arrays)` (or __call__), its float ndarray attributes are
its parameters, and `get_inputs()` draws from numpy's global generator (seeded like torch.manual_seed).
What numpy cannot express is SKIPped with that reason: the caching allocator (coverage), streams (stream),
TF32 (the TF32 reference).
"""
from __future__ import annotations

import copy
import contextlib

import numpy as np

from . import layout as L

NAME = "numpy"


def set_seed(seed: int):
    np.random.seed(int(seed) % (2**32))


def is_tensor(x) -> bool:
    return isinstance(x, np.ndarray)


def to_numpy(x) -> np.ndarray:
    return np.array(x, copy=True)


def from_numpy(a: np.ndarray):
    return np.array(a, copy=True)


def no_grad():
    return contextlib.nullcontext()


def sync():
    pass


def prepare_init_inputs(init):
    return list(init)


def _forward(model):
    return model.forward if hasattr(model, "forward") else model


def build(cls, init_inputs, seed, eval_mode=True):
    set_seed(seed)
    model = cls(*init_inputs)
    if eval_mode and hasattr(model, "eval"):
        model.eval()
    return model


def producer_trial_seeds(seed: int, n: int) -> list[int]:
    """numpy's analogue of torch.manual_seed(seed) then one torch.randint(0, 2**32 - 1) per trial."""
    set_seed(seed)
    return [int(np.random.randint(0, 2**32 - 1, dtype=np.int64)) for _ in range(n)]


def to_device(x):
    return x


def model_to_device(m):
    return m


def allclose(a, b, atol, rtol) -> bool:
    return bool(np.allclose(a, b, atol=atol, rtol=rtol))


def tensor_from_output(desc: dict):
    return desc["array"]


def input_shapes(task) -> list:
    return [tuple(x.shape) if isinstance(x, np.ndarray) else None for x in task.get_inputs()]


def output_nbytes(arrays) -> list[int]:
    return [int(a.nbytes) for a in arrays if isinstance(a, np.ndarray)]


def check_lazy(desc: dict) -> str | None:
    if desc.get("kind") != "tensor":
        return f"output is not a tensor: {desc.get('type')}"
    return None


def _cast_params(obj, dtype, seen=None):
    seen = seen if seen is not None else set()
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return
    seen.add(id(obj))
    for k, v in vars(obj).items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            setattr(obj, k, v.astype(dtype))
        elif hasattr(v, "__dict__") and not isinstance(v, type):
            _cast_params(v, dtype, seen)


def convert(model, precision: str):
    """A copy of the model computing in `precision` ('f64', 'f32', 'f16'); None where numpy has none."""
    dt = {"f64": np.float64, "f32": None, "f16": np.float16}.get(precision, "missing")
    if dt == "missing":
        return None
    m = copy.deepcopy(model)
    if dt is not None:
        _cast_params(m, dt)
    return m


def run(model, inputs, precision: str):
    """Runs model on numpy inputs, float inputs cast to the precision's dtype; returns the raw result."""
    dt = {"f64": np.float64, "f16": np.float16}.get(precision)
    xs = [x.astype(dt) if (dt is not None and isinstance(x, np.ndarray) and x.dtype.kind == "f") else x
          for x in inputs]
    return _forward(model)(*xs)


def flatten_outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def describe_output(x) -> dict:
    if isinstance(x, np.ndarray):
        return {"kind": "tensor", "type": "ndarray", "dtype": str(x.dtype), "shape": list(x.shape),
                "device": "cpu", "storage_bytes": int(x.nbytes), "data_ptr_nonzero": True,
                "contiguous": bool(x.flags.c_contiguous)}
    return {"kind": "other", "type": type(x).__name__, "repr": repr(x)[:200]}


def output_to_numpy(x) -> np.ndarray:
    return np.array(x, copy=True)


# ---- worker side ---------------------------------------------------------------------------------------

class Placed:
    """Inputs placed in guarded host buffers."""

    def __init__(self, arrays, layout: str, guard_seed: int):
        self.buffers, self.patterns, self.payload, self.views = [], [], [], []
        for i, a in enumerate(arrays):
            if not isinstance(a, np.ndarray):
                self.buffers.append(None); self.patterns.append(None); self.payload.append(0)
                self.views.append(a)
                continue
            lay = layout if a.ndim >= 1 else "dense"
            nbytes, off, strides = L.plan(a.shape, a.itemsize, lay)
            pat = L.guard_pattern(guard_seed, i, 2 * L.GUARD_BYTES)
            buf = np.empty(2 * L.GUARD_BYTES + nbytes, dtype=np.uint8)
            buf[:L.GUARD_BYTES] = pat[:L.GUARD_BYTES]
            buf[L.GUARD_BYTES + nbytes:] = pat[L.GUARD_BYTES:]
            payload = buf[L.GUARD_BYTES:L.GUARD_BYTES + nbytes]
            payload[:] = 0xFF
            view = np.lib.stride_tricks.as_strided(
                payload[off * a.itemsize:].view(a.dtype) if a.size else np.empty(0, a.dtype),
                shape=a.shape, strides=tuple(s * a.itemsize for s in strides))
            view[...] = a
            self.buffers.append(buf); self.patterns.append(pat); self.payload.append(nbytes)
            self.views.append(view)

    def write(self, arrays):
        """New values into the same buffers (the freshness gate's B-in-A's-buffers)."""
        for v, a in zip(self.views, arrays):
            if isinstance(v, np.ndarray) and isinstance(a, np.ndarray):
                v[...] = a

    def guards(self) -> list:
        out = []
        for i, (buf, pat, n) in enumerate(zip(self.buffers, self.patterns, self.payload)):
            if buf is not None:
                v = L.first_guard_violation(buf, pat, n)
                if v:
                    out.append({"input": i, **v})
        return out

    def read_back(self) -> list:
        return [np.array(v, copy=True) if isinstance(v, np.ndarray) else None for v in self.views]


def poison_allocator(pattern: int, sizes: list[int]) -> bool:
    return False  # numpy's allocator is malloc: nothing to poison deterministically


def staged_call(fn, placed: Placed):
    raise NotImplementedError("numpy has no streams")


def healthy() -> bool:
    return True


CAPABILITIES = {"poison": False, "stream": False, "tf32": False, "f16": True}
