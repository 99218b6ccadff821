"""What one case may take in memory (issues 14/18): the limit is the machine's, not the constant 8 GiB that
refused a100 L2/T34 and L3/T25 (their nominal cases ran on an 80 GB A100). A row whose nominal case passes its
share beside other rows runs alone with the machine's whole limit; only a nominal case past that is a
contract_error, and its message says this machine cannot judge it. derive.py never refuses its own nominal case.
Nothing here allocates a large case: the limits are checked before anything is allocated, and these tests stop
there (an unknown gate name is refused only once the contract has been accepted)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import PKG_ROOT, read_jsonl, write_corpus

from kgate import _core
from kgate.kernelbench import casemem

GiB = 1 << 30

# The contract derived for a100 L2/T34 (results/h200-2026-12-04/a100/a100.kgate.jsonl): y0 alone has 2^30
# f32 elements at the nominal shape, which is also the largest (max = nominal).
T34 = """# derived by kgate.kernelbench.derive from the task's source (see its docstring)
[op]
name = "kernelbench_task"
working_precision = "f32"

[dims.batch_size]
nominal = 128
min = 1
max = 128

[dims.in_channels]
nominal = 32
min = 1
max = 32

[[inputs]]
name = "x0"
dtype = "f32"
shape = ["batch_size", "in_channels", 16, 32, 32]
layout = "strided"

[[outputs]]
name = "y0"
dtype = "f32"
shape = ["batch_size", 64, 32, 64, 64]
reduced = ["in_channels"]

