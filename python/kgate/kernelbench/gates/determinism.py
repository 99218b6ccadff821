"""determinism: same inputs, same bits: three calls on fresh buffers at different addresses give bitwise
equal outputs (tolerance-free)."""
from .. import compare
from ..context import gate_result, timed


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "determinism")
    runs = []
    for k in range(3):
        out = ctx.call(task, x, seed=3, shift=k > 0)
        if not out.ok:
            return gate_result("determinism", out.verdict(), f"call {k + 1}: {out.why()}")
        runs.append(out)
    first = runs[0]
    for k, other in enumerate(runs[1:], start=2):
        if len(other.outputs) != len(first.outputs):
            return gate_result("determinism", "FAIL", f"call {k} returned a different number of outputs")
        for j, (a, b) in enumerate(zip(first.arrays, other.arrays)):
            if a is None or b is None:
                continue
            idx = compare.bitwise_first_difference(a, b)
            if idx is not None:
                return gate_result("determinism", "FAIL", f"output{j} differs between call 1 and call {k}"
                                   + (f" at {idx}" if idx else " (shape or dtype)"),
                                   evidence={"seed": f"{ctx.seed:016x}", "variant": f"call 1 vs call {k}",
                                             "bindings": task.constants(), "tensor": f"output{j}", "index": idx,
                                             "expected": compare.fmt_value(a, idx) if idx else "",
                                             "got": compare.fmt_value(b, idx) if idx else ""})
    return gate_result("determinism", "PASS", "three calls bitwise equal")
