"""The torch framework: KernelBench tasks as they are, on the GPU (CPU when no GPU, for smoke tests).

Nothing here runs on CI (no torch there); every function keeps to plain, long-stable torch APIs.
"""
from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np
import torch

from . import layout as L

NAME = "torch"
DEVICE = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

CAPABILITIES = {"poison": DEVICE.type == "cuda", "stream": DEVICE.type == "cuda", "tf32": DEVICE.type == "cuda",
                "f16": True}


def set_seed(seed: int):
    """The producer's set_seed: torch.manual_seed then torch.cuda.manual_seed (current device only)."""
    torch.manual_seed(int(seed))
    if torch.cuda.is_available():
        torch.cuda.manual_seed(int(seed))


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def to_numpy(x) -> np.ndarray:
    """Host copy; bf16 (which numpy lacks) widens exactly to f32, so bitwise comparisons stay valid."""
    t = x.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.cpu().numpy().copy()


def from_numpy(a: np.ndarray, device=None):
    return torch.from_numpy(np.ascontiguousarray(a)).to(device or DEVICE)


def no_grad():
    return torch.no_grad()


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def prepare_init_inputs(init):
    return [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in init]


def build(cls, init_inputs, seed, eval_mode=True):
    """Built right after setting the seed, under no_grad, moved to the device, in eval mode (as the producer)."""
    with torch.no_grad():
        set_seed(seed)
        model = cls(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.to(DEVICE)
            if eval_mode:
                model.eval()
    return model


def producer_trial_seeds(seed: int, n: int) -> list[int]:
    """Exactly the producer's: torch.manual_seed(seed), then torch.randint(0, 2**32 - 1, (1,)).item() each."""
    torch.manual_seed(seed)
    return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(n)]


def to_device(x):
    return x.cuda(device=DEVICE) if isinstance(x, torch.Tensor) and DEVICE.type == "cuda" else x


def model_to_device(m):
    return m.to(DEVICE) if hasattr(m, "to") else m


def allclose(a, b, atol, rtol) -> bool:
    return bool(torch.allclose(a, b, atol=atol, rtol=rtol))


_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
           "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool,
           "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16}


def tensor_from_output(desc: dict):
    """The candidate's output rebuilt on the device in its own dtype (bf16 came as exact f32)."""
    t = torch.from_numpy(desc["array"]).to(DEVICE)
    dt = _DTYPES.get(desc.get("dtype", ""))
    return t.to(dt) if dt is not None and t.dtype != dt else t


def input_shapes(task) -> list:
    """Shapes of get_inputs() without making the data: run it on the meta device (real run if that fails)."""
    try:
        with torch.device("meta"):
            xs = task.get_inputs()
    except Exception:  # noqa: BLE001 - some tasks build inputs in ways meta cannot follow
        xs = task.get_inputs()
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in xs]


def output_nbytes(arrays) -> list[int]:
    return [int(a.nbytes) for a in arrays if isinstance(a, np.ndarray)]


def check_lazy(desc: dict) -> str | None:
    """The producer's lazy-evaluation check on one output: a plain tensor, on the device, with storage."""
    if desc.get("kind") != "tensor":
        return f"output is not a tensor: {desc.get('type')}"
    if desc.get("type") not in ("Tensor", "Parameter"):
        return f"output is {desc.get('type')}, not standard torch.Tensor"
    if desc.get("device") != str(DEVICE):
        return f"output on wrong device: {desc.get('device')} (expected {DEVICE})"
    if not desc.get("storage_bytes"):
        return "output has no allocated storage (likely lazy)"
    if not desc.get("data_ptr_nonzero"):
        return "output storage pointer is null (likely lazy)"
    return None


def convert(model, precision: str):
    """The model's parameters and buffers in the precision; 'f32' and 'tf32' keep it as built."""
    if not isinstance(model, torch.nn.Module):
        return model if precision in ("f32", "tf32") else None
    if precision == "f64":
        return _cast_plain_tensors(model.double(), torch.float64)
    if precision == "f16":
        return _cast_plain_tensors(model.half(), torch.float16)
    return model


