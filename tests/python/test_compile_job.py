"""The compile job compiles what ModelNew.__init__ compiles, and compilation is counted as such wherever it
happens: a candidate that calls load_inline in its __init__ (most of KernelBench's) has its extension built by
the row's compile job, so its verification finds it in the cache; a build that compiles says so in its
record's compile_seconds; a ModelNew that raises or hangs in the compile job is a note on an ok compile record,
never the row's verdict. The extension is a CPU one (cpp_sources only), so torch without a GPU builds it;
without torch, the engine's InputSource seam or pybind11's headers the torch tests skip, saying why."""
import json
import os
import subprocess
import sys
import sysconfig

import pytest

import kgate
from kgate import report

# A task and a candidate that compiles its extension in ModelNew.__init__, not when its module runs.
TASK = '''import torch
N = 64
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return [N]
'''

COMPILES_IN_INIT = '''import torch
from torch.utils.cpp_extension import load_inline
SRC = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"
class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        assert n == 64
        self.ext = load_inline(name="kgate_test_twice", cpp_sources=SRC, functions=["twice"])
    def forward(self, x):
        return self.ext.twice(x)
'''

# Marked for the compile phase (load_inline imported), but ModelNew's __init__ raises, or never returns.
RAISES_IN_INIT = '''import torch
from torch.utils.cpp_extension import load_inline
class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        raise ValueError("no kernel for n=%d" % n)
    def forward(self, x):
        return x * 2
'''
# Its extension cannot build (functions named, nothing declares them: what most CUDA-L1 candidates do with
# cpp_sources=""), and it falls back to torch, as those candidates do.
FAILS_TO_BUILD_IN_INIT = '''import torch
from torch.utils.cpp_extension import load_inline
class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        try:
            self.ext = load_inline(name="kgate_test_undeclared", cpp_sources="", functions=["twice"])
        except Exception:
            self.ext = None
    def forward(self, x):
        return x * 2
'''
HANGS_IN_INIT = RAISES_IN_INIT.replace('raise ValueError("no kernel for n=%d" % n)',
                                       'import time; time.sleep(3600)')


def _needs_torch_extension_build():
    torch = pytest.importorskip("torch", reason="no torch here: these candidates and their worker are torch")
    core = pytest.importorskip("kgate._core")
    if not hasattr(core, "InputSource"):
        pytest.skip("the engine's InputSource seam is not built")
    from torch.utils import cpp_extension
    dirs = cpp_extension.include_paths() + [sysconfig.get_paths()["include"], "/usr/include", "/usr/local/include"]
    if not any(os.path.exists(os.path.join(d, "pybind11", "pybind11.h")) for d in dirs):
        pytest.skip("load_inline cannot build here: no pybind11 headers (Debian: pybind11-dev)")
    return torch


def _rowjob(mode, custom_code, cache, cwd, **extra):
    spec = {"mode": mode, "key": "t/L1/T1", "sha": "x", "fw": "torch", "seed": "000000000000c0de",
            "call_timeout": 60, "compile_timeout": 300, "ext_cache": str(cache),
            "row": {"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": custom_code}, **extra}
    root = os.path.dirname(os.path.dirname(os.path.abspath(kgate.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "kgate.kernelbench.rowjob"], input=json.dumps(spec), text=True,
                       capture_output=True, timeout=600, cwd=cwd, env=env)
    assert p.stdout.strip(), p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1])


def _cached(cache):
    return sorted(f for _, _, files in os.walk(cache) for f in files if f.endswith(".so"))


def test_the_compile_job_builds_what_init_compiles_and_verification_hits_the_cache(tmp_path):
    _needs_torch_extension_build()
    cache = tmp_path / "ext"
    compiled = _rowjob("compile", COMPILES_IN_INIT, cache, tmp_path)
    assert compiled["status"] == "ok" and compiled["init_build"] == "ok", compiled
    # the module itself compiles nothing: these seconds are the build's
    assert compiled["compile_seconds"] > 0, compiled
    assert _cached(cache) == ["kgate_test_twice.so"]

    row = _rowjob("verify", COMPILES_IN_INIT, cache, tmp_path)
    assert row["status"] == "ok", row.get("message")
    assert row["compile_seconds"] == 0.0, row   # its build found the extension in the cache


