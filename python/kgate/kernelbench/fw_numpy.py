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
    return isinstance(x, (np.ndarray, np.generic))


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


def release_cache():
    """Nothing to give back: numpy frees its arrays itself."""


def flatten_outputs(out) -> list:
    """The outputs as a list; a numpy scalar (what a full reduction returns) as the 0-dim array it is."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [np.asarray(o) if isinstance(o, np.generic) else o for o in outs]


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

    def guards(self) -> list:
        out = []
        for i, (buf, pat, n) in enumerate(zip(self.buffers, self.patterns, self.payload)):
            if buf is not None:
                v = L.first_guard_violation(buf, pat, n)
                if v:
                    out.append({"input": i, **v})
        return out



def poison_allocator(pattern: int, sizes: list[int]) -> bool:
    return False  # numpy's allocator is malloc: nothing to poison deterministically


def healthy() -> bool:
    return True


CAPABILITIES = {"poison": False, "stream": False, "tf32": False, "f16": True}


# ---- worker side: the engine's guarded buffers ------------------------------------------------------------

_KGATE_DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64,
                 "bool": np.bool_}


def kgate_dtype(name: str):
    if name not in _KGATE_DTYPES:
        raise TypeError(f"numpy has no dtype for kgate's {name}")
    return np.dtype(_KGATE_DTYPES[name])


class Buffers:
    """The engine's buffers (Target::alloc) in the worker: [guard | payload | guard] host arrays, guards a
    pattern drawn from the guard seed and the buffer's id. The driver names them by id only."""

    def __init__(self, guard_seed: int):
        self.guard_seed = guard_seed
        self.bufs: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self.next = 1

    def alloc(self, n: int, bid: int | None = None) -> int:
        bid = L.new_buffer_id(self, bid)
        g = L.GUARD_BYTES
        pat = L.guard_pattern(self.guard_seed, bid, 2 * g)
        buf = np.empty(2 * g + n, np.uint8)
        buf[:g], buf[g + n:] = pat[:g], pat[g:]
        self.bufs[bid] = (buf, pat, n)
        return bid

    def release(self, bid: int):
        self.bufs.pop(bid, None)

    def write(self, bid: int, off: int, data: bytes):
        buf, _, n = self.bufs[bid]
        if off + len(data) > n:
            raise IndexError(f"write of {len(data)} bytes at {off} past the end of buffer {bid} ({n} bytes)")
        g = L.GUARD_BYTES
        buf[g + off:g + off + len(data)] = np.frombuffer(data, np.uint8)

    def fill_bytes(self, bid: int, off: int, k: int, value: int):
        """`k` bytes of `value` from byte `off` of the payload (Target::fill)."""
        buf, _, n = self.bufs[bid]
        if off + k > n or not 0 <= value < 256:
            raise IndexError(f"fill of {k} bytes of {value} at {off}: buffer {bid} has {n} bytes")
        g = L.GUARD_BYTES
        buf[g + off:g + off + k] = value

    def read(self, bid: int, off: int, k: int):
        """The bytes as a view of the buffer (sent before anything can write it again)."""
        buf, _, n = self.bufs[bid]
        g = L.GUARD_BYTES
        return buf[g + off:g + off + k]

    def guards(self, bid: int):
        buf, pat, n = self.bufs[bid]
        return L.first_guard_violation(buf, pat, n)

    def view(self, bid: int, dtype: str, shape, strides, offset: int):
        buf, _, n = self.bufs[bid]
        dt = kgate_dtype(dtype)
        base = buf[L.GUARD_BYTES:L.GUARD_BYTES + n]
        return np.lib.stride_tricks.as_strided(base[offset * dt.itemsize:].view(dt), shape=tuple(shape),
                                               strides=tuple(s * dt.itemsize for s in strides))

    def fill(self, arg, pattern: bytes):
        v = self.view(*arg)
        if v.size and pattern:
            one = (pattern * (v.itemsize // len(pattern) + 1))[:v.itemsize]
            v[...] = np.frombuffer(one, dtype=v.dtype)[0]

    def dense_bytes(self, arg) -> bytes:
        return self.dense_array(arg).tobytes()

    def dense_into(self, arg, dest) -> None:
        """The argument's elements dense, copied into `dest` (a writable buffer of exactly their bytes)."""
        v = self.view(*arg)
        if v.size:
            np.copyto(np.frombuffer(dest, v.dtype).reshape(v.shape), v)

    def dense_array(self, arg) -> np.ndarray:
        """The argument's elements dense, as uint8 (a view of the buffer where the layout is dense already)."""
        return np.ascontiguousarray(self.view(*arg)).reshape(-1).view(np.uint8)


def store_output(view, got) -> str | None:
    """Copies a returned array into the engine's output view; the reason it cannot, or None."""
    if not isinstance(got, np.ndarray):
        return f"returned {type(got).__name__}, not an ndarray"
    if tuple(got.shape) != tuple(view.shape):
        return f"returned shape {tuple(got.shape)}, the contract says {tuple(view.shape)}"
    if got.dtype != view.dtype:
        return f"returned dtype {got.dtype}, the contract says {view.dtype}"
    view[...] = got
    return None


def set_allocator_poison(pattern: bytes) -> bool:
    return False  # numpy's arrays come from malloc: nothing kgate can poison; returned arrays are copied whole


def allocator_violations() -> list:
    return []  # numpy code cannot write outside an array without ctypes; inputs' guards still catch that


def concurrent(one, n: int):
    """Invocations in flight together: one host thread each, started together (the CPU stream gate)."""
    import threading
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ---- driver side: what the contract is derived from ---------------------------------------------------------

_NAMES = {np.dtype(v): k for k, v in _KGATE_DTYPES.items()}


def dtype_name(x) -> str | None:
    """kgate's name for an array's dtype, or None when kgate has none (uint8, complex, ...)."""
    return _NAMES.get(np.dtype(x.dtype))


def probe(task, init_seed: int):
    """get_inputs() and one Model forward at the task's binding: [(kind, dtype, shape) | ("value", v)] for
    the inputs and [(dtype, shape)] for the outputs."""
    set_seed(init_seed)
    model = build(task.Model, prepare_init_inputs(task.get_init_inputs()), init_seed)
    set_seed(init_seed)
    xs = list(task.get_inputs())
    ins = [("tensor", dtype_name(x), tuple(x.shape)) if is_tensor(x) else ("value", x) for x in xs]
    outs = [(dtype_name(o) if is_tensor(o) else None, tuple(getattr(o, "shape", ()))) for o in
            flatten_outputs(_forward(model)(*xs))]
    return ins, outs


def host_input(x):
    """An input as the engine's HostArray (a copy)."""
    from .. import _core
    return _core.HostArray.from_array(np.array(x, order="C", copy=True))  # keeps 0-dim arrays 0-dim


def from_host(h, device=None, precision=None):
    return np.array(np.from_dlpack(h), copy=True)


def result_to_host(x, want_f64: bool):
    from .. import _core
    a = np.asarray(x)
    if want_f64 and a.dtype.kind == "f":
        a = a.astype(np.float64)
    return _core.HostArray.from_array(np.array(a, order="C", copy=True))  # keeps 0-dim arrays 0-dim
