"""layout: no hidden alignment or stride assumption: inputs at a base offset by one element, and as
non-contiguous views (last dimension at stride 2); a correct result or a clean refusal (an exception),
never a silent wrong one (judged against the bound) and never a crash."""
from ..context import evidence, gate_result, timed


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "layout")
    o, r = ctx.reference(task, x, "f64"), ctx.reference(task, x, "f32")
    refused, worst = [], 0.0
    for lay in ("offset", "strided"):
        out = ctx.call(task, x, seed=23, layout=lay)
        if out.died is not None or out.reply.get("status") == "cuda_error":
            return gate_result("layout", out.verdict(), f"{lay} inputs: {out.why()}")
        if out.reply.get("status") == "raised":
            refused.append(lay)
            continue
        rep = ctx.judge(out, o, r)
        worst = max(worst, rep["ratio"])
        if rep["verdict"] != "PASS":
            return gate_result("layout", "FAIL", f"{lay} inputs: silently wrong (" + (
                f"error {rep['error']:.3g}, {rep['ratio']:.3g}x the bound)" if "error" in rep else rep.get("detail", "") + ")"),
                error_ratio=rep["ratio"], evidence=evidence(ctx, task, f"{lay} inputs", rep))
    if len(refused) == 2:
        return gate_result("layout", "REFUSED", "refused both misaligned and strided inputs (cleanly)")
    note = f"; refused {refused[0]} inputs cleanly" if refused else ""
    return gate_result("layout", "PASS", f"correct on misaligned and strided inputs{note}", error_ratio=worst)
