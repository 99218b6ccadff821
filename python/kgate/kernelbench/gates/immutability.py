"""immutability: inputs are not modified: every input's bytes after the call equal those before
(tolerance-free). SKIP where the task's own reference modifies its inputs."""
import numpy as np

from .. import compare
from ..context import gate_result, timed


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "immutability")
    fw = ctx.fw
    dev = [fw.from_numpy(a) if isinstance(a, np.ndarray) else a for a in x]
    fw.run(ctx.reference_model(task, "f32"), dev, "f32")
    for i, (a, d) in enumerate(zip(x, dev)):
        if isinstance(a, np.ndarray) and compare.bitwise_first_difference(a, fw.to_numpy(d)) is not None:
            return gate_result("immutability", "SKIP", f"the task's own Model modifies input {i}")
    out = ctx.call(task, x, seed=5, return_inputs=True)
    if not out.ok:
        return gate_result("immutability", out.verdict(), out.why())
    after = out.reply.get("inputs_after", [])
    for i, (a, b) in enumerate(zip(x, after)):
        if isinstance(a, np.ndarray) and b is not None:
            idx = compare.bitwise_first_difference(a, np.asarray(b))
            if idx is not None:
                return gate_result("immutability", "FAIL", f"input {i} was modified" + (f" at {idx}" if idx else ""),
                                   evidence={"seed": f"{ctx.seed:016x}", "bindings": task.constants(),
                                             "tensor": f"input{i}", "index": idx,
                                             "expected": compare.fmt_value(a, idx) if idx else "",
                                             "got": compare.fmt_value(np.asarray(b), idx) if idx else ""})
    return gate_result("immutability", "PASS", "inputs unchanged, byte for byte")
