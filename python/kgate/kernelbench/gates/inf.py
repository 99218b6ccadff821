"""inf: +-Inf and overflow are never masked or saturated: the non-finite pattern and signs of the outputs
match the oracle cast to the output dtype (tolerance-free), except where the task's own fp32 run does the
same as the candidate, and except where the oracle is NaN (an indeterminate form, not judged here)."""
import numpy as np

from .. import compare
from ..context import float_inputs, gate_result, timed
from .nan import inject


def _cast_classes(o, like):
    dt = np.asarray(like).dtype if np.asarray(like).dtype.kind == "f" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        return compare.classes(np.asarray(o).astype(dt))


@timed
def run(ctx):
    task = ctx.nominal
    x0 = ctx.inputs(task, "inf")
    if not float_inputs(x0):
        return gate_result("inf", "SKIP", "the task has no float input")
    big = float(np.finfo(np.float32).max) * 0.75
    total = 0
    for label, values in (("inf-signs", [np.inf, -np.inf]), ("near-max", [big, -big])):
        x = [a.copy() if isinstance(a, np.ndarray) else a for a in x0]
        i, pos = inject(ctx, x, label, values)
        variant = f"{values} in input {i} at flat {pos}"
        o = ctx.reference(task, x, "f64")
        r = ctx.reference(task, x, "f32")
        out = ctx.call(task, x, seed=11)
        if not out.ok:
            return gate_result("inf", out.verdict(), f"{variant}: the call failed: {out.why()}",
                               evidence={"seed": f"{ctx.seed:016x}", "variant": variant, "detail": out.why()})
        problem = compare.structure_problem(out.outputs, o)
        if problem:
            return gate_result("inf", "FAIL", f"{variant}: {problem}")
        for k, (c, oo, rr) in enumerate(zip(out.arrays, o, r)):
            if np.asarray(oo).dtype.kind != "f":
                continue
            want = _cast_classes(oo, c)
            got = compare.classes(np.asarray(c))
            # An oracle NaN here comes from Inf - Inf, 0 * Inf or Inf / Inf: no value exists and what an
            # evaluation returns depends on its order (torch.softmax gives NaN, exp(x - lse) the limit 0), so
            # it is not judged; the nan gate judges NaN propagation.
            bad = (want != got) & (compare.classes(np.asarray(rr)) != got) & (want != 1)
            total += int((want != 0).sum())
            if bad.any():
                idx = [int(t) for t in np.argwhere(bad)[0]]
                names = {0: "finite", 1: "NaN", 2: "+Inf", 3: "-Inf"}
                w, g = names[int(want[tuple(idx)])], names[int(got[tuple(idx)])]
                return gate_result("inf", "FAIL", f"{variant}: output{k} at {idx} is {g} where the oracle is {w}"
                                   f" ({int(bad.sum())} element(s))",
                                   evidence={"seed": f"{ctx.seed:016x}", "variant": variant,
                                             "bindings": task.constants(), "tensor": f"output{k}", "index": idx,
                                             "expected": compare.fmt_value(np.asarray(oo), idx),
                                             "got": compare.fmt_value(np.asarray(c), idx)})
    return gate_result("inf", "PASS", f"non-finite pattern matches the oracle ({total} non-finite element(s))")