def _cast_plain_tensors(model, dtype):
    """Floating tensors a module holds as plain attributes, neither parameter nor buffer, follow the cast
    .double()/.half() gives its parameters and buffers. KernelBench's RNN tasks keep their initial hidden
    state so (`self.h0 = torch.randn(...)`); left in f32, the f64 oracle stops at 'Input and hidden tensors
    are not the same dtype'."""
    for m in model.modules():
        for name, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and v.is_floating_point():
                setattr(m, name, v.to(dtype))
    return model


@contextlib.contextmanager
def precision_mode(precision: str):
    """f64: default dtype float64 while running (tensors made inside forward follow); f32: TF32 off
    everywhere (the working-precision reference); tf32: TF32 on for matmul and cuDNN."""
    old_default = torch.get_default_dtype()
    old_mm = torch.backends.cuda.matmul.allow_tf32
    old_cudnn = torch.backends.cudnn.allow_tf32
    try:
        if precision == "f64":
            torch.set_default_dtype(torch.float64)
        if precision == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        elif precision in ("f32", "f64", "f16"):
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        yield
    finally:
        torch.set_default_dtype(old_default)
        torch.backends.cuda.matmul.allow_tf32 = old_mm
        torch.backends.cudnn.allow_tf32 = old_cudnn


def run(model, inputs, precision: str):
    cast = _CASTS.get(precision)
    xs = []
    for x in inputs:
        if isinstance(x, np.ndarray):
            x = from_numpy(x)
        if cast is not None and isinstance(x, torch.Tensor) and x.is_floating_point():
            x = x.to(cast)
        xs.append(x)
    # Rows run side by side on one GPU: a reference that finds the memory taken by its neighbours waits for
    # them (the failed attempt's memory is freed on the way out) rather than costing the row its oracle.
    waits = (5, 10, 20)
    for attempt in range(len(waits) + 1):
        try:
            with torch.no_grad(), precision_mode(precision):
                out = model(*xs)
                sync()
            return out
        except torch.cuda.OutOfMemoryError:
            if attempt == len(waits):
                raise
            torch.cuda.empty_cache()
            time.sleep(waits[attempt])


def release_cache():
    """The memory this process's caching allocator holds free goes back to the device, for the rows beside it."""
    if DEVICE.type == "cuda":
        torch.cuda.empty_cache()


def flatten_outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def describe_output(x) -> dict:
    if isinstance(x, torch.Tensor):
        try:
            storage = int(x.untyped_storage().size())
        except Exception:  # noqa: BLE001 - a lazy or fake tensor: exactly what this records
            storage = 0
        try:
            ptr_ok = x.data_ptr() != 0
        except Exception:  # noqa: BLE001
            ptr_ok = False
        return {"kind": "tensor", "type": type(x).__name__, "dtype": str(x.dtype).replace("torch.", ""),
                "shape": list(x.shape), "device": str(x.device), "storage_bytes": storage,
                "data_ptr_nonzero": ptr_ok, "contiguous": bool(x.is_contiguous())}
    return {"kind": "other", "type": type(x).__name__, "repr": repr(x)[:200]}


def output_to_numpy(x) -> np.ndarray:
    return to_numpy(x)


# ---- worker side ---------------------------------------------------------------------------------------

_NP_TO_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                np.dtype(np.float16): torch.float16, np.dtype(np.int64): torch.int64,
                np.dtype(np.int32): torch.int32, np.dtype(np.int16): torch.int16, np.dtype(np.int8): torch.int8,
                np.dtype(np.uint8): torch.uint8, np.dtype(np.bool_): torch.bool}


