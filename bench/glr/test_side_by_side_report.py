"""The side-by-side benchmark's logic that runs without a GPU: FLOP convention, ratios, tables, JSON, shape
selection, and the float64 recurrence the correctness check compares against (on the CPU here).

    /usr/bin/python3 -m pytest -q bench/glr/test_side_by_side_report.py
"""
import json
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side as sbs  # noqa: E402
import side_by_side_impls as impls  # noqa: E402
import side_by_side_report as rep  # noqa: E402

B8 = rep.SHAPES[0]


def test_flops_match_the_numbers_design_md_derives_from_them():
    f, b = rep.flops(B8)
    assert f == pytest.approx(94.5e9, rel=1e-3)  # sm90_notes.md: 94.5 GFLOP forward at B8 T4096 H16
    # issue 16: FlashQLA 1.837 ms fwd+bwd = 196 TFLOP/s, the Triton path 4.21 ms = 86 TFLOP/s
    assert rep.tflops(f + b, 1.837) == pytest.approx(196, abs=1)
    assert rep.tflops(f + b, 4.21) == pytest.approx(86, abs=1)


def test_flops_count_value_heads_and_packed_tokens():
    gva = next(s for s in rep.SHAPES if s["name"] == "B1_T32768_H16_HV32_K128")
    varlen = next(s for s in rep.SHAPES if s["name"] == "varlen32k_H16_K128")
    assert rep.flops(gva)[0] == 2 * rep.flops(B8)[0]  # same tokens, twice the value heads
    assert rep.tokens(varlen) == 32768 and rep.flops(varlen) == rep.flops(B8)
    assert sum(rep.VARLEN_LENGTHS) == 32768 and min(rep.VARLEN_LENGTHS) == 1
    assert any(n % rep.CHUNK for n in rep.VARLEN_LENGTHS) and len(set(rep.VARLEN_LENGTHS)) > 5


def rows_for(times):
    return [rep.result(B8["name"], n, fwd_ms=f, fwdbwd_ms=fb) for n, (f, fb) in times.items()]


def test_speedups_are_anchor_over_implementation():
    d = {r["impl"]: r for r in rep.derive(rows_for({"glr": (2.0, 8.0), "fla": (1.0, 4.0), "flashqla": (0.5, 1.0)}),
                                          rep.SHAPES, 800.0)}
    assert d["glr"]["x_fla_fwd"] == pytest.approx(0.5) and d["glr"]["x_flashqla_fwdbwd"] == pytest.approx(0.125)
    assert d["flashqla"]["x_fla_fwdbwd"] == pytest.approx(4.0) and d["fla"]["x_fla_fwd"] == pytest.approx(1.0)
    assert d["glr"]["pct_peak_fwd"] == pytest.approx(100 * rep.tflops(rep.flops(B8)[0], 2.0) / 800.0)


def test_a_missing_anchor_gives_no_ratio_and_no_crash():
    rows = rows_for({"glr": (2.0, 8.0)}) + [rep.result(B8["name"], "flashqla", "error", "boom"),
                                            rep.result(B8["name"], "fla", "skipped", "time budget")]
    d = {r["impl"]: r for r in rep.derive(rows, rep.SHAPES, None)}
    assert d["glr"]["x_fla_fwd"] is None and d["glr"]["x_flashqla_fwdbwd"] is None
    assert d["glr"]["pct_peak_fwd"] is None and d["glr"]["tflops_fwd"] is not None
    md = rep.markdown_tables(rep.derive(rows, rep.SHAPES, None), rep.SHAPES, None)
    assert "error: boom" in md and "skipped: time budget" in md