def test_a_failed_build_is_compiled_once_and_the_record_says_the_fallback_ran(tmp_path):
    _needs_torch_extension_build()
    cache = tmp_path / "ext"
    compiled = _rowjob("compile", FAILS_TO_BUILD_IN_INIT, cache, tmp_path)
    assert compiled["status"] == "ok" and compiled["init_build"] == "ok", compiled
    assert compiled["compile_seconds"] > 0 and compiled["extension_build_failed"] == ["kgate_test_undeclared"]
    assert sorted(f for _, _, fs in os.walk(cache) for f in fs) == ["kgate_test_undeclared.failed"]
    row = _rowjob("verify", FAILS_TO_BUILD_IN_INIT, cache, tmp_path)
    assert row["status"] == "ok", row.get("message")
    assert row["compile_seconds"] == 0.0, row   # the remembered failure, raised again without compiling
    assert row["extension_build_failed"] == ["kgate_test_undeclared"]


def test_a_build_that_compiles_in_verification_is_counted_as_compilation(tmp_path):
    _needs_torch_extension_build()
    row = _rowjob("verify", COMPILES_IN_INIT, tmp_path / "ext", tmp_path)   # no compile job before it
    assert row["status"] == "ok", row.get("message")
    assert row["compile_seconds"] > 0, row
    assert row["compile_seconds"] <= row["phases"]["build"] + 0.01, row  # compiled in its build phase


def test_an_init_that_raises_is_a_note_on_an_ok_compile_record(tmp_path):
    _needs_torch_extension_build()
    compiled = _rowjob("compile", RAISES_IN_INIT, tmp_path / "ext", tmp_path)
    assert compiled["status"] == "ok", compiled
    assert compiled["init_build"].startswith("failed (raised): ValueError: no kernel for n=64"), compiled
    assert compiled["compile_seconds"] == 0.0

    # verification builds again and judges that build, as it would without the compile job
    after = _rowjob("verify", RAISES_IN_INIT, tmp_path / "ext", tmp_path)
    alone = _rowjob("verify", RAISES_IN_INIT, tmp_path / "other-ext", tmp_path)
    for row in (after, alone):
        assert row["status"] == "candidate_init_error" and "no kernel for n=64" in row["message"], row
    keep = ("status", "classification", "message", "gates", "compile_seconds")
    assert {k: after.get(k) for k in keep} == {k: alone.get(k) for k in keep}


def test_an_init_that_hangs_ends_within_the_compile_timeout_as_a_note(tmp_path):
    _needs_torch_extension_build()
    compiled = _rowjob("compile", HANGS_IN_INIT, tmp_path / "ext", tmp_path, compile_timeout=20)
    assert compiled["status"] == "ok", compiled
    assert compiled["init_build"].startswith("timeout: no answer to build"), compiled
    assert compiled["seconds"] < 30, compiled


def test_report_counts_compilation_apart_from_the_compile_records(tmp_path):
    """The verification records' compile_seconds are inside their row-seconds; the compile jobs' records
    (<stem>.compile.jsonl beside the results) are the compilation apart."""
    rows = [{"type": "row", "key": "a", "status": "ok", "classification": "clean", "gates": [], "seconds": 40,
             "row_seconds": 40, "compile_seconds": 5},
            {"type": "row", "key": "b", "status": "ok", "classification": "clean", "gates": [], "seconds": 20,
             "row_seconds": 20, "compile_seconds": 0}]
    comp = [{"type": "compile", "key": "a", "status": "ok", "seconds": 30, "compile_seconds": 25},
            {"type": "compile", "key": "b", "status": "ok", "seconds": 12, "compile_seconds": 10,
             "init_build": "ok"}]
    for name, recs in (("out.jsonl", rows), ("out.compile.jsonl", comp)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    line = next(l for l in report.summary_text([str(tmp_path / "out.jsonl")]).splitlines() if l.startswith("time:"))
    assert "60 row-seconds for 2 audited rows" in line and "of which 5 s compiling in the rows' own workers" in line
    assert "compile jobs apart: 2, 42 s, of which 35 s building extensions" in line


def test_report_says_how_many_audited_rows_ran_a_fallback_because_their_extension_did_not_build(tmp_path):
    rows = [{"type": "row", "key": k, "status": "ok", "classification": c, "gates": [], "seconds": 1,
             "row_seconds": 1, **({"extension_build_failed": ["ext"]} if failed else {})}
            for k, c, failed in (("a", "clean", True), ("b", "broken", True), ("c", "clean", True),
                                 ("d", "clean", False))]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = report.summary_text([str(tmp_path / "out.jsonl")])
    line = next(l for l in text.splitlines() if "failed to build" in l)
    assert line.endswith("judged: 3 of 4 (broken 1, clean 2)"), line
    (tmp_path / "none.jsonl").write_text(json.dumps(rows[3]) + "\n")
    assert "failed to build" not in report.summary_text([str(tmp_path / "none.jsonl")])
