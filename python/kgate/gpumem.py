"""What a verify job is expected to hold on the GPU at its peak, before it starts (the audit's memory admission,
scheduler.run_jobs / gpu_fits). In order of trust:

1. "observed": the most its processes (row job, worker, their children) held at once in an earlier attempt, as
   the driver measured it from outside (NVML per process, scheduler.NvmlProbe.processes), with a margin for
   what sampling misses. An attempt that ran out of memory beside other rows saw only what it got before it
   failed, so its peak is a floor: the prediction is taken when it is larger.
2. "contract": a prediction from an earlier record's derived contract (the inputs at their nominal sizes).
3. "source": the same prediction from the task's source alone: get_inputs()'s tensor constructors
   (torch.randn(batch_size, dim), ...) evaluated over the module's integer constants, read with `ast` and never
   executed (the driver runs no task code).
4. "level": none of the above could be read: a fixed amount per KernelBench level.

The prediction: PER_ROW for the two CUDA contexts (row job and worker) and their libraries, plus IO_FACTOR x the
nominal inputs' bytes (the judge's float64 copies and oracles, the engine's cases of up to twice the nominal
extents, the worker's guarded buffers, and what the allocators keep of them); level 3 rows (whole networks) add
their activations, which the inputs do not show: LEVEL3_EXTRA. What it rests on is thin: no record held a peak
before this module, and the only per-process figures are the OOM messages of the a100 call of 2026-12-04
(torch lists every process on the card with what it holds): idle row processes 0.6 GiB, most 0.6-3 GiB, three
of 15, 31 and 71 GiB while seven rows of 256-512 MiB inputs and three level 3 rows ran, which the records cannot
tie to rows, and two of 120-136 GiB, most likely guard-allocator workers holding every freed block until the
call's end (fixed in guard_alloc.cpp). IO_FACTOR was 96 until peaks were measured; the first measured ones (the
a100 call of 2026-12-05 17:56, an H100: MEASURED_LARGE_INPUT_ROWS below) put the rows with 256-512 MiB of inputs
at PER_ROW + 8.4 to 15.6 x their inputs, so 96 charged them 4.7 to 8.7 x their peak, and beside them rows of
1.5 GiB waited up to 446 s with 44-62 GiB free (6975 s of waits in 473 s of audit: 3.9 audited rows a minute).
IO_FACTOR = 20 covers the largest measured factor with 1.3x to spare. Rows with small inputs are dominated by
what the inputs do not show (weights, activations, cuDNN workspaces: up to 57 GiB for a level 3 row of 16 MiB
inputs), which no input factor predicts: their observed peak (1.) takes over on their next attempt, and a row
out of memory beside others runs again alone (`python -m kgate report` shows peak / estimate per source). A
prediction is at most
PREDICTION_CAP (the factor is linear, and a row of 2 GiB of inputs, whose engine cases are bounded by
max_case_elements, does not need 190 GiB): a row runs alone for its memory only once an attempt has measured that
it needs to. A row whose real need is not visible before it runs (a candidate that captures a CUDA graph per
call, cuDNN's benchmark taking what is free) is found by its observed peak (1.) on its next attempt.
"""
from __future__ import annotations

import ast
import math
import re

GiB = 1 << 30
MiB = 1 << 20
PER_ROW = 3 * GiB // 2          # two CUDA contexts (row job, worker) with cuBLAS/cuDNN loaded, small tensors
IO_FACTOR = 20                 # bytes on the GPU per byte of the nominal inputs (see the module docstring)
LEVEL3_EXTRA = 4 * GiB         # a whole network's activations and weights, at f32 and f64
LEVEL_DEFAULT = {"1": 4 * GiB, "2": 4 * GiB, "3": 8 * GiB}
PREDICTION_CAP = 64 * GiB       # a prediction never asks for the card alone: only an observed peak may
# (nominal input bytes, measured peak bytes) of the rows with >= 256 MiB of inputs in the first run that measured
# peaks (a100, 2026-12-05 17:56 UTC, `python -m kgate report` over results/audit-2026-12-05-h100/a100): what
# IO_FACTOR rests on; tests/python/test_gpu_admission.py checks the prediction against them.
MEASURED_LARGE_INPUT_ROWS = ((512 * MiB, 6_094_323_712), (512 * MiB, 6_333_399_040), (256 * MiB, 5_735_710_720),
                             (256 * MiB, 4_951_375_872), (256 * MiB, 5_794_430_976))
OBSERVED_MARGIN = 1.15         # observed peak x this: NVML is sampled, a spike between samples is missed
OBSERVED_MIN = PER_ROW

_BYTES = {"float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4, "float64": 8, "double": 8,
          "int8": 1, "uint8": 1, "bool": 1, "int16": 2, "short": 2, "int32": 4, "int": 4, "int64": 8, "long": 8,
          "complex64": 8, "complex128": 16, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2,
          "i32": 4, "i64": 8}
_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "rand_like", "randn_like", "normal",
           "tensor", "arange", "eye", "randperm", "uniform"}


def _constants(tree: ast.Module) -> dict:
    """Top-level NAME = <expression of ints and earlier names> (tuples included), evaluated in order."""
    env: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                v = _eval(node.value, env)
                if v is not None:
                    env[t.id] = v
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                    len(t.elts) == len(node.value.elts):
                for n, e in zip(t.elts, node.value.elts):
                    if isinstance(n, ast.Name):
                        v = _eval(e, env)
                        if v is not None:
                            env[n.id] = v
    return env


