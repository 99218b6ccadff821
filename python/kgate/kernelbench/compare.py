"""Comparisons, all in the driver on host arrays: the error bound of the tolerance gates, and the
tolerance-free comparisons (bitwise, non-finite pattern).

The bound for an output, following the working-precision rule of DESIGN.md (gate 1):
    bound = K_REF * e_ref + FLOOR_ULPS * u32 * max|oracle|
where e_ref is the largest error, against the float64 oracle, of the task's own Model run in fp32 with TF32
off on the same inputs, and u32 = 2^-24. A candidate passes when its largest error is within the bound; its
error ratio is error / bound (the threshold sweep multiplies the bound, so it only needs the ratio).
"""
from __future__ import annotations

import numpy as np

K_REF = 10.0
FLOOR_ULPS = 16.0
U32 = 2.0 ** -24


def _f64(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind in "biu":
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def classes(a: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return np.zeros(a.shape, np.uint8)
    out = np.zeros(a.shape, np.uint8)
    out[np.isnan(a)] = 1
    out[np.isposinf(a)] = 2
    out[np.isneginf(a)] = 3
    return out


def first_index(mask: np.ndarray):
    idx = np.argwhere(mask)
    return [int(i) for i in idx[0]] if idx.size else None


def fmt_value(a: np.ndarray, index) -> str:
    if index is None:
        return ""
    v = a[tuple(index)] if a.ndim else a[()]
    if a.dtype.kind == "f":
        bits = np.asarray(v).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])
        return f"{float(v)!r} (0x{int(bits):0{a.itemsize * 2}x})"
    return repr(v.item() if hasattr(v, "item") else v)


def structure_problem(cand: list, oracle: list) -> str | None:
    """Why the candidate's outputs cannot be compared with the oracle's at all, or None."""
    if len(cand) != len(oracle):
        return f"returned {len(cand)} output(s) where the task returns {len(oracle)}"
    for i, (c, o) in enumerate(zip(cand, oracle)):
        if "array" not in c:
            return f"output {i} is a {c.get('type')}, not a tensor"
        if tuple(c["array"].shape) != tuple(o.shape):
            return f"output {i} has shape {list(c['array'].shape)} where the task's has {list(o.shape)}"
    return None


def error_report(cand: np.ndarray, oracle: np.ndarray, ref: np.ndarray | None, tolerance_scale: float = 1.0):
    """Largest error of cand against oracle relative to the working-precision bound. Returns a dict with
    ratio (inf where the non-finite pattern differs or integers differ), error, bound, e_ref and the first
    offending index with both values."""
    o = _f64(oracle)
    c = _f64(cand)
    finite = np.isfinite(o) if o.dtype.kind == "f" else np.ones(o.shape, bool)
    co, cc = classes(o), classes(c)
    out = {"error": 0.0, "bound": 0.0, "e_ref": 0.0, "ratio": 0.0}
    # Non-finite pattern: where the oracle is non-finite the candidate must be the same class, and where it
    # is finite the candidate must be finite too.
    bad_class = co != cc
    if ref is not None:
        bad_class &= classes(_f64(ref)) != cc  # the task's own fp32 run does the same: not held against it
    if bad_class.any():
        i = first_index(bad_class)
        out.update(ratio=float("inf"), error=float("inf"), index=i, expected=fmt_value(o, i),
                   got=fmt_value(c, i), detail=f"non-finite pattern differs at {int(bad_class.sum())} element(s)")
        return out
    if not finite.any():
        return out
    if oracle.dtype.kind in "biu" and np.asarray(cand).dtype.kind in "biu":
        diff = o != c
        if diff.any():
            i = first_index(diff)
            out.update(ratio=float("inf"), error=float("inf"), index=i, expected=fmt_value(o, i),
                       got=fmt_value(c, i), detail=f"{int(diff.sum())} integer element(s) differ")
        return out
    both = finite & np.isfinite(c)
    err = np.where(both, np.abs(c - o), 0.0)
    mag = float(np.max(np.abs(o[finite]))) if finite.any() else 1.0
    e_ref = 0.0
    if ref is not None:
        r = _f64(ref)
        rf = finite & np.isfinite(r)
        e_ref = float(np.max(np.abs(r - o)[rf])) if rf.any() else 0.0
    bound = (K_REF * e_ref + FLOOR_ULPS * U32 * max(mag, np.finfo(np.float32).tiny)) * tolerance_scale
    e = float(err.max()) if err.size else 0.0
    i = [int(x) for x in np.unravel_index(int(np.argmax(err)), err.shape)] if err.size else None
    out.update(error=e, bound=bound, e_ref=e_ref, magnitude=mag, ratio=e / bound if bound > 0 else
               (0.0 if e == 0 else float("inf")))
    if i is not None and e > 0:
        out.update(index=i, expected=fmt_value(o, i), got=fmt_value(np.asarray(cand), i))
    return out


def worst(reports: list[dict]) -> dict:
    return max(reports, key=lambda r: r.get("ratio", 0.0)) if reports else {"ratio": 0.0}


def bitwise_first_difference(a: np.ndarray, b: np.ndarray):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return []
    va = a.view(np.uint8).reshape(a.shape + (a.itemsize,)) if a.ndim else a.view(np.uint8)
    vb = b.view(np.uint8).reshape(b.shape + (b.itemsize,)) if b.ndim else b.view(np.uint8)
    diff = (va != vb).any(axis=-1) if a.ndim else np.array((va != vb).any())
    return first_index(diff) if a.ndim else ([] if diff else None)