class Placed:
    """Inputs placed in guarded device buffers (see layout.py)."""

    def __init__(self, arrays, layout: str, guard_seed: int):
        self.buffers, self.patterns, self.payload, self.views = [], [], [], []
        for i, a in enumerate(arrays):
            if not isinstance(a, np.ndarray):
                self.buffers.append(None); self.patterns.append(None); self.payload.append(0)
                self.views.append(a)
                continue
            dt = _NP_TO_TORCH[a.dtype]
            item = torch.empty(0, dtype=dt).element_size()
            lay = layout if a.ndim >= 1 else "dense"
            nbytes, off, strides = L.plan(a.shape, item, lay)
            pat = L.guard_pattern(guard_seed, i, 2 * L.GUARD_BYTES)
            buf = torch.empty(2 * L.GUARD_BYTES + nbytes, dtype=torch.uint8, device=DEVICE)
            pat_t = torch.from_numpy(pat).to(DEVICE)
            buf[:L.GUARD_BYTES] = pat_t[:L.GUARD_BYTES]
            buf[L.GUARD_BYTES + nbytes:] = pat_t[L.GUARD_BYTES:]
            payload = buf[L.GUARD_BYTES:L.GUARD_BYTES + nbytes]
            payload.fill_(0xFF)
            base = payload.view(dt)
            view = torch.as_strided(base, tuple(a.shape), strides, base.storage_offset() + off)
            view.copy_(torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE))
            self.buffers.append(buf); self.patterns.append(pat); self.payload.append(nbytes)
            self.views.append(view)
        sync()

    def guards(self) -> list:
        sync()
        out = []
        for i, (buf, pat, n) in enumerate(zip(self.buffers, self.patterns, self.payload)):
            if buf is not None:
                v = _guard_violation(buf, pat, n)
                if v:
                    out.append({"input": i, **v})
        return out



def _guard_violation(buf, pat, n: int):
    """layout.first_guard_violation of a guarded device buffer (payload of n bytes): the guard zones alone cross
    to the host (a payload-sized stand-in between them cost an allocation and a copy of the whole buffer per
    buffer per call)."""
    g = L.GUARD_BYTES
    return L.guard_zone_violation(buf[:g].cpu().numpy(), buf[g + n:].cpu().numpy(), pat, n)


def poison_allocator(pattern: int, sizes: list[int]) -> bool:
    """Fills the caching allocator's free memory with `pattern` bytes: empty the cache, then allocate,
    fill and free blocks of the outputs' sizes (three each, so a candidate's temporaries do not use them all
    up) plus large and small ones; freed blocks stay in the cache, poisoned, for the candidate to get."""
    if DEVICE.type != "cuda":
        return False
    sync()
    torch.cuda.empty_cache()
    blocks = []
    for n in list(sizes) * 3 + [256 << 20, 32 << 20] + [1 << 20] * 4 + [256 << 10] * 8 + [16 << 10] * 16:
        b = torch.empty(max(1, int(n)), dtype=torch.uint8, device=DEVICE)
        b.fill_(pattern)
        blocks.append(b)
    sync()
    del blocks
    return True


def healthy() -> bool:
    """False once the CUDA context is unusable (a sticky error such as an illegal address)."""
    if DEVICE.type != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        return float(torch.ones(1, device=DEVICE).add_(1).item()) == 2.0
    except Exception:  # noqa: BLE001
        return False


# ---- worker side: the engine's guarded buffers ------------------------------------------------------------

_KGATE_DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                 "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}


def kgate_dtype(name: str):
    return _KGATE_DTYPES[name]


