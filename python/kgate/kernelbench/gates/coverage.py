"""coverage: every output element is written: with the allocator's free memory filled with two different
poison patterns before two calls, the outputs are bitwise identical and hold no poison (tolerance-free)."""
import numpy as np

from .. import compare
from ..context import gate_result, timed

POISONS = (0xFF, 0x7F)


def _is_poison(a: np.ndarray, idx, byte: int) -> bool:
    v = np.ascontiguousarray(a[tuple(idx)] if idx else a).view(np.uint8)
    return bool((v == byte).all())


@timed
def run(ctx):
    if not ctx.fw.CAPABILITIES.get("poison"):
        return gate_result("coverage", "SKIP", f"the {ctx.fw.NAME} allocator cannot be poisoned")
    task = ctx.nominal
    x = ctx.inputs(task, "coverage")
    o = ctx.reference(task, x, "f64")
    sizes = [int(np.asarray(a).size) * 4 for a in o]
    runs = []
    for p in POISONS:
        out = ctx.call(task, x, seed=9, poison=p, poison_sizes=sizes)
        if not out.ok:
            return gate_result("coverage", out.verdict(), f"poison 0x{p:02x}: {out.why()}")
        runs.append(out)
    for j, (a, b) in enumerate(zip(runs[0].arrays, runs[1].arrays)):
        if a is None or b is None:
            continue
        idx = compare.bitwise_first_difference(a, b)
        if idx is None:
            continue
        if idx and (_is_poison(a, idx, POISONS[0]) or _is_poison(b, idx, POISONS[1])):
            diff = (np.ascontiguousarray(a).view(np.uint8) != np.ascontiguousarray(b).view(np.uint8))
            return gate_result("coverage", "FAIL", f"output{j} at {idx} holds the allocator's poison"
                               f" ({int(diff.sum())} differing byte(s))",
                               evidence={"seed": f"{ctx.seed:016x}", "bindings": task.constants(),
                                         "tensor": f"output{j}", "index": idx, "variant": "poison 0xff vs 0x7f",
                                         "expected": "written", "got": f"{compare.fmt_value(a, idx)} / "
                                                                      f"{compare.fmt_value(b, idx)}"})
        return gate_result("coverage", "PASS", f"output{j} differs between the poisoned runs but not by poison"
                           " values (see determinism)")
    return gate_result("coverage", "PASS", "outputs identical under both poisons")
