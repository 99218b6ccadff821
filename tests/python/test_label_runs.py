"""Lower-precision reference runs fetched apart (verify's label_runs): the engine asks for them only when a
failure needs its precision label, and labels exactly as when reference_runs returns every run at once."""
import numpy as np
import pytest

from test_engine_seams import Randn, core, gate, sum_in, verify  # noqa: F401 - core skips without the extension


def working_run(inputs, bindings, attrs):
    x = np.from_dlpack(inputs[0])
    h = core.HostArray(core.DType.f64, [1])
    h.numpy()[...] = float(np.cumsum(x.astype(np.float32), dtype=np.float32)[-1]) if x.size else 0.0
    return [("fp32", [h])]


class Lower:
    def __init__(self):
        self.calls = 0

    def __call__(self, inputs, bindings, attrs):
        self.calls += 1
        x = np.from_dlpack(inputs[0])
        h = core.HostArray(core.DType.f64, [1])
        h.numpy()[...] = float(np.cumsum(x.astype(np.float16), dtype=np.float16)[-1]) if x.size else 0.0
        return [("fp16", [h])]


def test_label_runs_are_not_asked_for_while_nothing_fails():
    lower = Lower()
    g = gate(verify(sum_in(np.float32), ["oracle"], source=Randn(), reference_runs=working_run,
                    label_runs=lower), "oracle")
    assert g["verdict"] == "PASS", g
    assert lower.calls == 0


def test_a_failure_fetches_the_label_runs_and_is_labelled_as_with_all_runs_at_once():
    lower = Lower()
    g = gate(verify(sum_in(np.float16), ["oracle"], source=Randn(), reference_runs=working_run,
                    label_runs=lower), "oracle")
    assert g["verdict"] == "FAIL" and g["precision_label"] == "fp16", g
    assert lower.calls >= 1
    # The working run alone still bounds the tolerance: an fp32 left-to-right sum passes, an fp16 one does not.
    ok = gate(verify(sum_in(np.float32), ["oracle"], source=Randn(), reference_runs=working_run,
                     label_runs=Lower()), "oracle")
    assert ok["verdict"] == "PASS", ok


def test_a_label_run_that_raises_is_an_error_never_a_verdict_on_the_candidate():
    def broken(inputs, bindings, attrs):
        raise RuntimeError("no fp16 today")
    g = gate(verify(sum_in(np.float16), ["oracle"], source=Randn(), reference_runs=working_run,
                    label_runs=broken), "oracle")
    assert g["verdict"] == "ERROR" and "no fp16 today" in g["summary"], g
