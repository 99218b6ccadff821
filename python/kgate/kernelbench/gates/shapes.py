"""shapes: correct beyond the one tested shape: the task's size constants are rebound one at a time (1,
3, and an odd size below the nominal that is a multiple of nothing useful) and the task re-executed; each
admissible case (the reference runs there) must agree with the oracle within the bound. A crash or a wrong
result fails; an exception is a clean refusal (REFUSED). Cases run smallest first, so the first failure
reported is the smallest (shrinking)."""
import numpy as np

from ..context import OracleError, evidence, gate_result, timed
from ..task import HYPER_NAME, TaskError

MAX_CASES = 8


def size_dims(ctx):
    """Constants that are sizes: not named like hyperparameters, and changing them changes an input shape."""
    task = ctx.nominal
    base = ctx.fw.input_shapes(task)
    dims = []
    for name, value in task.constants().items():
        if HYPER_NAME.search(name) or value < 2:
            continue
        try:
            probe = ctx.task({name: value + 1})
            if ctx.fw.input_shapes(probe) != base:
                dims.append((name, value))
        except TaskError:
            continue
    return dims


def candidate_values(nominal: int) -> list[int]:
    half = max(1, nominal // 2)
    odd = half + 1 if half % 2 == 0 else half
    vals = [1, 3, odd if odd % 8 else odd + 2]
    return sorted({v for v in vals if 1 <= v < nominal})


@timed
def run(ctx):
    dims = size_dims(ctx)
    if not dims:
        return gate_result("shapes", "SKIP", "no module-level size constant changes an input shape")
    cases = [(name, v) for name, nominal in dims for v in candidate_values(nominal)]
    planned = []
    for name, v in cases:
        try:
            t = ctx.task({name: v})
            n = sum(int(np.prod(s)) for s in ctx.fw.input_shapes(t) if s is not None)
        except TaskError:
            continue
        planned.append((n, name, v, t))
    planned.sort(key=lambda c: c[0])
    ran, inadmissible, refused, worst = 0, 0, [], 0.0
    for n, name, v, t in planned:
        if ran >= MAX_CASES:
            break
        try:
            x = ctx.inputs(t, "shapes", name, v)
            o = ctx.reference(t, x, "f64")
            r = ctx.reference(t, x, "f32")
        except (OracleError, TaskError):
            inadmissible += 1
            continue
        ran += 1
        built = ctx.ensure_built(t)
        if not built.ok:
            if built.died is not None:
                return gate_result("shapes", built.verdict(), f"{name}={v}: building ModelNew: {built.why()}",
                                   error_ratio=float("inf"))
            refused.append(f"{name}={v}")
            continue
        out = ctx.call(t, x, seed=31)
        if out.reply.get("status") == "raised":
            refused.append(f"{name}={v}")
            continue
        rep = ctx.judge(out, o, r)
        worst = max(worst, rep["ratio"])
        if rep["verdict"] != "PASS":
            what = (f"error {rep['error']:.3g} is {rep['ratio']:.3g}x the bound" if "error" in rep
                    else rep.get("detail", ""))
            return gate_result("shapes", rep["verdict"], f"{name}={v} (nominal {ctx.nominal.constants()[name]}): {what}",
                               error_ratio=rep["ratio"], evidence=evidence(ctx, t, f"{name}={v}", rep),
                               cases=ran)
    if ran == 0:
        return gate_result("shapes", "SKIP", f"no admissible smaller shape ({inadmissible} rejected by the reference)")
    if refused and len(refused) == ran:
        return gate_result("shapes", "REFUSED", f"refused every other shape cleanly: {', '.join(refused)}", cases=ran)
    note = f"; refused {', '.join(refused)}" if refused else ""
    return gate_result("shapes", "PASS", f"{ran - len(refused)} other shape(s) of {', '.join(d for d, _ in dims)} "
                       f"within bound (worst ratio {worst:.3g}){note}", error_ratio=worst, cases=ran)
