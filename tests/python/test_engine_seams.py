"""The engine's seams seen from Python (kgate._core.verify): an InputSource subclass supplies every ordinary
draw, reference runs widen the bound and label a precision downgrade, on_result streams each gate's JSON, and
the report carries the classification fields the front-ends read (docs/report.md)."""
import json

import numpy as np
import pytest

core = pytest.importorskip("kgate._core", reason="the extension is not built (pip install ./python)")
if not hasattr(core, "InputSource"):
    pytest.skip("the extension was built without the input-source seam", allow_module_level=True)

# y[0] = sum(x): a reduction the contract does not declare (no `reduced`), so the analytic bound is that of
# an elementwise op and only a working-precision reference run explains an fp32 summation's error.
SUM = """
[op]
name = "sum_f32"
working_precision = "f32"

[dims.N]
min = 1
max = 65536
nominal = 16384

[[inputs]]
name = "x"
dtype = "f32"
shape = ["N"]

[[outputs]]
name = "y"
dtype = "f32"
shape = [1]
"""


def f64(values):
    a = np.asarray(values, dtype=np.float64)
    h = core.HostArray(core.DType.f64, list(a.shape))
    h.numpy()[...] = a
    return h


def sum_oracle(inputs, bindings, attrs):
    x = np.from_dlpack(inputs[0]).astype(np.float64)
    return [f64([x.sum()])]


def sequential_sum(x, dtype):
    acc = dtype(0)
    for v in x.astype(dtype):
        acc = dtype(acc + v)
    return acc


def sum_in(dtype):
    """A candidate summing left to right in `dtype` (np.cumsum keeps the running sum in the dtype)."""
    def run(xs, ys):
        x = np.asarray(xs[0])
        ys[0][...] = np.cumsum(x.astype(dtype), dtype=dtype)[-1] if x.size else 0
        return 0
    return run


def reference_runs(inputs, bindings, attrs):
    x = np.from_dlpack(inputs[0])
    out = []
    for name, dt in (("fp32", np.float32), ("fp16", np.float16)):
        h = core.HostArray(core.DType.f64, [1])
        h.numpy()[...] = float(np.cumsum(x.astype(dt), dtype=dt)[-1]) if x.size else 0.0
        out.append((name, [h]))
    return out


