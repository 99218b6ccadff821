"""stream: honours the caller's stream: inputs are written by a long kernel on the caller's non-blocking
stream just before the call, and outputs are read as soon as that stream completes; the result must still
agree with the oracle within the bound (not tolerance-free)."""
from ..context import evidence, gate_result, timed


@timed
def run(ctx):
    if not ctx.fw.CAPABILITIES.get("stream"):
        return gate_result("stream", "SKIP", f"{ctx.fw.NAME} has no streams")
    task = ctx.nominal
    x = ctx.inputs(task, "stream")
    o, r = ctx.reference(task, x, "f64"), ctx.reference(task, x, "f32")
    out = ctx.call(task, x, seed=17, stream="staged")
    rep = ctx.judge(out, o, r)
    if rep["verdict"] == "PASS":
        return gate_result("stream", "PASS", f"correct on the caller's stream (ratio {rep['ratio']:.3g})",
                           error_ratio=rep["ratio"])
    return gate_result("stream", rep["verdict"], "on the caller's stream: " + (
        f"error {rep['error']:.3g} is {rep['ratio']:.3g}x the bound" if "error" in rep else rep.get("detail", "")),
        error_ratio=rep["ratio"], evidence=evidence(ctx, task, "staged inputs on a non-blocking stream", rep))
