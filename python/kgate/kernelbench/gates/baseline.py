"""baseline: the producer's own acceptance test, mirrored step by step from SOURCE.md and its eval_cuda.py:
its static filter on the sources; the lazy-output check (a fresh ModelNew built after seed 42, run on
get_inputs() under seed 42: plain tensors on the device, with storage); then 5 trials with seeds from
torch.manual_seed(42) and torch.randint(0, 2**32 - 1) each, the seed set before get_inputs(), before the
reference forward and before the candidate forward, both models built right after setting seed 42 and put
in eval(); output shape equality, then torch.allclose(atol=1e-2, rtol=1e-2). Not a gate: it measures what
the field's test lets through. The reference runs here, the candidate in its worker."""
from ..context import gate_result, timed

BLOCKED = ("time.sleep(", "input(", "while True:")
TRIALS = 5


def _wire(fw, values):
    """Init inputs as the worker's build expects them."""
    return [{"__tensor__": True, "array": fw.to_numpy(v)} if fw.is_tensor(v) else v for v in values]


def _host(fw, values):
    """Call inputs as host arrays (the worker places them in its own guarded buffers)."""
    return [fw.to_numpy(v) if fw.is_tensor(v) else v for v in values]


@timed
def run(ctx):
    fw, task = ctx.fw, ctx.nominal
    code = ctx.row["custom_code"]
    hits = [p for p in BLOCKED if p in code or p in ctx.ref_code]
    if hits:
        return gate_result("baseline", "FAIL", f"the producer's static filter blocks the source ({', '.join(hits)})")
    # The producer first warms a reference model up (seed 42, get_inputs without a reseed).
    fw.set_seed(42)
    init = fw.prepare_init_inputs(task.get_init_inputs())
    with fw.no_grad():
        warm = fw.build(task.Model, init, 42, eval_mode=False)
        warm(*[fw.to_device(v) for v in task.get_inputs()])
        fw.sync()
    del warm
    fw.set_seed(42)
    init_values = list(task.get_init_inputs())
    init = fw.prepare_init_inputs(init_values)
    ref = fw.build(task.Model, init, 42, eval_mode=False)
    for slot, ev in (("baseline", False), ("lazy", False)):
        b = ctx.cand.build(slot, _wire(fw, init_values), 42, eval_mode=ev)
        if b.get("status") != "ok":
            return gate_result("baseline", "FAIL", f"ModelNew cannot be built: {b.get('message')}")
    # Lazy-output check.
    fw.set_seed(42)
    xs = [fw.to_device(v) for v in task.get_inputs()]
    out = ctx.cand.call("lazy", _host(fw, xs), seed=None)
    if out.get("status") != "ok":
        return gate_result("baseline", "FAIL", f"lazy check: the call failed: {out.get('message')}")
    for d in out["outputs"]:
        why = fw.check_lazy(d)
        if why:
            return gate_result("baseline", "FAIL", f"lazy check: {why}")
    # Correctness trials.
    for t, ts in enumerate(fw.producer_trial_seeds(42, TRIALS), start=1):
        fw.set_seed(ts)
        xs = [fw.to_device(v) for v in task.get_inputs()]
        fw.set_seed(ts)
        if hasattr(ref, "eval"):
            ref.eval()
        with fw.no_grad():
            ref_out = ref(*xs)
            fw.sync()
        reply = ctx.cand.call("baseline", _host(fw, xs), seed=ts, eval=True)
        if reply.get("status") != "ok":
            return gate_result("baseline", "FAIL", f"trial {t}: runtime error: {reply.get('message')}",
                               trial_seed=ts)
        outs = reply["outputs"]
        try:
            if len(outs) == 1 and outs[0].get("single"):
                cand_out = fw.tensor_from_output(outs[0]) if "array" in outs[0] else None
            else:
                cand_out = tuple(fw.tensor_from_output(o) for o in outs if "array" in o)
            if ref_out.shape != cand_out.shape:
                return gate_result("baseline", "FAIL", f"trial {t}: shape mismatch", trial_seed=ts)
            if not fw.allclose(ref_out, cand_out, 1e-2, 1e-2):
                return gate_result("baseline", "FAIL", f"trial {t}: value mismatch", trial_seed=ts)
        except Exception as e:  # noqa: BLE001 - the producer counts any exception here as a runtime error
            return gate_result("baseline", "FAIL", f"trial {t}: runtime error: {type(e).__name__}: {e}",
                               trial_seed=ts)
    return gate_result("baseline", "PASS", f"all {TRIALS} trials within allclose(1e-2, 1e-2)")