[limits]
max_case_elements = 1073741824
timeout = 60.0
"""
T34_ELEMENTS = 128 * 32 * 16 * 32 * 32 + 128 * 64 * 32 * 64 * 64
WHERE = "<derived: a100/L2/T34>"


def accepted(toml, **kw):
    """Whether the engine accepts the contract (at the limit given, else its default), as verify() reads it,
    allocating nothing. Returns True or the refusal."""
    try:
        _core.check_contract(toml, WHERE, **kw)
    except RuntimeError as e:
        return str(e)
    return True


def test_verify_checks_the_case_memory_it_is_given_before_anything_runs():
    # an unknown gate is refused only after the contract was read and checked
    need = T34_ELEMENTS * 24
    for limit, ok in ((need, True), (need - 1, False)):
        try:
            _core.verify(T34, WHERE, _core.Target(), lambda *a: [], gates=["no_such_gate"], case_memory=limit)
        except ValueError as e:
            assert ok and "unknown gate" in str(e), e
        except RuntimeError as e:
            assert not ok and "the nominal case" in str(e), e


def test_the_engine_counts_each_element_of_a_case_with_its_float64_copies():
    assert _core.case_memory(T34, WHERE) == {"nominal": T34_ELEMENTS * 24, "largest": T34_ELEMENTS * 24}
    assert T34_ELEMENTS * 24 > 8 * GiB  # what the old constant refused


def test_a_nominal_case_larger_than_the_old_8_gib_is_accepted_where_the_limit_holds_it(monkeypatch):
    need = T34_ELEMENTS * 24
    assert accepted(T34, case_memory=need) is True
    assert accepted(T34, case_memory=96 * GiB, case_memory_why="3/4 of 128 GiB") is True
    monkeypatch.setenv("KGATE_CASE_MEMORY", str(need))  # the engine's own default, as `kgate verify` reads it
    assert _core.case_memory_limit() == (need, f"KGATE_CASE_MEMORY = {need} bytes")
    assert accepted(T34) is True


def test_a_nominal_case_the_machine_cannot_hold_is_one_clear_line(monkeypatch):
    need = T34_ELEMENTS * 24
    msg = accepted(T34, case_memory=need - 1, case_memory_why="the test's machine")
    assert isinstance(msg, str) and "\n" not in msg, msg
    # file:line:column, the field (the tensor holding most of it), and what to do
    assert re.match(re.escape(WHERE) + r":\d+:\d+: field 'outputs\[0\]\.shape': the nominal case ", msg), msg
    assert f"needs about {need} bytes" in msg and "y0 has 1073741824 elements" in msg, msg
    assert f"{need - 1} bytes, the test's machine" in msg and "this machine cannot judge it" in msg, msg
    monkeypatch.setenv("KGATE_CASE_MEMORY", str(8 * GiB))
    msg = accepted(T34)
    assert "KGATE_CASE_MEMORY = 8589934592 bytes" in msg and "the nominal case" in msg, msg


def test_a_range_reaching_past_the_limit_says_to_lower_max(monkeypatch):
    wide = T34.replace("nominal = 128\nmin = 1\nmax = 128", "nominal = 64\nmin = 1\nmax = 128")
    mem = _core.case_memory(wide, WHERE)
    assert mem["largest"] == T34_ELEMENTS * 24 and mem["nominal"] == mem["largest"] // 2
    msg = accepted(wide, case_memory=mem["nominal"], case_memory_why="a share")
    assert "field 'limits.max_case_elements': the largest case needs about" in msg, msg
    assert "lower max or max_case_elements" in msg and "\n" not in msg, msg
    assert accepted(wide, case_memory=mem["largest"]) is True


@pytest.mark.parametrize("value", ["12G", "-5", "1000", "0x40000000", " 1073741824"])
def test_a_bad_case_memory_setting_is_one_line(monkeypatch, value):
    monkeypatch.setenv("KGATE_CASE_MEMORY", value)
    with pytest.raises(ValueError, match="KGATE_CASE_MEMORY must be a decimal number of bytes"):
        _core.case_memory_limit()
    msg = accepted(T34)
    assert msg.startswith(WHERE + ": KGATE_CASE_MEMORY must be") and "\n" not in msg, msg


def test_the_default_limit_is_three_quarters_of_the_machine(monkeypatch):
    monkeypatch.delenv("KGATE_CASE_MEMORY", raising=False)
    limit, why = _core.case_memory_limit()
    total = None
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    assert why.startswith("3/4 of this machine's"), why
    assert total is None or limit <= total // 4 * 3, (limit, total)


# -- the audit's side: shares, running alone (kgate/kernelbench/casemem.py) -----------------------------------

def test_a_row_beside_others_gets_its_share_and_alone_the_whole_limit():
    machine = (96 * GiB, "3/4 of this machine's 128.0 GiB (MemTotal)")
    assert casemem.row_limit({"rows_at_once": 12}, machine)[0] == 8 * GiB
    assert casemem.row_limit({"rows_at_once": 12, "alone": True}, machine)[0] == 96 * GiB
    assert casemem.row_limit({}, machine)[0] == 96 * GiB
    # a100 L2/T34 (27.5 GB) and L3/T25 (8.7 GB): beside 11 others they run again alone; alone, they run.
    t25 = (10 * 240 * 224 * 224 + 10 * 480 * 224 * 224) * 24
    for need in (T34_ELEMENTS * 24, t25):
        why = casemem.needs_alone(need, {"rows_at_once": 12}, machine)
        assert why and "runs again alone" in why, why
        assert casemem.needs_alone(need, {"rows_at_once": 12, "alone": True}, machine) is None
    assert casemem.needs_alone(8 * GiB, {"rows_at_once": 12}, machine) is None  # fits its share
    assert casemem.needs_alone(97 * GiB, {"rows_at_once": 12}, machine) is None  # the engine refuses it


TASK = '''import numpy as np


class Model:
    def __call__(self, *xs):
        return self.forward(*xs)

    def eval(self):
        return self

    def forward(self, x):
        return np.tanh(x) * 2.0


batch_size = 512
dim = 1024


def get_inputs():
    return [np.random.randn(batch_size, dim).astype(np.float32)]


def get_init_inputs():
    return []
'''
CANDIDATE = '''import numpy as np


class ModelNew:
    def __call__(self, *xs):
        return self.forward(*xs)

    def eval(self):
        return self

    def forward(self, x):
        return (np.tanh(x) * 2.0).astype(np.float32)
'''
NOMINAL = 2 * 512 * 1024 * 24  # x0 and y0, f32: 25.2 MB


def test_a_row_whose_nominal_case_passes_its_share_runs_again_alone_and_is_audited(workdir, monkeypatch):
    from kgate import audit as audit_mod
    from kgate.results import read_results
    # A 32 MiB machine shared by 2 rows: 16 MiB each, less than the row's 25.2 MB nominal case.
    monkeypatch.setenv("KGATE_CASE_MEMORY", str(32 << 20))
    rows = [{"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": CANDIDATE, "score_default": "1.0"}]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    out = str(workdir / "out.jsonl")
    counts = audit_mod.audit(corpus, results_path=out, fw="numpy", jobs=2, seed=5, call_timeout=20, quiet=True,
                             work_dir=str(workdir / "w"), ext_cache=str(workdir / "ext"), gates=["oracle"])
    (rec,) = read_results(out)
    assert rec["status"] == "ok" and rec["classification"] == "clean", rec
    assert rec["case_memory"]["nominal"] == NOMINAL and rec["case_memory"]["limit"] == 32 << 20, rec
    assert "running alone" in rec["case_memory"]["limit_why"], rec
    # Its larger cases were capped at the nominal one (the share is smaller), and the contract says so.
    assert rec["case_memory"]["largest"] == NOMINAL, rec
    assert "max lowered so the largest case needs at most" in rec["contract"], rec["contract"]
    sup = read_jsonl(workdir / "out.superseded.jsonl")
    assert [s["status"] for s in sup] == [casemem.CASE_MEMORY_STATUS], sup
    assert "runs again alone" in sup[0]["message"] and "oracle" not in {g["gate"] for g in sup[0]["gates"]}, sup
    assert counts["finished_total"] >= 1, counts


def test_a_row_whose_nominal_case_passes_the_whole_machine_is_a_contract_error(workdir, monkeypatch):
    from kgate import audit as audit_mod
    from kgate.results import read_results
    monkeypatch.setenv("KGATE_CASE_MEMORY", str(16 << 20))
    rows = [{"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": CANDIDATE, "score_default": "1.0"}]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    out = str(workdir / "out.jsonl")
    audit_mod.audit(corpus, results_path=out, fw="numpy", jobs=1, seed=5, call_timeout=20, quiet=True,
                    work_dir=str(workdir / "w"), ext_cache=str(workdir / "ext"), gates=["oracle"])
    (rec,) = read_results(out)
    assert rec["status"] == "contract_error", rec
    assert "the nominal case" in rec["message"] and "this machine cannot judge it" in rec["message"], rec
    assert rec["gates"] == [] and "case_memory" in rec, rec  # refused before anything ran at the nominal shape


def test_a_bad_case_memory_setting_stops_the_audit_with_one_line(workdir):
    corpus = write_corpus(workdir / "c.jsonl", [])
    env = dict(os.environ, KGATE_CASE_MEMORY="8GiB")
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-m", "kgate", "audit", corpus, "--results", str(workdir / "o.jsonl")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "KGATE_CASE_MEMORY must be a decimal number of bytes" in lines[0], r.stderr


# -- derive.py at the boundary -----------------------------------------------------------------------------------

def _derive(cap):
    from kgate.kernelbench import fw_numpy as fw
    from kgate.kernelbench.derive import derive
    small = TASK.replace("batch_size = 512", "batch_size = 64").replace("dim = 1024", "dim = 128")
    return derive(fw, small, 7, case_cap=cap)


def test_derive_leaves_a_contract_that_fits_its_cap_as_it_was():
    free = _derive(None)
    assert _derive(1 << 40).toml == free.toml
    mem = _core.case_memory(free.toml, "<derived>")
    assert mem["nominal"] == 2 * 64 * 128 * 24 and mem["largest"] == 4 * mem["nominal"]  # both dims x2
    assert _derive(mem["largest"]).toml == free.toml  # exactly at the cap: fits


def test_derive_lowers_the_dims_max_to_fit_its_cap_and_says_so():
    free = _core.case_memory(_derive(None).toml, "<derived>")
    cap = free["largest"] - 1
    d = _derive(cap)
    mem = _core.case_memory(d.toml, "<derived>")
    assert mem["nominal"] == free["nominal"] and free["nominal"] < mem["largest"] <= cap, (mem, cap)
    assert all(v["nominal"] <= v["max"] < 2 * v["nominal"] for v in d.dims.values()), d.dims
    assert all(v["min"] == 1 for v in d.dims.values()), d.dims
    assert f"max lowered so the largest case needs at most {cap} bytes (the row's case memory share" in d.toml
    assert accepted(d.toml, case_memory=cap) is True


def test_derive_never_refuses_its_own_nominal_case():
    nominal = 2 * 64 * 128 * 24
    for cap in (nominal, nominal - 1, 1):
        d = _derive(cap)
        mem = _core.case_memory(d.toml, "<derived>")
        assert mem == {"nominal": nominal, "largest": nominal}, (cap, mem)
        assert all(v["max"] == v["nominal"] for v in d.dims.values()), d.dims
        if cap < nominal:
            assert "(the nominal case's, in the engine's estimate)" in d.toml, d.toml
        # the contract holds its nominal case wherever a case may take that much, and says why where not
        assert accepted(d.toml, case_memory=nominal) is True
        assert "the nominal case" in accepted(d.toml, case_memory=nominal - 1)


def test_a_row_left_at_case_memory_shared_runs_next_time_alone_only_even_when_retry_names_its_status(workdir,
                                                                                                    monkeypatch):
    # A row whose record is case_memory_shared (its solo run never came: the budget ended first) must run
    # alone on the next call, and only alone: named in --retry, it once ran beside others first, ended the same
    # way, and its solo run came last, where the budget cut it again, call after call.
    from kgate import audit as audit_mod
    from kgate.results import read_results
    monkeypatch.setenv("KGATE_CASE_MEMORY", str(32 << 20))
    rows = [{"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": CANDIDATE, "score_default": "1.0"}]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    out = str(workdir / "out.jsonl")
    kw = dict(results_path=out, fw="numpy", jobs=2, seed=5, call_timeout=20, quiet=True, work_dir=str(workdir / "w"),
              ext_cache=str(workdir / "ext"), gates=["oracle"])
    with monkeypatch.context() as m:  # the first call ends before the row's solo run
        m.setattr(audit_mod, "RUN_ALONE_STATUSES", ())
        audit_mod.audit(corpus, **kw)
    (rec,) = read_results(out)
    assert rec["status"] == casemem.CASE_MEMORY_STATUS, rec
    before = len(read_jsonl(workdir / "out.attempts.jsonl"))
    for retry in (["case_memory_shared"], None):
        audit_mod.audit(corpus, retry=retry, **kw)
        starts = [a for a in read_jsonl(workdir / "out.attempts.jsonl")[before:] if a["event"] == "start"]
        assert [(a["kind"], a["solo"]) for a in starts] == [("verify", True)], (retry, starts)
        (rec,) = read_results(out)
        assert rec["status"] == "ok" and rec["classification"] == "clean", rec
        assert rec["retry_of"]["status"] == casemem.CASE_MEMORY_STATUS, rec
        # finished: a second call runs nothing
        before = len(read_jsonl(workdir / "out.attempts.jsonl"))
        audit_mod.audit(corpus, retry=retry, **kw)
        assert len(read_jsonl(workdir / "out.attempts.jsonl")) == before
        # back to the unfinished state for the next round: the ok record superseded by hand is not possible
        # (records are signed), so the second round starts from a fresh results file
        for f in workdir.glob("out*.jsonl"):
            f.unlink()
        with monkeypatch.context() as m:
            m.setattr(audit_mod, "RUN_ALONE_STATUSES", ())
            audit_mod.audit(corpus, **kw)
        before = len(read_jsonl(workdir / "out.attempts.jsonl"))
