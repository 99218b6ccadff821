"""bounds: no write outside the buffers: every input of every call sat between guard zones filled with a
random pattern; all guards are intact afterwards (tolerance-free). Outputs the candidate allocates itself
have no guards a harness can place (the coverage gate's poison shows some overruns into free memory)."""
from ..context import gate_result, timed


@timed
def run(ctx):
    task = ctx.nominal
    x = ctx.inputs(task, "bounds")
    out = ctx.call(task, x, seed=29)
    if not out.ok and out.died is not None:
        return gate_result("bounds", out.verdict(), out.why())
    violations = list(ctx.guard_log)
    if violations:
        g, v = violations[0]
        return gate_result("bounds", "FAIL", f"a write outside input {v['input']} (guard byte at offset "
                           f"{v['offset']}) during the {g} gate's call; {len(violations)} violation(s) in all",
                           evidence={"seed": f"{ctx.seed:016x}", "tensor": f"input{v['input']}",
                                     "index": [v["offset"]], "expected": f"0x{v['expected']:02x}",
                                     "got": f"0x{v['found']:02x}", "variant": f"call of gate {g}",
                                     "bindings": task.constants()})
    return gate_result("bounds", "PASS", f"guards intact around the inputs of all {ctx.calls} calls")
