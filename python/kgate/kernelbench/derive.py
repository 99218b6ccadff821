"""A contract (docs/contracts.md) derived from a KernelBench task's source, for kgate._core.verify.

- Size constants: top-level integer literals whose names are not hyperparameters' (task.HYPER_NAME). Each
  is rebound twice (nominal+1, nominal+3) and the task probed again (fw.probe: get_inputs() and one Model
  forward, on torch's meta device where it can): an extent that moves with it as `a*c + b` is written
  `c`, `c+k`, `c-k` or `c*k` in the contract. A constant that changes no extent is no size. One whose
  extents move any other way (a convolution's output size), that shares an extent with another constant,
  or whose rebinding the task does not survive is a fixed dim (min = max = nominal).
- Ranges: min is the smallest value keeping every extent it makes >= 1; max is twice the nominal, capped
  so no tensor passes the element budget (never below the nominal). With `case_cap` (bytes: a row's share of
  the machine's case memory, kernelbench/casemem.py), the maxes are then lowered towards the nominal until the
  engine's estimate of the largest case fits max(case_cap, the nominal case), with a note: the nominal case
  itself is never refused here (whether it fits the machine is the row job's and the engine's to say).
- Inputs: each tensor of get_inputs() in order, dtype and shape; integer and bool inputs never get NaN/Inf
  (`nonfinite = false`) and integer ones the range of values get_inputs() drew. Non-tensor arguments are
  not in the contract: the call plan passes them as the task computes them at each binding.
- Outputs: from the Model forward: dtype, shape, and `reduced` = every dim of the inputs absent from that
  output (a 0-dim output reduces everything), and every dim an input axis is summed along although the output
  has it too (a square matmul's inner dim), found with one NaN moved along each axis, at small sizes (_reductions_by_nan).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .task import HYPER_NAME, Task, TaskError, int_constants

DEFAULT_BUDGET = 1 << 24   # elements of the largest tensor a gate may make (unless the nominal one is larger)
PROBES = (1, 3)            # rebinding offsets from the nominal value


class ContractError(Exception):
    """The task cannot be described by a contract (a dtype kgate has none of, a non-tensor output)."""


@dataclass
class Derived:
    toml: str
    dims: dict                      # name -> {"nominal", "min", "max"}
    inputs: list                    # [(name, dtype, shape entries)]
    outputs: list                   # [(name, dtype, shape entries, reduced)]
    args: list                      # per get_inputs() position: ("tensor", k) or ("value", None)
    constants: dict                 # every integer constant of the task at its nominal value
    notes: list = field(default_factory=list)


def _probe(fw, source, overrides, init_seed):
    task = Task(source, overrides)
    return fw.probe(task, init_seed)


def _positions(ins, outs):
    """Every extent of every tensor: {("in"|"out", tensor index, axis): extent}."""
    pos = {}
    k = 0
    for item in ins:
        if item[0] == "tensor":
            for d, e in enumerate(item[2]):
                pos[("in", k, d)] = int(e)
            k += 1
    for j, (_, shape) in enumerate(outs):
        for d, e in enumerate(shape):
            pos[("out", j, d)] = int(e)
    return pos


def _structure(ins, outs):
    return ([(i[0], i[1], len(i[2])) if i[0] == "tensor" else ("value",) for i in ins],
            [(o[0], len(o[1])) for o in outs])


def _expr(c, a, b):
    if a == 1:
        return c if b == 0 else f"{c}+{b}" if b > 0 else f"{c}-{-b}"
    return f"{c}*{a}"


def derive(fw, source: str, init_seed: int, *, budget: int = DEFAULT_BUDGET, timeout: float = 60.0,
           op_name: str = "kernelbench_task", int_ranges: dict | None = None,
           case_cap: int | None = None) -> Derived:
    """int_ranges: {input index: (low, high)} of the integer inputs' values in a real draw. case_cap: bytes
    the largest case may need (the engine's estimate) unless the nominal case needs more; None: no cap."""
    try:
        base_in, base_out = _probe(fw, source, {}, init_seed)
    except Exception as e:  # noqa: BLE001
        raise TaskError(f"the task does not run at its nominal sizes: {type(e).__name__}: {e}") from e
    for item in base_in:
        if item[0] == "tensor" and item[1] is None:
            raise ContractError("an input's dtype has no kgate equivalent")
    for dt, _ in base_out:
        if dt is None:
            raise ContractError("Model returns something that is not a tensor of a kgate dtype")
    consts = int_constants(source)
    base = _positions(base_in, base_out)
    structure = _structure(base_in, base_out)
    notes = []
    effects: dict[str, dict] = {}
    variable: dict[str, bool] = {}
    for c, v0 in consts.items():
        if HYPER_NAME.search(c) or v0 < 1:
            continue
        probes = []
        try:
            for off in PROBES:
                ins, outs = _probe(fw, source, {c: v0 + off}, init_seed)
                if _structure(ins, outs) != structure:
                    raise ValueError("the tensors' number, dtypes or ranks change")
                probes.append(_positions(ins, outs))
        except Exception as e:  # noqa: BLE001 - the task does not survive the rebinding
            if probes or _moves(fw, source, c, v0, base, init_seed):
                effects[c], variable[c] = {}, False
                notes.append(f"{c} fixed: the task does not run at {c}={v0 + PROBES[len(probes)]} "
                             f"({type(e).__name__}: {str(e)[:120]})")
            continue
        changed, ok = {}, True
        for p, e0 in base.items():
            e1, e2 = probes[0][p], probes[1][p]
            if e0 == e1 == e2:
                continue
            a = (e1 - e0) // PROBES[0]
            b = e0 - a * v0
            if a >= 1 and e1 - e0 == a * PROBES[0] and e2 - e0 == a * PROBES[1] and (a == 1 or b == 0):
                changed[p] = (a, b)
            else:
                changed[p] = None
                ok = False
        if not changed:
            continue  # not a size
        effects[c], variable[c] = changed, ok
        if not ok:
            notes.append(f"{c} fixed: an extent follows it other than as {c}+k or {c}*k")
    owners = defaultdict(list)
    for c, ch in effects.items():
        for p in ch:
            owners[p].append(c)
    for p, cs in owners.items():
        if len(cs) > 1:
            for c in cs:
                if variable.get(c):
                    notes.append(f"{c} fixed: it shares an extent with {', '.join(x for x in cs if x != c)}")
                variable[c] = False

    def entry(p):
        cs = owners.get(p, [])
        if len(cs) == 1 and effects[cs[0]].get(p) is not None:
            return _expr(cs[0], *effects[cs[0]][p])
        return base[p]

    dims = {}
    for c in effects:
        named = [p for p in effects[c] if len(owners[p]) == 1 and effects[c][p] is not None]
        if not named:
            continue
        v0 = consts[c]
        lo, hi = v0, v0
        if variable[c]:
            lo = max([1] + [math.ceil((1 - b) / a) for (a, b) in (effects[c][p] for p in named)])
            hi = _cap(c, v0, effects[c], base, owners, budget)
        dims[c] = {"nominal": v0, "min": min(lo, v0), "max": max(hi, v0)}

    inputs, args, k = [], [], 0
    for item in base_in:
        if item[0] == "tensor":
            shape = [entry(("in", k, d)) for d in range(len(item[2]))]
            inputs.append((f"x{k}", item[1], shape))
            args.append(("tensor", k))
            k += 1
        else:
            args.append(("value", None))
    input_dims = {e for _, _, shape in inputs for e in shape if isinstance(e, str) and e in dims}
    outputs = []
    summed = _reductions_by_nan(fw, source, inputs, len(base_out), dims, init_seed, notes)
    for j, (dt, shape) in enumerate(base_out):
        entries = [entry(("out", j, d)) for d in range(len(shape))]
        present = {_dim_of(e) for e in entries if isinstance(e, str)}
        reduced = [d for d in dims if d in input_dims and (d not in present or d in summed[j])]
        outputs.append((f"y{j}", dt, entries, reduced))
    shapes = [item[2] for item in base_in if item[0] == "tensor"] + [o[1] for o in base_out]
    largest = max([math.prod(s) for s in shapes] + [1])

    def make():
        return _toml(op_name, dims, inputs, outputs, max(budget, largest), timeout, notes, int_ranges or {})

    if case_cap is not None:
        _fit_case_memory(dims, make, int(case_cap), notes)
    return Derived(make(), dims, inputs, outputs, args, consts, notes)


def _fit_case_memory(dims, make, cap, notes):
    """Lowers every variable dim's max the same share of the way towards its nominal (in 1/1024 steps) until the
    engine's estimate of the largest case (_core.case_memory) fits max(cap, the nominal case). The nominal case
    is never touched: a contract must not refuse it."""
    from .. import _core
    where = "<derived>"
    mem = _core.case_memory(make(), where)
    target = max(cap, mem["nominal"])
    if mem["largest"] <= target:
        return
    wide = {c: d["max"] for c, d in dims.items()}

    def at(k):
        for c, d in dims.items():
            d["max"] = d["nominal"] + (wide[c] - d["nominal"]) * k // 1024

    lo, hi = 0, 1023  # at(0): every max at its nominal, so the largest case is the nominal one, which fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        at(mid)
        if _core.case_memory(make(), where)["largest"] <= target:
            lo = mid
        else:
            hi = mid - 1
    at(lo)
    lowered = [f"{c} {wide[c]} -> {d['max']}" for c, d in dims.items() if d["max"] != wide[c]]
    which = "the nominal case's" if target > cap else "the row's case memory share"
    notes.append(f"max lowered so the largest case needs at most {target} bytes ({which}, in the engine's "
                 f"estimate): " + ", ".join(lowered))


def _reductions_by_nan(fw, source, inputs, n_out, dims, init_seed, notes) -> list[set]:
    """Per output, the dims some input axis is summed along although the output has that dim too (a square
    matmul's inner N, a softmax's row): found by the float64 Model with one NaN planted. Moving the NaN along a
    summed axis leaves the set of NaN outputs unchanged (every output it reaches still reads every element of
    that axis); along any other axis the set moves with it. Run where it is cheap: every variable dim at
    min(nominal, 8) (at least its min), else at the nominal sizes. An axis of extent 1, a NaN that reaches no
    output, or a Model that cannot run this way decides nothing (the shapes' rule stands)."""
    found = [set() for _ in range(n_out)]
    named = [(k, a, _dim_of(e)) for k, (_, _, shape) in enumerate(inputs) for a, e in enumerate(shape)
             if isinstance(e, str) and _dim_of(e) in dims]
    if not named:
        return found
    small = {c: max(v["min"], min(v["nominal"], 8)) for c, v in dims.items() if v["min"] < v["nominal"]}
    why = ""
    for overrides in ([small, {}] if small else [{}]):
        try:
            return _nan_probe(fw, source, overrides, named, n_out, init_seed)
        except Exception as e:  # noqa: BLE001 - the probe only adds reductions; the shapes' rule stands without it
            why = f"{type(e).__name__}: {str(e)[:120]}"
    notes.append(f"reductions: the NaN probe could not run ({why})")
    return found


def _nan_probe(fw, source, overrides, named, n_out, init_seed) -> list[set]:
    import numpy as np
    found = [set() for _ in range(n_out)]
    task = Task(source, overrides)
    fw.set_seed(init_seed)
    model = fw.convert(fw.build(task.Model, fw.prepare_init_inputs(list(task.get_init_inputs())), init_seed), "f64")
    if model is None:
        raise ValueError("the Model has no float64 form")
    fw.set_seed(init_seed)
    xs = list(task.get_inputs())
    tensors = [i for i, x in enumerate(xs) if fw.is_tensor(x)]
    hosts = [fw.to_numpy(xs[i]) for i in tensors]

    def nan_sets(k, index):
        planted = list(xs)
        a = hosts[k].astype(np.float64)
        a[index] = np.nan
        planted[tensors[k]] = fw.from_numpy(a)
        outs = fw.flatten_outputs(fw.run(model, planted, "f64"))
        return [frozenset(np.flatnonzero(np.isnan(np.asarray(fw.to_numpy(o), dtype=np.float64)))) for o in outs]

    for k in sorted({k for k, _, _ in named}):
        if hosts[k].dtype.kind != "f" or hosts[k].ndim == 0:
            continue
        shape = hosts[k].shape
        base = tuple(min(1, e - 1) for e in shape)
        first = nan_sets(k, base)
        for kk, a, d in named:
            if kk != k or shape[a] < 2:
                continue
            moved = list(base)
            moved[a] = shape[a] - 1 if shape[a] - 1 != base[a] else 0
            second = nan_sets(k, tuple(moved))
            for j in range(min(n_out, len(first), len(second))):
                if first[j] and first[j] == second[j]:
                    found[j].add(d)
    return found


def _moves(fw, source, c, v0, base, init_seed) -> bool:
    """Whether rebinding c (to anything the task survives) changes an extent: tried at smaller values."""
    for v in (v0 - 1, max(1, v0 // 2)):
        if v < 1 or v == v0:
            continue
        try:
            ins, outs = _probe(fw, source, {c: v}, init_seed)
        except Exception:  # noqa: BLE001
            continue
        return _positions(ins, outs) != base
    return False


def _dim_of(e: str) -> str:
    for sep in ("+", "-", "*"):
        if sep in e:
            return e.split(sep)[0]
    return e


def _cap(c, v0, changed, base, owners, budget) -> int:
    """The largest value up to 2*v0 at which no tensor holding c passes the element budget."""
    tensors = defaultdict(dict)
    for p, e in base.items():
        tensors[p[:2]][p[2]] = e

    def fits(m):
        for key, axes in tensors.items():
            n = 1
            for d, e in axes.items():
                p = key + (d,)
                if p in changed and changed[p] is not None:
                    a, b = changed[p]
                    e = a * m + b
                n *= e
            if n > budget and any(key + (d,) in changed for d in axes):
                return False
        return True

    lo, hi = v0, 2 * v0
    if not fits(lo):
        return v0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _q(x):
    return f'"{x}"' if isinstance(x, str) else str(int(x))


def _toml(op, dims, inputs, outputs, max_elements, timeout, notes, int_ranges) -> str:
    out = ["# derived by kgate.kernelbench.derive from the task's source (see its docstring)"]
    out += [f"# {n}" for n in notes]
    out += ["[op]", f'name = "{op}"', 'working_precision = "f32"', ""]
    for name, d in dims.items():
        out += [f"[dims.{name}]", f"nominal = {d['nominal']}", f"min = {d['min']}", f"max = {d['max']}", ""]
    for k, (name, dt, shape) in enumerate(inputs):
        out += ["[[inputs]]", f'name = "{name}"', f'dtype = "{dt}"',
                f"shape = [{', '.join(_q(e) for e in shape)}]", 'layout = "strided"']
        if dt in ("i32", "i64"):
            lo, hi = int_ranges.get(k, (0, 1))
            out += [f'domain = {{ kind = "integer", low = {int(lo)}, high = {max(int(lo), int(hi))} }}',
                    "nonfinite = false"]
        elif dt == "bool":
            out += ["nonfinite = false"]
        out.append("")
    for name, dt, shape, reduced in outputs:
        out += ["[[outputs]]", f'name = "{name}"', f'dtype = "{dt}"',
                f"shape = [{', '.join(_q(e) for e in shape)}]", f"reduced = [{', '.join(_q(r) for r in reduced)}]",
                ""]
    out += ["[limits]", f"max_case_elements = {int(max_elements)}", f"timeout = {float(timeout)}", ""]
    return "\n".join(out)