class Buffers:
    """The engine's buffers (Target::alloc) on the device: [guard | payload | guard] uint8 tensors, guards
    a pattern drawn from the guard seed and the buffer's id. The driver names them by id only."""

    def __init__(self, guard_seed: int):
        self.guard_seed = guard_seed
        self.bufs: dict[int, tuple[torch.Tensor, np.ndarray, int]] = {}
        self.next = 1

    def alloc(self, n: int, bid: int | None = None) -> int:
        bid = L.new_buffer_id(self, bid)
        g = L.GUARD_BYTES
        pat = L.guard_pattern(self.guard_seed, bid, 2 * g)
        if _guard is not None:
            _guard.kgate_guard_set_owner(0)  # kgate's own buffer: guarded here, not by the allocator
        try:
            buf = torch.empty(2 * g + n, dtype=torch.uint8, device=DEVICE)
            pat_t = torch.from_numpy(pat).to(DEVICE)
        finally:
            if _guard is not None:
                _guard.kgate_guard_set_owner(1)
        buf[:g] = pat_t[:g]
        buf[g + n:] = pat_t[g:]
        self.bufs[bid] = (buf, pat, n)
        return bid

    def release(self, bid: int):
        self.bufs.pop(bid, None)

    def write(self, bid: int, off: int, data: bytes):
        buf, _, n = self.bufs[bid]
        if off + len(data) > n:
            raise IndexError(f"write of {len(data)} bytes at {off} past the end of buffer {bid} ({n} bytes)")
        g = L.GUARD_BYTES
        if len(data):
            # wrapped as it is, never copied first: a writable buffer (the socket's staging), or a read-only one
            # (the driver's shared staging area, wire.py; bytes), which is only read
            if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
                src = torch.frombuffer(data, dtype=torch.uint8)
            else:
                with warnings.catch_warnings():  # torch warns of a non-writable array: this one is only read
                    warnings.simplefilter("ignore")
                    src = torch.from_numpy(np.frombuffer(data, np.uint8))
            buf[g + off:g + off + len(data)].copy_(src)
        sync()

    def fill_bytes(self, bid: int, off: int, k: int, value: int):
        """`k` bytes of `value` from byte `off` of the payload (Target::fill), filled where the buffer lives."""
        buf, _, n = self.bufs[bid]
        if off + k > n or not 0 <= value < 256:
            raise IndexError(f"fill of {k} bytes of {value} at {off}: buffer {bid} has {n} bytes")
        g = L.GUARD_BYTES
        if k:
            buf[g + off:g + off + k].fill_(value)
        sync()

    def read(self, bid: int, off: int, k: int):
        """The bytes as a host array (on the CPU a view of the buffer, sent before anything writes it again)."""
        buf, _, n = self.bufs[bid]
        g = L.GUARD_BYTES
        sync()
        return buf[g + off:g + off + k].cpu().numpy()

    def guards(self, bid: int):
        buf, pat, n = self.bufs[bid]
        sync()
        return _guard_violation(buf, pat, n)

    def view(self, bid: int, dtype: str, shape, strides, offset: int):
        buf, _, n = self.bufs[bid]
        dt = kgate_dtype(dtype)
        base = buf[L.GUARD_BYTES:L.GUARD_BYTES + n].view(dt)
        return torch.as_strided(base, tuple(shape), tuple(strides), base.storage_offset() + offset)

    def fill(self, arg, pattern: bytes):
        v = self.view(*arg)
        if v.numel() and pattern:
            item = v.element_size()
            one = (pattern * (item // len(pattern) + 1))[:item]
            value = torch.frombuffer(bytearray(one), dtype=v.dtype)[0].item()
            v.fill_(value)

    def dense_bytes(self, arg) -> bytes:
        return self.dense_array(arg).tobytes()

    def dense_into(self, arg, dest) -> None:
        """The argument's elements dense, copied into `dest` (a writable host buffer of exactly their bytes:
        the driver's outputs' area), straight from the device, with no host tensor between."""
        v = self.view(*arg)
        if v.numel():
            torch.frombuffer(dest, dtype=torch.uint8).view(v.dtype).view(v.shape).copy_(v)
        sync()

    def dense_array(self, arg) -> np.ndarray:
        """The argument's elements dense, as a uint8 host array (on the CPU a view of the buffer where the
        layout is dense already; sent before anything writes it again)."""
        v = self.view(*arg).contiguous()
        sync()
        return v.reshape(-1).view(torch.uint8).cpu().numpy() if v.numel() else np.empty(0, np.uint8)


def store_output(view, got) -> str | None:
    """Copies a returned tensor into the engine's output view; the reason it cannot, or None."""
    if not isinstance(got, torch.Tensor):
        return f"returned {type(got).__name__}, not a tensor"
    if tuple(got.shape) != tuple(view.shape):
        return f"returned shape {tuple(got.shape)}, the contract says {tuple(view.shape)}"
    if got.dtype != view.dtype:
        return f"returned dtype {str(got.dtype).replace('torch.', '')}, the contract says " \
               f"{str(view.dtype).replace('torch.', '')}"
    if got.device != view.device:
        return f"returned a tensor on {got.device}, expected {view.device}"
    view.copy_(got)
    return None


# The guard allocator (kernelbench/guard_alloc): every allocation the candidate makes sits between seeded
# guard zones and starts filled with the current poison. Installed by install_guard_allocator() before any
# CUDA memory is taken; absent (no library, or no CUDA), outputs are poisoned through the caching allocator
# instead (poison_allocator) and out-of-bounds writes into the candidate's own memory go unseen. A candidate
# the guard allocator fails (cuDNN's benchmark mode asks it for cacheInfo) runs on the caching allocator, then
# coverage and bounds run again with the guard allocator and hold_cudnn_benchmark (rowjob._guarded_pass).
_guard = None


def install_guard_allocator(library: str | None, seed: int) -> str:
    global _guard
    if DEVICE.type != "cuda" or not library:
        return "no guard allocator (" + ("no CUDA device" if DEVICE.type != "cuda" else "library not built") + ")"
    import ctypes
    lib = ctypes.CDLL(library)
    lib.kgate_guard_set_seed.argtypes = [ctypes.c_uint64]
    lib.kgate_guard_set_poison.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.kgate_guard_check.restype = ctypes.c_int
    lib.kgate_guard_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.kgate_guard_set_owner.argtypes = [ctypes.c_int]
    lib.kgate_guard_set_seed(seed)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(library, "kgate_guard_malloc", "kgate_guard_free")
    torch.cuda.memory.change_current_allocator(alloc)
    _guard = lib
    return f"guard allocator {library}"


def hold_cudnn_benchmark() -> bool:
    """torch.backends.cudnn.benchmark = False, for the guard allocator's second pass over a row whose candidate
    turned it on (rowjob.verify): cuDNN's benchmark mode asks the allocator for cacheInfo, which a pluggable
    allocator cannot answer (pytorch issue 98481). The worker calls this after the candidate's module import
    and before every build and call; True when it found the mode on (the candidate turned it on again)."""
    was = bool(torch.backends.cudnn.benchmark)
    torch.backends.cudnn.benchmark = False
    return was


def set_allocator_poison(pattern: bytes) -> bool:
    if _guard is None:
        return False
    _guard.kgate_guard_set_poison(bytes(pattern), len(pattern))
    return True


def allocator_violations() -> list:
    """Every guard zone of the candidate's live (and freed since the last check) allocations that no longer
    holds its pattern: [{"region": text, "offset", "expected", "found"}]."""
    if _guard is None:
        return []
    import ctypes
    sync()
    buf = ctypes.create_string_buffer(16384)
    n = _guard.kgate_guard_check(buf, len(buf))
    out = []
    for line in buf.value.decode(errors="replace").splitlines()[:max(0, n)]:
        region, offset, expected, found = line.rsplit(" ", 3)
        out.append({"region": region, "offset": int(offset), "expected": int(expected), "found": int(found)})
    return out


def concurrent(one, n: int):
    """Invocations in flight together: each issued on its own non-blocking stream, none waited for before
    the last is issued (the caller synchronises)."""
    if DEVICE.type != "cuda":
        for k in range(n):
            one(k)
        return
    for k in range(n):
        with torch.cuda.stream(torch.cuda.Stream()):
            one(k)


def staged_invocations(one, views_per_invocation):
    """The stream gate's staged call: every input holds garbage until a long kernel on the caller's
    non-blocking stream has run and then copied its values in; the candidate is called on that stream and
    its outputs are copied into the engine's buffers on it. A candidate that ignores the current stream
    reads garbage."""
    saved = [[v.clone() for v in vs] for vs in views_per_invocation]
    for vs in views_per_invocation:
        for v in vs:
            if v.is_floating_point():
                v.fill_(float("nan"))
            elif v.dtype == torch.bool:
                v.fill_(True)
            else:
                v.fill_(-1)
    sync()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # about 0.1 s on an H200 at its boost clock
        for vs, srcs in zip(views_per_invocation, saved):
            for v, src in zip(vs, srcs):
                v.copy_(src, non_blocking=True)
        for k in range(len(views_per_invocation)):
            one(k)
        done = s.record_event()
    done.synchronize()


# ---- driver side: what the contract is derived from ---------------------------------------------------------

_NAMES = {v: k for k, v in _KGATE_DTYPES.items()}


def dtype_name(x) -> str | None:
    """kgate's name for a tensor's dtype, or None when kgate has none (uint8, complex, ...)."""
    return _NAMES.get(x.dtype)


def probe(task, init_seed: int):
    """get_inputs() and one Model forward at the task's binding, on the meta device where the task allows
    (no memory, no time), on the device otherwise: [("tensor", dtype, shape) | ("value", v)] for the inputs
    and [(dtype, shape)] for the outputs."""
    def run(device):
        with (torch.device(device) if _DEVICE_CONTEXT else contextlib.nullcontext()), torch.no_grad():
            set_seed(init_seed)
            model = task.Model(*task.get_init_inputs())
            set_seed(init_seed)
            xs = list(task.get_inputs())
            if isinstance(model, torch.nn.Module):
                model = model.to(device).eval()
            xs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]
            out = flatten_outputs(model(*xs))
        return ([("tensor", dtype_name(x), tuple(x.shape)) if is_tensor(x) else ("value", x) for x in xs],
                [(dtype_name(o) if is_tensor(o) else None, tuple(getattr(o, "shape", ()))) for o in out])
    if not _DEVICE_CONTEXT:  # torch < 2.0 has no default-device context: probe on the device
        return run(DEVICE)
    try:
        return run("meta")
    except Exception:  # noqa: BLE001 - an op without a meta kernel: run it for real
        return run(DEVICE)


# torch >= 2.0: `with torch.device(d)` makes d the default device of tensor factories.
_DEVICE_CONTEXT = hasattr(torch.device("cpu"), "__enter__")


def host_input(x):
    """An input as the engine's HostArray (a host copy; bf16 crosses by DLPack as bf16)."""
    from .. import _core
    return _core.HostArray.from_array(x.detach().contiguous().cpu())


def from_host(h, device=None, precision: str | None = None):
    """A HostArray's data as a tensor of its own (the HostArray's memory is the engine's, lent for the call),
    floating data already in the dtype `run(..., precision)` casts to. A copy to the GPU is that copy already
    (a synchronous copy from pageable memory); on the CPU the cast is the copy, or the tensor is cloned."""
    d = torch.device(device) if device is not None else DEVICE
    t = torch.from_dlpack(h)
    if d.type != "cpu":
        return t.to(d)
    cast = _CASTS.get(precision)
    if cast is not None and t.is_floating_point() and t.dtype != cast:
        return t.to(cast)  # a new tensor: the cast that run() would make next, made from the engine's memory
    return t.clone()


_CASTS = {"f64": torch.float64, "f16": torch.float16}
# Output dtypes a HostArray receives straight from torch through DLPack (bool stays on the copying path).
_DIRECT = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def result_to_host(x, want_f64: bool):
    """A result as a HostArray (float64 where asked), copied (and converted) once, straight into the
    HostArray's memory."""
    from .. import _core
    t = x.detach()
    dt = torch.float64 if want_f64 and t.is_floating_point() else t.dtype
    if dt not in _DIRECT:
        if dt != t.dtype:
            t = t.to(dt)
        return _core.HostArray.from_array(t.contiguous().cpu())
    h = _core.HostArray(_core.parse_dtype(_NAMES[dt]), [int(s) for s in t.shape])
    if t.numel():
        torch.from_dlpack(h).copy_(t)
    return h
