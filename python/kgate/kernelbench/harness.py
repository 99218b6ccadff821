"""The public harness logic, run in the candidate's worker exactly as its authors run it: reference and
candidate in one process. Two variants:
  producer     the producer's check_kernel_correctness and validate_no_lazy_evaluation (eval_cuda.py):
               models built after set_seed(42) and .to(device), eval() before each forward;
  kernelbench  KernelBench's eval_kernel_against_ref / run_and_check_correctness at commit 21fbe5a: models
               built after set_seed(42) on the host and moved with .cuda() in each trial, never put in eval().
Both: 5 trials, seeds from torch.manual_seed(42) then torch.randint(0, 2**32 - 1), shape equality,
allclose(atol=1e-2, rtol=1e-2)."""
from __future__ import annotations

from .task import exec_module


def run_in_process(fw, ref_code: str, custom_code: str, mode: str, trials: int = 5, progress=None) -> dict:
    """progress(what), when given, is called after each bounded step (models built, lazy check, each trial)
    so the caller can hold every step to its own time limit."""
    step = progress or (lambda what: None)
    try:
        ref_ns = exec_module(ref_code, "harness_ref")
        cand_ns = exec_module(custom_code, "harness_custom")
        Model, ModelNew = ref_ns["Model"], cand_ns["ModelNew"]
        get_inputs, get_init_inputs = ref_ns["get_inputs"], ref_ns["get_init_inputs"]
    except Exception as e:  # noqa: BLE001
        return {"passed": False, "message": f"loading failed: {type(e).__name__}: {e}"}
    try:
        fw.set_seed(42)
        init = [fw.to_device(x) for x in get_init_inputs()]
        with fw.no_grad():
            fw.set_seed(42)
            original = Model(*init)
            if mode == "producer":
                original = fw.model_to_device(original)
            fw.set_seed(42)
            custom = ModelNew(*init)
            if mode == "producer":
                custom = fw.model_to_device(custom)
            fw.sync()
    except Exception as e:  # noqa: BLE001
        return {"passed": False, "message": f"building failed: {type(e).__name__}: {e}"}
    step("built")
    if mode == "producer":  # validate_no_lazy_evaluation, on its own fresh ModelNew
        try:
            fw.set_seed(42)
            with fw.no_grad():
                fw.set_seed(42)
                lazy = fw.model_to_device(ModelNew(*init))
                fw.set_seed(42)
                xs = [fw.to_device(x) for x in get_inputs()]
                out = lazy(*xs)
                fw.sync()
            for o in (out if isinstance(out, (tuple, list)) else [out]):
                why = fw.check_lazy(fw.describe_output(o))
                if why:
                    return {"passed": False, "message": f"lazy check: {why}"}
        except Exception as e:  # noqa: BLE001
            return {"passed": False, "message": f"lazy check: {type(e).__name__}: {e}"}
        step("lazy check")
    seeds = fw.producer_trial_seeds(42, trials)
    with fw.no_grad():
        for t, ts in enumerate(seeds, start=1):
            try:
                fw.set_seed(ts)
                xs = [fw.to_device(x) for x in get_inputs()]
                if mode == "producer":
                    fw.set_seed(ts)
                    original.eval()
                    ref_out = original(*xs)
                    fw.sync()
                    fw.set_seed(ts)
                    custom.eval()
                    new_out = custom(*xs)
                    fw.sync()
                else:
                    fw.set_seed(ts)
                    model = fw.model_to_device(original)
                    fw.set_seed(ts)
                    model_new = fw.model_to_device(custom)
                    ref_out = model(*xs)
                    fw.sync()
                    new_out = model_new(*xs)
                    fw.sync()
                if ref_out.shape != new_out.shape:
                    return {"passed": False, "message": f"trial {t}: shape mismatch"}
                if not fw.allclose(ref_out, new_out, 1e-2, 1e-2):
                    return {"passed": False, "message": f"trial {t}: value mismatch"}
            except Exception as e:  # noqa: BLE001
                return {"passed": False, "message": f"trial {t}: runtime error: {type(e).__name__}: {e}"}
            if t < trials:
                step(f"trial {t}")
    return {"passed": True, "message": f"{trials}/{trials} trials passed"}