class Randn(core.InputSource):
    """Positive draws (a sum of them never cancels) keyed by (bindings, seed); records every call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def describe(self):
        return "test source: |randn|"

    def draw(self, bindings, seed):
        self.calls.append((dict(bindings), seed))
        rng = np.random.default_rng(seed % (2 ** 63))
        return [np.abs(rng.standard_normal(bindings["N"])).astype(np.float32)]


def verify(entry, gates, **kw):
    t = core.inprocess_target("sum", entry)
    return json.loads(core.verify(SUM, "sum.toml", t, sum_oracle, seed=11, gates=gates, **kw))


def gate(report, name):
    return next(g for g in report["gates"] if g["gate"] == name)


def test_every_draw_comes_from_the_python_source():
    src = Randn()
    r = verify(sum_in(np.float64), ["oracle", "determinism"], source=src)
    assert r["source"] == "test source: |randn|"
    assert src.calls, "the source was never asked"
    assert all(set(b) == {"N"} and isinstance(s, int) for b, s in src.calls)
    assert gate(r, "oracle")["verdict"] == "PASS", gate(r, "oracle")
    assert r["classification"] == "clean" and r["broken_reasons"] == []


def test_a_source_that_raises_is_an_error_never_a_verdict_on_the_candidate():
    class Broken(Randn):
        def draw(self, bindings, seed):
            raise RuntimeError("no inputs today")
    r = verify(sum_in(np.float64), ["oracle"], source=Broken())
    g = gate(r, "oracle")
    assert g["verdict"] == "ERROR" and "no inputs today" in g["summary"], g
    # Not a verdict against the candidate, and not a clean bill either.
    assert r["classification"] == "incomplete"


def test_a_source_returning_the_wrong_shape_is_an_error():
    class Wrong(Randn):
        def draw(self, bindings, seed):
            return [np.zeros(3, np.float32)]
    g = gate(verify(sum_in(np.float64), ["oracle"], source=Wrong()), "oracle")
    assert g["verdict"] == "ERROR" and "input x" in g["summary"], g


def test_the_reference_term_admits_a_working_precision_kernel():
    # A left-to-right fp32 sum of 16384 terms strays far beyond an elementwise bound...
    bare = gate(verify(sum_in(np.float32), ["oracle"], source=Randn()), "oracle")
    assert bare["verdict"] == "FAIL", bare
    # ...but not beyond K_REF times the error of the promised working precision's own run.
    ok = gate(verify(sum_in(np.float32), ["oracle"], source=Randn(), reference_runs=reference_runs), "oracle")
    assert ok["verdict"] == "PASS", ok


def test_a_precision_downgrade_fails_and_is_labelled_with_the_precision_it_matches():
    r = verify(sum_in(np.float16), ["oracle"], source=Randn(), reference_runs=reference_runs)
    g = gate(r, "oracle")
    assert g["verdict"] == "FAIL" and g["precision_label"] == "fp16", g
    assert "matches fp16" in g["summary"]
    correct = gate(verify(sum_in(np.float64), ["oracle"], source=Randn(), reference_runs=reference_runs), "oracle")
    assert correct["verdict"] == "PASS" and correct["precision_label"] is None


def fp16_sum(x):
    return np.cumsum(x.astype(np.float16), dtype=np.float16)[-1] if x.size else 0


def near_fp16_sum(x):
    """A stand-in for a TF32 run that lies near the fp16 one (the h100 rows labelled TF32 that matched fp16
    exactly): the fp16 running sum moved by 2^-8 of itself."""
    return float(fp16_sum(x)) * (1 + 2.0 ** -8)


def three_reference_runs(inputs, bindings, attrs):
    """The working precision, then two lower ones a failing kernel may match, the farther one listed first."""
    x = np.from_dlpack(inputs[0])
    out = []
    for name, run in (("fp32", lambda v: np.cumsum(v, dtype=np.float32)[-1] if v.size else 0),
                      ("tf32", near_fp16_sum), ("fp16", fp16_sum)):
        h = core.HostArray(core.DType.f64, [1])
        h.numpy()[...] = float(run(x))
        out.append((name, [h]))
    return out


def test_the_precision_label_is_the_nearest_lower_precision_or_none():
    def near_fp16_kernel(xs, ys):
        ys[0][...] = near_fp16_sum(np.asarray(xs[0]))
        return 0
    labels = {}
    for name, entry in (("tf32", near_fp16_kernel), ("fp16", sum_in(np.float16)), ("fp64", sum_in(np.float64))):
        g = gate(verify(entry, ["oracle"], source=Randn(), reference_runs=three_reference_runs), "oracle")
        labels[name] = (g["verdict"], g["precision_label"])
    # Both lower runs lie within each failing kernel's reach; the label names the nearer one, whatever the
    # order of the runs, and a kernel at the promised precision fails nothing and carries no label.
    assert labels == {"tf32": ("FAIL", "tf32"), "fp16": ("FAIL", "fp16"), "fp64": ("PASS", None)}, labels


def test_on_result_streams_every_gate_and_the_report_carries_the_new_fields():
    seen = []
    r = verify(sum_in(np.float64), ["oracle", "immutability", "coverage"], on_result=seen.append)
    assert [json.loads(s)["gate"] for s in seen] == ["oracle", "immutability", "coverage"]
    for g in r["gates"]:
        for key in ("out_of_domain", "counted", "attributed_to", "precision_label", "excused", "excused_total",
                    "finding"):
            assert key in g, (key, g)
    assert r["classification"] in ("clean", "violation", "broken") and "broken_reasons" in r


def test_every_gate_says_what_it_called_and_evaluated():
    # The audit's cost model of a row (docs/audit.md) is read off these counters: each gate's candidate calls,
    # float64 oracle runs and memo hits, and the seconds inside them.
    r = verify(sum_in(np.float64), ["oracle", "immutability", "coverage"])
    by = {g["gate"]: g for g in r["gates"]}
    for g in r["gates"]:
        assert g["candidate_calls"] >= g["cases"] >= 1, g
        assert 0 <= g["candidate_seconds"] <= g["seconds"] and 0 <= g["oracle_seconds"] <= g["seconds"], g
        assert g["oracle_evaluations"] >= 0 and g["oracle_reuses"] >= 0 and g["input_draws"] >= 0, g
    assert by["oracle"]["oracle_evaluations"] >= 1
    assert all(g["shrink_runs"] == 0 for g in r["gates"])  # nothing failed, nothing shrunk
    # a failure is shrunk, and the re-runs are counted (in candidate_calls too)
    bad = gate(verify(sum_in(np.float16), ["oracle"]), "oracle")
    assert bad["verdict"] == "FAIL" and 1 <= bad["shrink_runs"] <= 24 and bad["candidate_calls"] > bad["shrink_runs"], bad
    # immutability compares bytes only; coverage compares against the nominal set's oracle, which an earlier
    # gate already evaluated: neither pays for an oracle run of its own.
    assert by["immutability"]["oracle_evaluations"] == 0
    assert by["coverage"]["oracle_evaluations"] == 0


_MEMO_RUN = """
import json, sys
import numpy as np
from test_engine_seams import Randn, gate, reference_runs, sum_in, verify
out = {}
for name, dt in (("f64", np.float64), ("f16", np.float16)):
    # every gate but stream, whose verdict on this candidate depends on whether two calls happened to overlap
    r = verify(sum_in(dt), ["oracle", "nan", "inf", "determinism", "shapes", "accumulation", "immutability",
                            "coverage", "bounds", "freshness", "layout", "baseline"],
               source=Randn(), reference_runs=reference_runs)
    out[name] = [(g["gate"], g["verdict"], g["summary"], g["oracle_evaluations"], g["oracle_reuses"],
                  g["reference_evaluations"], g["input_draws"]) for g in r["gates"]]
