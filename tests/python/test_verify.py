"""The engine's C++ gates (verify) driving a Python candidate in a worker process through the Target
trampoline, with a Python float64 oracle: a correct relu passes, one that masks NaN fails the nan gate."""
import json
import os

import numpy as np
import pytest

core = pytest.importorskip("kgate._core", reason="the extension is not built (pip install ./python)")
if not hasattr(core, "verify"):
    pytest.skip("the extension was built without the engine", allow_module_level=True)

CONTRACT = """
[op]
name = "relu_f32"
description = "y = max(x, 0), NaN propagating"
working_precision = "f32"

[dims.N]
min = 1
max = 4096
nominal = 256

[[inputs]]
name = "x"
dtype = "f32"
shape = ["N"]

[[outputs]]
name = "y"
dtype = "f32"
shape = ["N"]
"""

SRC = """
import numpy as np
def relu(xs, ys):
    x = xs[0]
    ys[0][...] = np.where(x > 0, x, np.where(np.isnan(x), x, 0))
    return 0
def relu_masks_nan(xs, ys):
    ys[0][...] = np.maximum(np.nan_to_num(xs[0], nan=0.0), 0)
    return 0
"""


def oracle(inputs, bindings, attrs):
    x = np.from_dlpack(inputs[0]).astype(np.float64)
    y = np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
    h = core.HostArray(core.DType.f64, list(x.shape))
    h.numpy()[...] = y
    return [h]


def run(entry, gates):
    from kgate.target import WorkerTarget
    t = WorkerTarget(SRC, entry)
    return json.loads(core.verify(CONTRACT, "relu.toml", t, oracle, seed=7, gates=gates))


def verdicts(report):
    gates = report.get("gates", report.get("results", []))
    return {g.get("gate"): g.get("verdict") for g in gates}


def test_engine_gates_pass_a_correct_python_candidate():
    v = verdicts(run("relu", ["oracle", "nan", "inf", "determinism", "immutability"]))
    assert v and all(x == "PASS" for x in v.values()), v


def test_engine_nan_gate_catches_a_python_candidate():
    v = verdicts(run("relu_masks_nan", ["nan"]))
    assert v.get("nan") == "FAIL", v


def test_an_oracle_that_keeps_its_lent_inputs_is_an_error():
    """The engine lends its input arrays to the oracle for the call (no copy); one kept past the call would
    outlive the engine's array, so keeping it is the oracle's error, never a silent read of freed memory."""
    from kgate.target import WorkerTarget
    kept = []

    def keeping(inputs, bindings, attrs):
        kept.append(inputs[0])
        return oracle(inputs, bindings, attrs)

    t = WorkerTarget(SRC, "relu")
    text = core.verify(CONTRACT, "relu.toml", t, keeping, seed=7, gates=["oracle"])
    assert "kept a reference to its input arrays" in text
    v = verdicts(json.loads(text))
    assert v.get("oracle") not in ("PASS", None), v


def test_classify_of_a_reports_gates_is_the_reports_classification():
    """kgate._core.classify (the engine's classify, broken_reasons and exit code over gate records as a
    report holds them) gives what verify()'s own report says: the row job classifies a merged set of gate
    results with it (kernelbench/rowjob.py, the guard allocator's second pass), never in Python."""
    for entry, gates in (("relu", ["oracle", "nan"]), ("relu_masks_nan", ["oracle", "nan", "inf"])):
        rep = run(entry, gates)
        c = core.classify(rep["gates"])
        assert (c["classification"], c["broken_reasons"], c["exit_code"]) == \
            (rep["classification"], rep["broken_reasons"], rep["exit_code"]), (c, rep["classification"])
    # what it reads of each record: verdict, finding, error_ratio (None, a number or "inf"), counted,
    # out_of_domain; baseline never counts
    bounds = {"gate": "bounds", "verdict": "FAIL", "finding": "guard overwritten", "error_ratio": None}
    assert core.classify([bounds])["classification"] == "broken"
    assert core.classify([dict(bounds, counted=False)])["classification"] == "clean"
    assert core.classify([dict(bounds, out_of_domain=True)])["classification"] == "clean"
    assert core.classify([dict(bounds, gate="baseline")]) == {"classification": "clean", "broken_reasons": [],
                                                               "exit_code": 0}
    oracle_fail = {"gate": "oracle", "verdict": "FAIL", "finding": "error beyond the bound"}
    assert core.classify([dict(oracle_fail, error_ratio=2.0)])["classification"] == "violation"
    assert core.classify([dict(oracle_fail, error_ratio="inf")])["classification"] == "broken"
    assert core.classify([dict(oracle_fail, error_ratio=float("inf"))])["classification"] == "broken"
    assert core.classify([{"gate": "nan", "verdict": "ERROR"}]) == {"classification": "incomplete",
                                                                    "broken_reasons": [], "exit_code": 2}
    with pytest.raises(ValueError, match="unknown verdict"):
        core.classify([{"gate": "nan", "verdict": "MAYBE"}])