def test_every_table_line_has_its_header_column_count():
    rows, checks = sbs.synthetic(rep.SHAPES, rep.CHECK_SHAPES)
    md = rep.report(dict(peak_tflops=780.0, notes=["n"]), rows, checks, rep.SHAPES)
    blocks, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    assert len(blocks) == 4  # times, throughput/memory, recorded, checks
    for b in blocks:
        n = b[0].count("|")
        assert all(line.count("|") == n for line in b), b
    assert "unsupported: FlashQLA 0.1.3 takes K = V = 128 only" in md


def test_check_flags():
    ok = {g: 5e-3 for g in rep.GRADS}
    assert rep.check_flag(ok) == ""
    assert rep.check_flag(dict(ok, dg=0.05)).startswith("above")
    assert rep.check_flag(dict(ok, dbeta=float("nan"))) == "NON-FINITE"
    assert rep.check_flag(dict(ok, o=float("inf"))) == "NON-FINITE"


def test_json_record_is_strict_json_with_nan_written_as_text():
    rows, checks = sbs.synthetic(rep.SHAPES, rep.CHECK_SHAPES)
    text = rep.dumps(rep.record(dict(peak_tflops=780.0), rows, checks, rep.SHAPES))
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert len(back["rows"]) == len(rep.SHAPES) * len(rep.IMPLS)
    assert any(c.get("dg") == "nan" for c in back["checks"])


def test_shape_selection():
    assert [s["name"] for s in sbs.select(rep.SHAPES, "B16_T2048_H32_K64,B8_T4096_H16_K128")] == \
        ["B8_T4096_H16_K128", "B16_T2048_H32_K64"]
    assert sbs.select(rep.CHECK_SHAPES, "none") == []
    with pytest.raises(SystemExit):
        sbs.select(rep.SHAPES, "B8_T4096")


def test_flashqla_warmup_gets_every_shape_but_k64_once():
    groups = sbs.flashqla_groups(rep.SHAPES + rep.CHECK_SHAPES)
    names = [n for g in groups for n in g]
    assert "B16_T2048_H32_K64" not in names and len(names) == len(set(names)) == len(rep.SHAPES + rep.CHECK_SHAPES) - 1


