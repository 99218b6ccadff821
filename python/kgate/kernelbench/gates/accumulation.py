"""accumulation: accumulates at the promised precision (fp32): at the nominal shape, with every float input
set to 1, a reduction over 2049 or more elements is exact in fp32 and grossly wrong in fp16 or bf16 (whose
sums of ones stall at 2048 and 256). Judged against the working-precision bound (not tolerance-free)."""
import numpy as np

from ..context import evidence, float_inputs, gate_result, timed

MIN_REDUCTION = 2049


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "accumulation")
    fi = float_inputs(x)
    if not fi:
        return gate_result("accumulation", "SKIP", "the task has no float input")
    o0 = ctx.reference(task, x, "f64")
    out_dims = {d for a in o0 for d in np.asarray(a).shape}
    reduced = sorted({d for i in fi for d in x[i].shape if d >= MIN_REDUCTION and d not in out_dims})
    if not reduced:
        return gate_result("accumulation", "SKIP", f"no reduction over {MIN_REDUCTION}+ elements at the nominal shape")
    for i in fi:
        x[i] = np.ones_like(x[i])
    o = ctx.reference(task, x, "f64")
    if any(np.asarray(a).dtype.kind == "f" and not np.isfinite(a).all() for a in o):
        return gate_result("accumulation", "SKIP", "the task is not finite on all-ones inputs")
    r = ctx.reference(task, x, "f32")
    out = ctx.call(task, x, seed=19)
    rep = ctx.judge(out, o, r)
    note = f"all-ones inputs, reduced extent(s) {reduced}"
    if rep["verdict"] == "PASS":
        return gate_result("accumulation", "PASS", f"{note}: ratio {rep['ratio']:.3g}", error_ratio=rep["ratio"])
    return gate_result("accumulation", rep["verdict"], f"{note}: " + (
        f"error {rep['error']:.3g} is {rep['ratio']:.3g}x the bound" if "error" in rep else rep.get("detail", "")),
        error_ratio=rep["ratio"], evidence=evidence(ctx, task, note, rep))
