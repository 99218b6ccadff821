"""public_harness: the public harness logic run as its authors run it, in one process with the candidate
(the worker): the producer's check (eval mode) and KernelBench's run_and_check_correctness at commit 21fbe5a
(no eval(), models moved with .cuda() per trial). Not a gate: the second leg of the agreement defence.
Its verdicts are computed inside the candidate's process, so they are only a measurement."""
from ..context import gate_result, timed
from ..client import WorkerDied


@timed
def run(ctx):
    results = {}
    for mode in ("producer", "kernelbench"):
        try:
            r = ctx.cand.harness(ctx.ref_code, mode)
        except WorkerDied as d:
            r = {"passed": False, "message": f"{d.kind}: {d.detail}"}
        results[mode] = {"passed": bool(r.get("passed")), "message": r.get("message", "")}
    both = all(v["passed"] for v in results.values())
    verdict = "PASS" if both else "FAIL"
    summary = "; ".join(f"{m}: {'PASS' if v['passed'] else 'FAIL ' + v['message'][:200]}" for m, v in results.items())
    return gate_result("public_harness", verdict, summary, harnesses=results)
