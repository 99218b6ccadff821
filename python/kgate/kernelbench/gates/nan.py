"""nan: NaN is never masked: every output the oracle makes NaN must be NaN (tolerance-free); NaN where the
oracle has none is a separate, reported violation (spread). Elements where the task's own fp32 run does the
same as the candidate are not held against it."""
import numpy as np

from ... import seeds
from ..context import evidence, float_inputs, gate_result, timed


def inject(ctx, x, label, values):
    """Puts values[k] at a seeded position of the first float input; returns (input index, flat positions)."""
    fi = float_inputs(x)
    i = fi[0]
    a = x[i].copy()
    flat = a.reshape(-1)
    rng = np.random.default_rng(seeds.derive(ctx.seed, label) & ((1 << 63) - 1))
    pos = rng.choice(flat.size, size=min(len(values), flat.size), replace=False)
    for p, v in zip(pos, values):
        flat[p] = v
    x[i] = a
    return i, [int(p) for p in pos]


def pattern_check(ctx, gate, cond_oracle, cond_cand, task, x, variant, case):
    o = ctx.reference(task, x, "f64")
    r = ctx.reference(task, x, "f32")
    out = ctx.call(task, x, seed=7)
    if not out.ok:
        v = out.verdict()
        return gate_result(gate, v if v != "FAIL" else "FAIL", f"{variant}: the call failed: {out.why()}",
                           evidence={"seed": f"{ctx.seed:016x}", "variant": variant, "detail": out.why()})
    from .. import compare
    problem = compare.structure_problem(out.outputs, o)
    if problem:
        return gate_result(gate, "FAIL", f"{variant}: {problem}")
    findings = []
    checked = 0
    for k, (c, oo, rr) in enumerate(zip(out.arrays, o, r)):
        if np.asarray(oo).dtype.kind != "f":
            continue
        expect = cond_oracle(np.asarray(oo, np.float64))
        got = cond_cand(c)
        same_as_ref = cond_cand(rr) == got
        checked += int(expect.sum())
        masked = expect & ~got & ~same_as_ref
        spread = got & ~expect & ~same_as_ref
        for kind, m in (("masked", masked), ("spread", spread)):
            if m.any():
                idx = [int(t) for t in np.argwhere(m)[0]]
                findings.append((kind, k, idx, int(m.sum()), compare.fmt_value(np.asarray(oo), idx),
                                 compare.fmt_value(np.asarray(c), idx)))
    return checked, findings


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "nan")
    if not float_inputs(x):
        return gate_result("nan", "SKIP", "the task has no float input")
    i, pos = inject(ctx, x, "nan-pos", [np.nan, np.nan])
    res = pattern_check(ctx, "nan", np.isnan, lambda a: np.isnan(np.asarray(a, np.float64)), task, x,
                        f"NaN in input {i} at flat {pos}", ("nan",))
    if isinstance(res, dict):
        return res
    checked, findings = res
    base_ev = {"seed": f"{ctx.seed:016x}", "variant": f"NaN in input {i} at flat {pos}", "bindings": task.constants()}
    if findings:
        kind, k, idx, count, exp, got = findings[0]
        what = "NaN masked" if kind == "masked" else "NaN where the oracle has none"
        return gate_result("nan", "FAIL", f"{what}: output{k} at {idx} ({count} element(s))",
                           evidence={**base_ev, "tensor": f"output{k}", "index": idx, "expected": exp, "got": got},
                           spread=any(f[0] == "spread" for f in findings),
                           masked=any(f[0] == "masked" for f in findings))
    if checked == 0:
        return gate_result("nan", "SKIP", "the reference itself maps the injected NaN to finite values")
    return gate_result("nan", "PASS", f"all {checked} NaN output element(s) of the oracle are NaN")