def _eval(node, env):
    """An int, or a tuple of ints, from literals, names of env, + - * // ** and tuples/lists; else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [_eval(e, env) for e in node.elts]
        return tuple(vals) if all(isinstance(v, int) for v in vals) else None
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if not (isinstance(a, int) and isinstance(b, int)):
            return None
        op = node.op
        try:
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, ast.FloorDiv):
                return a // b
            if isinstance(op, ast.Pow) and 0 <= b <= 64:
                return a ** b
        except ZeroDivisionError:
            return None
    return None


def _dtype_bytes(call: ast.Call) -> int:
    for kw in call.keywords:
        if kw.arg == "dtype":
            name = kw.value.attr if isinstance(kw.value, ast.Attribute) else getattr(kw.value, "id", "")
            return _BYTES.get(str(name), 4)
    if isinstance(call.func, ast.Attribute) and call.func.attr == "randint":
        return 8
    return 4


def _shape(call: ast.Call, env) -> tuple | None:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    for kw in call.keywords:
        if kw.arg == "size":
            v = _eval(kw.value, env)
            return (v,) if isinstance(v, int) else v
    args = call.args
    if name == "randint":  # randint(high, size) or randint(low, high, size)
        args = [a for a in args if isinstance(_eval(a, env), tuple)][:1]
    elif name == "full":
        args = args[:1]
    elif name in ("normal", "uniform", "tensor", "arange", "randperm", "eye", "rand_like", "randn_like"):
        return None
    vals: list = []
    for a in args:
        if isinstance(a, ast.Starred):  # torch.randn(batch_size, *input_shape)
            v = _eval(a.value, env)
            if not isinstance(v, tuple):
                return None
            vals.extend(v)
        else:
            vals.append(_eval(a, env))
    if not vals or any(v is None for v in vals):
        return None
    if len(vals) == 1 and isinstance(vals[0], tuple):
        return vals[0]
    return tuple(vals) if all(isinstance(v, int) for v in vals) else None


def input_bytes_from_source(ref_code: str) -> int | None:
    """Bytes of the tensors get_inputs() makes at the task's nominal sizes, read from its source without running
    it: the calls to torch's tensor constructors in get_inputs() whose sizes are integer constants of the
    module or expressions of them. None where the source cannot be parsed or no size could be read."""
    try:
        tree = ast.parse(ref_code)
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    env = _constants(tree)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return None
    local = dict(env)
    total, seen = 0, False
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = _eval(node.value, local)
            if v is not None:
                local[node.targets[0].id] = v
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in _MAKERS:
            continue
        shape = _shape(node, local)
        if shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        total += math.prod(shape) * _dtype_bytes(node)
        seen = True
    return total if seen else None


def input_bytes_from_contract(toml_text: str) -> int | None:
    """Bytes of a derived contract's inputs at their nominal extents (entries: a dim's name, an integer, or an
    expression like `c+2`, `c*4`, `c-1` of one dim)."""
    try:
        import tomllib
        c = tomllib.loads(toml_text)
    except Exception:  # noqa: BLE001 - a contract this cannot read is no estimate
        return None
    dims = {k: v.get("nominal") for k, v in (c.get("dims") or {}).items() if isinstance(v, dict)}
    total, seen = 0, False
    for inp in c.get("inputs") or []:
        n = 1
        for e in inp.get("shape") or []:
            v = _extent(e, dims)
            if v is None:
                n = None
                break
            n *= v
        if n is None:
            continue
        total += n * _BYTES.get(str(inp.get("dtype", "f32")), 4)
        seen = True
    return total if seen else None


_EXPR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:([+*-])\s*(\d+))?\s*$")


def _extent(e, dims) -> int | None:
    if isinstance(e, int):
        return e
    m = _EXPR.match(str(e))
    if not m or not isinstance(dims.get(m.group(1)), int):
        return None
    v, op, k = dims[m.group(1)], m.group(2), int(m.group(3) or 0)
    return v + k if op == "+" else v - k if op == "-" else v * k if op == "*" else v


def predict(level, input_bytes: int | None) -> int:
    """The prediction from the nominal inputs' bytes (see the module docstring)."""
    lv = str(level)
    if input_bytes is None:
        return LEVEL_DEFAULT.get(lv, LEVEL_DEFAULT["2"])
    return min(PREDICTION_CAP, int(PER_ROW + IO_FACTOR * input_bytes + (LEVEL3_EXTRA if lv == "3" else 0)))


def observed_peak(rec: dict | None) -> int | None:
    """The peak GPU bytes an earlier record measured (its `gpu` entry), if any."""
    g = (rec or {}).get("gpu")
    if isinstance(g, dict) and isinstance(g.get("peak_bytes"), int) and g["peak_bytes"] > 0:
        return g["peak_bytes"]
    return None


def estimate(level, ref_code: str, earlier: dict | None = None, earlier_peak: int | None = None,
             oom_floor: bool = False) -> tuple[int, str]:
    """(bytes, source) for one row: earlier is the row's earlier record (same key), earlier_peak a peak the
    driver measured in an earlier attempt that left no record (cut by the budget); oom_floor: that peak was
    cut short by an out-of-memory beside other rows, so it is a floor (the prediction wins when larger)."""
    contract = (earlier or {}).get("contract")
    ib = input_bytes_from_contract(contract) if contract else None
    src = "contract" if ib is not None else None
    if ib is None:
        ib = input_bytes_from_source(ref_code or "")
        src = "source" if ib is not None else "level"
    pred = predict(level, ib)
    peak = observed_peak(earlier)
    if earlier_peak and (peak is None or earlier_peak > peak):
        peak = earlier_peak
    if peak is not None:
        seen = max(OBSERVED_MIN, int(peak * OBSERVED_MARGIN))
        if oom_floor and pred > seen:
            return pred, src
        return seen, "observed"
    return pred, src
