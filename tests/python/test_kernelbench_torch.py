"""The torch controls through the row job on a GPU (skipped without torch, CUDA or the extension): every
broken control's intended gate fails and is counted, every correct control is clean. The guard allocator
(KGATE_GUARD_ALLOC, built by CMake with KGATE_CUDA) must be present for the candidate-owned bounds
controls; without it they are reported as not checkable here rather than passed."""
import json
import os
import subprocess
import sys

import pytest

import kgate


def _env():
    """The environment a child python needs to import this kgate (the tests run from a build's site)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(kgate.__file__)))
    return dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))

torch = pytest.importorskip("torch")
core = pytest.importorskip("kgate._core")
if not torch.cuda.is_available() or not hasattr(core, "InputSource"):
    pytest.skip("needs a CUDA device and the engine's InputSource seam", allow_module_level=True)

from kgate.controls import load  # noqa: E402
from kgate.kernelbench.rowjob import guard_library  # noqa: E402

OWN_MEMORY = {"writes_past_own_output", "grid_nominal"}


@pytest.mark.parametrize("control", [c["name"] for c in load("torch")])
def test_torch_control(control, tmp_path):
    c = next(x for x in load("torch") if x["name"] == control)
    if control in OWN_MEMORY and not guard_library():
        pytest.skip("the guard allocator is not built (cmake --build build --target kgate_guard_alloc)")
    spec = {"mode": "verify", "key": f"control/{control}", "sha": "x", "fw": "torch", "seed": "000000000000c0de",
            "call_timeout": 60, "ext_cache": str(tmp_path / "ext"),
            "row": {"level_id": "control", "task_id": control, "ref_code": c["task"], "custom_code": c["candidate"]}}
    p = subprocess.run([sys.executable, "-m", "kgate.kernelbench.rowjob"], input=json.dumps(spec), text=True,
                       capture_output=True, timeout=900, cwd=tmp_path, env=_env())
    row = json.loads(p.stdout.splitlines()[-1])
    assert row["status"] == "ok", (row.get("message"), p.stderr[-2000:])
    gates = {g["gate"]: g for g in row["gates"]}
    if not c["expect"]:
        assert row["classification"] == "clean", {g: v["verdict"] for g, v in gates.items()}
    for g in c["expect"]:
        assert gates[g]["verdict"] in ("FAIL", "CRASH") and gates[g].get("counted", True), gates[g]
    # a defect control stands for what the field's test misses only if that test (the producer's, mirrored
    # by baseline) accepts it; a precision downgrade must name the precision it matches
    if c["producer_passes"]:
        assert gates["baseline"]["verdict"] == "PASS", gates["baseline"]
    if c["precision"]:
        assert any(gates[g].get("precision_label") == c["precision"] for g in c["expect"]), c["precision"]