print(json.dumps(out))
"""


def _memo_run(**env):
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", _MEMO_RUN], capture_output=True, text=True, cwd=here,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_the_nominal_sets_stay_memoised_when_a_large_task_passes_the_memo_limit():
    # KGATE_MEMO_BYTES=1 runs this small task as a large one runs (each memo entry past the limit alone, as a
    # 67M-element output is): only pinned sets and the most recent entries stay. Pinning the nominal sets 0
    # and 1 (on by default) must save oracle and reference runs and change no verdict, summary or lookup.
    pinned = _memo_run(KGATE_MEMO_BYTES="1")
    unpinned = _memo_run(KGATE_MEMO_BYTES="1", KGATE_MEMO_PIN="0")
    roomy = _memo_run()
    for cand in ("f64", "f16"):
        a, b, c = pinned[cand], unpinned[cand], roomy[cand]
        assert [g[:3] for g in a] == [g[:3] for g in b] == [g[:3] for g in c], cand
        assert [g[3] + g[4] for g in a] == [g[3] + g[4] for g in b], "the gates asked for other oracle runs"
        evals = [sum(g[i] for g in run) for run in (a, b, c) for i in (3, 5, 6)]
        assert evals[0] < evals[3] and evals[1] < evals[4] and evals[2] < evals[5], (cand, evals)
        assert evals[6] <= evals[0], (cand, evals)  # a roomy memo never evaluates more than the pinned one
    assert any(g[1] == "FAIL" for g in pinned["f16"]), pinned["f16"]


def test_a_raising_on_result_surfaces_after_the_run():
    def boom(_):
        raise ValueError("callback broke")
    with pytest.raises(RuntimeError, match="callback broke"):
        verify(sum_in(np.float64), ["oracle"], on_result=boom)


def test_contract_draw_is_the_default_source():
    a = core.contract_draw(SUM, "sum.toml", {"N": 5}, 3)
    b = core.contract_draw(SUM, "sum.toml", {"N": 5}, 3)
    assert len(a) == 1 and list(a[0].shape) == [5]
    assert np.array_equal(np.from_dlpack(a[0]), np.from_dlpack(b[0]))


class OverrunsItsOwnScratch(core.Target):
    """Delegates to an in-process target and reports, as a guarded allocator would, a hit guard in memory the
    candidate allocated itself on every call."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def describe(self): return "overruns its scratch"
    def device(self): return self.inner.device()
    def alloc(self, n): return self.inner.alloc(n)
    def release(self, i): self.inner.release(i)
    def write(self, i, off, b): self.inner.write(i, off, b)
    def read(self, i, off, n): return self.inner.read(i, off, n)
    def check_guards(self, i): return self.inner.check_guards(i)
    def reset(self): self.inner.reset()
    def healthy(self): return self.inner.healthy()

    def call(self, req):
        r = self.inner.call(req)
        r.guards = list(r.guards) + [core.GuardViolation(core.CANDIDATE_OWNED_BUFFER, 4096, 0xa5, 0, "scratch of 4096 bytes")]
        return r


def test_a_guard_hit_in_candidate_owned_memory_fails_bounds():
    t = OverrunsItsOwnScratch(core.inprocess_target("sum", sum_in(np.float64)))
    r = json.loads(core.verify(SUM, "sum.toml", t, sum_oracle, seed=3, gates=["oracle", "bounds"]))
    g = gate(r, "bounds")
    assert g["verdict"] == "FAIL" and g["evidence"]["tensor"] == "scratch of 4096 bytes", g
    assert g["finding"] == "guard overwritten" and r["classification"] == "broken"


def test_contract_floats_parse_to_their_values():
    """Floats in a contract go through std::from_chars (TOML_FLOAT_CHARCONV): a uniform domain's bounds read
    back exactly as written, including exponents and negative values."""
    import numpy as np
    from kgate import _core
    toml = """
[op]
name = "floats"
working_precision = "f32"
[dims.N]
min = 1
max = 4096
nominal = 4096
[[inputs]]
name = "x"
dtype = "f64"
shape = ["N"]
domain = { kind = "uniform", low = -2.5e-1, high = 7.5E-1 }
[[outputs]]
name = "y"
dtype = "f32"
shape = ["N"]
"""
    (x,) = _core.contract_draw(toml, "<floats>", {"N": 4096}, 11)
    v = np.from_dlpack(x) if not isinstance(x, np.ndarray) else x
    assert v.min() >= -0.25 and v.max() < 0.75
    assert v.min() < -0.2 and v.max() > 0.7  # the whole range is used, so the bounds were read, not defaulted