def test_self_test_writes_both_files(tmp_path):
    assert sbs.main(["--self-test", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "side_by_side.md").read_text().startswith("# glr side by side")
    json.loads((tmp_path / "side_by_side.json").read_text())


def test_dry_run_lists_every_shape(capsys):
    assert sbs.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert all(s["name"] in out for s in rep.SHAPES)


# --- the float64 recurrence the check compares every implementation with -------------------------------------

torch = pytest.importorskip("torch")


def explicit(q, k, v, g, beta, scale, offsets):
    """The recurrence with explicit matrices, head by head: S = e^g (I - b k k^T) S + b k v^T, o = scale S^T q."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    o = torch.zeros(B, T, HV, V, dtype=torch.float64)
    for b in range(B):
        for a, e in offsets(b):
            for h in range(HV):
                hq = h // (HV // H)
                S = torch.zeros(K, V, dtype=torch.float64)
                for t in range(a, e):
                    kt = k[b, t, hq].double()
                    bt = float(beta[b, t, h])
                    A = torch.eye(K, dtype=torch.float64) - bt * torch.outer(kt, kt)
                    S = math.exp(float(g[b, t, h])) * A @ S + bt * torch.outer(kt, v[b, t, h].double())
                    o[b, t, h] = scale * S.T @ q[b, t, hq].double()
    return o


def cpu_inputs(B, T, H, HV, K, V, lengths=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    inp = dict(q=r(B, T, H, K), k=torch.nn.functional.normalize(r(B, T, H, K), dim=-1), v=r(B, T, HV, V),
               g=torch.nn.functional.logsigmoid(r(B, T, HV) + 1.0), beta=torch.sigmoid(r(B, T, HV)),
               do=r(B, T, HV, V), scale=K ** -0.5, cu=None)
    if lengths:
        inp["cu"] = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int64)
    return inp


@pytest.mark.parametrize("B,T,H,HV,lengths", [(2, 9, 2, 4, None), (1, 12, 1, 2, [5, 1, 6])])
def test_recurrence64_matches_the_explicit_matrix_form(B, T, H, HV, lengths):
    inp = cpu_inputs(B, T, H, HV, 4, 3, lengths)
    ref = sbs.recurrence64(inp)
    offs = (lambda b: [(0, T)]) if lengths is None else \
        (lambda b: list(zip(inp["cu"][:-1].tolist(), inp["cu"][1:].tolist())))
    want = explicit(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], inp["scale"], offs)
    assert torch.allclose(ref["o"], want, rtol=1e-10, atol=1e-12)
    assert ref["dq"].shape == inp["q"].shape and ref["dg"].shape == inp["g"].shape


def test_recurrence64_restarts_the_state_at_each_packed_sequence():
    inp = cpu_inputs(1, 8, 1, 1, 4, 3, [4, 4])
    whole = sbs.recurrence64(inp)["o"]
    second = cpu_inputs(1, 8, 1, 1, 4, 3, None)
    for n in ("q", "k", "v", "g", "beta", "do"):
        second[n] = inp[n][:, 4:].clone()
    alone = sbs.recurrence64(second)["o"]
    assert torch.allclose(whole[:, 4:], alone, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("lengths", [None, [5, 0, 9, 3]])
def test_recurrence_spans_change_nothing(lengths):
    # checkpointed spans (the memory bound of the production-length check) give the one-span values and gradients
    T = 17
    inp = cpu_inputs(1, T, 1, 2, 4, 3, lengths, seed=3)
    got = {}
    for span in (T, 4, 1):
        leaves = [inp[n].double().requires_grad_(True) for n in ("q", "k", "v", "g", "beta")]
        o = sbs.recurrence(*leaves, inp["scale"], inp["cu"], span=span)
        (o * inp["do"].double()).sum().backward()
        got[span] = [o.detach()] + [x.grad for x in leaves]
    for span in (4, 1):
        for a, b in zip(got[span], got[T]):
            assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)


def test_rel_is_normwise():
    ref = torch.tensor([3.0, 4.0])
    assert sbs.rel(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.1)


def test_a_warm_up_process_accepts_check_shapes(tmp_path):
    # warm_flashqla_parallel passes check shapes to --warm-only; here, without a GPU, the run stops at the device
    # check (2) instead of at an unknown shape name (SystemExit)
    args = ["--warm-only", "--impls", "flashqla", "--shapes", "check_varlen_H16_HV32_K128,varlen32k_H16_HV32_K128",
            "--out", str(tmp_path)]
    assert sbs.main(args) == 2


def test_a_warning_on_a_timed_row_reaches_the_table():
    rows = [rep.result(B8["name"], "glr", fwd_ms=1.0, fwdbwd_ms=2.0, warning="non-finite values in the output")]
    assert "non-finite values in the output" in rep.markdown_tables(rep.derive(rows, rep.SHAPES, None),
                                                                    rep.SHAPES, None)


def test_glr_build_plan_rebuilds_only_what_other_sources_built(tmp_path):
    site = tmp_path / "site"
    assert impls.glr_build_plan(str(site), "auto")[:2] == (True, "not built")
    needed, why, stamp = impls.glr_build_plan(str(site), "never")
    assert not needed and "no glr extension" in why
    (site / "glr").mkdir(parents=True)
    (site / "glr" / "_C.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    assert impls.glr_build_plan(str(site), "auto")[0]  # no stamp: built from unknown sources
    (site / ".glr-source-stamp").write_text(stamp + "\n")
    assert impls.glr_build_plan(str(site), "auto")[:2] == (False, f"glr extension reused from {site} (same sources)")
    assert impls.glr_build_plan(str(site), "always")[:2] == (True, "forced")
    (site / ".glr-source-stamp").write_text("0123\n")
    assert "other sources" in impls.glr_build_plan(str(site), "auto")[1]
    assert not impls.glr_build_plan(str(site), "never")[0]


def test_load_glr_calls_the_drop_in_with_scale_and_cu_seqlens(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "glr").mkdir(parents=True)
    (site / "glr" / "_C.so").write_bytes(b"")
    (site / "glr" / "__init__.py").write_text(
        "def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, cu_seqlens=None):\n"
        "    return ((q, k, v, g, beta, scale, cu_seqlens), None)\n")
    (site / ".glr-source-stamp").write_text(impls.glr_source_stamp() + "\n")
    monkeypatch.delitem(sys.modules, "glr", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    args = sbs.parse_args(["--glr-site", str(site), "--out", str(tmp_path)])
    notes = []
    impl = impls.load_glr(args, notes)
    assert impl.fn(1, 2, 3, 4, 5, 0.5, "cu") == (1, 2, 3, 4, 5, 0.5, "cu")
    assert notes and "reused" in notes[0]


# --- the whole run on a fake device: main()'s loop, measure(), check(), write() ---------------------------------

class FakeEvent:
    def __init__(self, enable_timing=True):
        self.t = None

    def record(self):
        import time
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def exact(q, k, v, g, beta, scale, cu):
    o = sbs.recurrence(q.double(), k.double(), v.double(), g.double(), beta.double(), scale, cu)
    return o.to(v.dtype)


def no_varlen(q, k, v, g, beta, scale, cu):
    if cu is not None:
        raise NotImplementedError("no packed sequences here")
    return exact(q, k, v, g, beta, scale, cu) * 1.01


def test_main_on_a_fake_device(tmp_path, monkeypatch):
    import functools
    import types
    tiny = [rep.shape("tiny_dense", 2, 16, 2, 4, 8, 8), rep.shape("tiny_varlen", 1, 20, 1, 2, 8, 8, (7, 13))]
    monkeypatch.setattr(rep, "SHAPES", tiny)
    monkeypatch.setattr(rep, "CHECK_SHAPES", [rep.shape("tiny_check", 1, 12, 1, 2, 8, 8, (1, 11))])
    for name, fn in dict(is_available=lambda: True, synchronize=lambda: None, empty_cache=lambda: None,
                         reset_peak_memory_stats=lambda: None, memory_allocated=lambda: 0,
                         max_memory_allocated=lambda: 0, get_device_name=lambda: "fake").items():
        monkeypatch.setattr(torch.cuda, name, fn)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.Tensor, "untyped_storage", lambda self: self.storage(), raising=False)
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__="fake"))
    monkeypatch.setattr(sbs, "make_inputs", functools.partial(sbs.make_inputs, device="cpu"))
    monkeypatch.setattr(sbs, "matmul_peak_tflops", lambda: (800.0, 1.37))
    monkeypatch.setattr(sbs, "load_impls", lambda args, notes: (
        {"glr": impls.Impl("glr", exact, "exact"), "fla": impls.Impl("fla", no_varlen, "no varlen")},
        {"flashqla": "flash_qla not loaded: fake"}))
    for var in ("FLA_FLASH_QLA", "FLA_TILELANG"):
        monkeypatch.setenv(var, "0")
    assert sbs.main(["--out", str(tmp_path), "--reps", "3", "--warmup", "1"]) == 0
    rec = json.loads((tmp_path / "side_by_side.json").read_text())
    rows = {(r["shape"], r["impl"]): r for r in rec["rows"]}
    assert rows[("tiny_dense", "glr")]["status"] == "ok" and rows[("tiny_dense", "glr")]["fwd_reps"] == 3
    assert rows[("tiny_dense", "glr")]["x_fla_fwdbwd"] is not None
    assert rows[("tiny_varlen", "fla")]["status"] == "error"
    assert "no packed sequences" in rows[("tiny_varlen", "fla")]["reason"]
    assert rows[("tiny_varlen", "flashqla")] == dict(rows[("tiny_varlen", "flashqla")], status="unsupported",
                                                     reason="flash_qla not loaded: fake")
    checks = {(c["impl"], c["against"]): c for c in rec["checks"]}
    assert checks[("glr", "float64")]["status"] == "ok"
    assert max(checks[("glr", "float64")][g] for g in rep.GRADS) < 1e-2  # bf16 rounding of an exact recurrence
    assert checks[("fla", "float64")]["status"] == "error" and ("glr", "fla") not in checks
    md = (tmp_path / "side_by_side.md").read_text()
    assert "error: NotImplementedError: no packed sequences here" in md


def test_the_report_says_which_fla_backend_took_calls():
    meta = dict(impls={"fla": "fla 0.6.0"}, fla_backend_log=[])
    assert "fla's own Triton functions ran" in rep.report(meta, [], [], rep.SHAPES)
    meta["fla_backend_log"] = ["[FLA Backend] gated_delta_rule.chunk_gated_delta_rule -> flash_qla"] * 2
    md = rep.report(meta, [], [], rep.SHAPES)
    assert md.count("-> flash_qla") == 1 and "own Triton functions ran" not in md


def test_the_kernels_a_timed_row_ran_on_reach_the_table():
    rows = [rep.result(B8["name"], "glr", fwd_ms=1.0, fwdbwd_ms=50.0, warning="non-finite values in the output",
                       path="glr fwd: sm90: bf16; bwd: blocks: sm90 backward not taken: beta, dbeta not fp32")]
    md = rep.markdown_tables(rows, [B8], 800.0)
    line = next(l for l in md.splitlines() if l.startswith(f"| {B8['name']} | glr"))
    assert line.rstrip(" |").endswith("non-finite values in the output; glr fwd: sm90: bf16; bwd: blocks: sm90 "
                                      "backward not taken: beta, dbeta not fp32"), line


def test_the_kernel_breakdown_lists_the_largest_kernels_and_sums_the_rest():
    ks = [dict(kernel=f"k{i}", ms=0.5 / (i + 1), launches=1.0) for i in range(15)]
    rows = [rep.result(B8["name"], "glr", fwd_ms=1.0, fwdbwd_ms=4.0, kernels=ks), rep.result(B8["name"], "fla",
                                                                                               fwd_ms=1.0, fwdbwd_ms=5.0)]
    lines = rep.kernel_table(rows, [B8])
    body = [l for l in lines if l.startswith("| ")]
    assert body[0] == "| kernel | ms | launches | share |" and body[1] == "| `k0` | 0.500 | 1 | 12.5% |"
    assert sum(1 for l in body if l.startswith("| `k")) == 12  # the largest twelve, then the rest in one line
    rest = sum(k["ms"] for k in ks[12:])
    assert f"| 3 others | {rest:.3f} | 3 | " in "\n".join(body)
    assert body[-1].startswith(f"| all kernels | {sum(k['ms'] for k in ks):.3f} | 15 |")
    assert not any("fla" in l for l in lines)  # rows without a profile add nothing
    assert rep.kernel_table(rows[1:], [B8]) == []
    assert "Kernels of one warm forward+backward" in rep.report({}, rows, [], [B8])


def test_switch_diff_reads_configurations_and_refuses_bad_ones_before_any_gpu_work(capsys):
    import switch_diff as sd
    assert sd.parse_config("default") == ("default", {})
    assert sd.parse_config("tma_off:GLR_BWD_CHUNK_TMA=0,GLR_DH_2GEMM=1") == (
        "tma_off", {"GLR_BWD_CHUNK_TMA": "0", "GLR_DH_2GEMM": "1"})
    for bad in ("x:PATH=1", "x:GLR_A", ":GLR_A=1", "a b:GLR_A=1"):
        with pytest.raises(ValueError):
            sd.parse_config(bad)
    assert sd.main(["default"]) == 2  # one configuration compares nothing
    assert sd.main(["a", "a:GLR_X=1"]) == 2  # names must differ
    assert sd.main(["a", "b:GLR_X=1", "--shapes", "B8_T4096_H16_K128,nope"]) == 2
    assert "unknown nope" in capsys.readouterr().err


def test_switch_diff_counts_words_normwise_difference_and_finiteness_changes():
    import torch
    import switch_diff as sd
    ref = torch.randn(100).bfloat16()
    ref[3] = 1.0
    x = ref.clone()
    x[3] = 1.5
    x[5] = float("nan")
    ref[7], x[7] = float("nan"), float("nan")  # NaN where both are NaN is not a difference
    c = sd.compare(x, ref)
    finite = torch.ones(100, dtype=torch.bool)
    finite[5] = finite[7] = False
    assert c["words"] == 2 and c["finite_changed"] == 1
    assert c["rel"] == pytest.approx(0.5 / float(ref[finite].double().norm()))
    assert sd.compare(ref.float(), ref.float()) == dict(words=0, rel=0.0, finite_changed=0, note="")
    assert sd.compare(ref, ref.float())["words"] is None


def test_a_negative_kernel_profile_count_is_refused(capsys):
    import side_by_side as sbs
    with pytest.raises(SystemExit) as e:
        sbs.parse_args(["--kernels", "-1"])
    assert e.value.code == 2 and "--kernels: -1" in capsys.readouterr().err


def test_profile_pass_opens_the_profiler_around_one_warm_call_per_pair(monkeypatch):
    # ncu --profile-from-start off records what runs between start and stop: there, exactly one forward+backward
    # per (shape, implementation), after two warm ones; an implementation that is not loaded runs nothing
    import functools
    tiny = [rep.shape("tiny_dense", 2, 16, 2, 4, 8, 8)]
    monkeypatch.setattr(rep, "SHAPES", tiny)
    events = []
    state = {"on": False}
    for name, fn in dict(is_available=lambda: True, synchronize=lambda: None, empty_cache=lambda: None).items():
        monkeypatch.setattr(torch.cuda, name, fn)
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: (events.append("start"), state.update(on=True)))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: (events.append("stop"), state.update(on=False)))

    def traced(q, k, v, g, beta, scale, cu):
        events.append("call on" if state["on"] else "call")
        return exact(q, k, v, g, beta, scale, cu)
    monkeypatch.setattr(sbs, "make_inputs", functools.partial(sbs.make_inputs, device="cpu"))
    monkeypatch.setattr(sbs, "load_impls", lambda args, notes: (
        {"glr": impls.Impl("glr", traced, "traced")}, {"flashqla": "flash_qla not loaded: fake"}))
    assert sbs.main(["--profile-pass", "--impls", "glr,flashqla", "--checks", "none", "--out", "/tmp"]) == 0
    assert events == ["call", "call", "start", "call on", "stop"]


def test_a_missing_anchor_names_its_part_as_wheels_txt_gives_it(tmp_path):
    w = tmp_path / "wheels.txt"
    w.write_text("# comment\nsplit:2,3 tilelang==0.1.15   # why\n1 z3-solver==4.15.4.0\n3 flash-qla==0.1.3\n")
    assert impls.anchor_part("tilelang", str(w)) == "split across parts 2 and 3, installed with part 3"
    assert impls.anchor_part("z3-solver", str(w)) == "part 1"
    assert impls.anchor_part("flash-qla", str(w)) == "part 3"
    assert impls.anchor_part("fla-core", str(w)) == "not in wheels.txt"
    assert impls.anchor_part("z3-solver", str(tmp_path / "absent.txt")) == "not in wheels.txt"
    # the committed file names every anchor wheel the bench imports
    for wheel in ("z3-solver", "tilelang", "flash-qla", "fla-core"):
        assert impls.anchor_part(wheel) != "not in wheels.txt"
