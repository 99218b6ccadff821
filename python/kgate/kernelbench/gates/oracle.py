"""oracle: agrees with the float64 oracle at the nominal shape, within the working-precision bound.
Not tolerance-free: the bound is K_REF x the error of the task's own fp32 (TF32 off) run, plus a floor."""
import numpy as np

from .. import compare
from ..context import evidence, float_inputs, gate_result, timed


def _downgrade(ctx, task, x, oracle, rep):
    """Which lower precision the candidate's error matches, if any: TF32 or fp16 (DESIGN.md section 4)."""
    e = rep.get("error", 0.0)
    found = {}
    for prec in ("tf32", "f16"):
        r = ctx.reference(task, x, prec)
        if r is None:
            continue
        errs = [compare.error_report(a, o, None)["error"] for a, o in zip(r, oracle)]
        found[prec] = max(errs) if errs else 0.0
    for prec in ("tf32", "f16"):
        ep = found.get(prec)
        if ep is not None and ep > rep.get("bound", 0) and e <= 4.0 * ep:
            return ("TF32" if prec == "tf32" else "fp16"), found
    return None, found


@timed
def run(ctx):
    task = ctx.nominal
    worst = None
    cases = 0
    for variant, n in (("task", 0), ("task", 1), ("shifted", 2)):
        x = ctx.inputs(task, "oracle", n)
        if variant == "shifted":  # not only the task's distribution: mean 1, doubled spread
            for i in float_inputs(x):
                x[i] = (x[i] * 2 + 1).astype(x[i].dtype)
        o = ctx.reference(task, x, "f64")
        if variant == "shifted" and any(np.asarray(a).dtype.kind == "f" and not np.isfinite(a).all() for a in o):
            continue  # outside the task's domain (a log of a negative, say): not a fair case
        r = ctx.reference(task, x, "f32")
        out = ctx.call(task, x, seed=n)
        rep = ctx.judge(out, o, r)
        cases += 1
        if rep["verdict"] in ("CRASH", "TIMEOUT"):
            return gate_result("oracle", rep["verdict"], f"{variant} inputs: {rep['detail']}", error_ratio=float("inf"),
                               evidence=evidence(ctx, task, variant, rep, ("oracle", n)), cases=cases)
        if worst is None or rep["ratio"] > worst[0]["ratio"]:
            worst = (rep, variant, n, x, o)
    rep, variant, n, x, o = worst
    ev = evidence(ctx, task, variant, rep, ("oracle", n))
    if rep["verdict"] == "PASS":
        return gate_result("oracle", "PASS", f"error {rep.get('error', 0):.3g} within bound {rep.get('bound', 0):.3g}"
                           f" (ratio {rep['ratio']:.3g}) over {cases} cases", error_ratio=rep["ratio"], cases=cases)
    if "error" not in rep:  # raised, or outputs of the wrong structure
        return gate_result("oracle", "FAIL", rep.get("detail", "failed"), error_ratio=float("inf"), evidence=ev,
                           cases=cases)
    prec, errs = _downgrade(ctx, task, x, o, rep)
    summary = (f"error {rep['error']:.3g} is {rep['ratio']:.3g}x the bound {rep['bound']:.3g} "
               f"({variant} inputs)")
    if prec:
        summary += f"; precision downgrade: the error matches {prec}"
    return gate_result("oracle", "FAIL", summary, error_ratio=rep["ratio"], evidence=ev, cases=cases,
                       downgrade=prec, lower_precision_errors=errs)
