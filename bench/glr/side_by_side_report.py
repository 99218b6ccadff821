"""The side-by-side benchmark's bookkeeping, apart from the GPU: the shapes, the FLOP convention, the ratios to
the anchors, the markdown tables and the JSON record. No torch import here, so the logic runs and is tested on a
machine without a GPU (bench/glr/test_side_by_side_report.py; side_by_side.py --self-test).

Units: times in ms (medians of CUDA-event timings), memory in bytes, FLOP counts in FLOP. A speedup "x ANCHOR"
is anchor_ms / impl_ms: above 1 the implementation is faster than that anchor (issue 16's goal reads
"glr fwd+bwd >= 1.2 x FlashQLA").
"""
import json
import math

CHUNK = 64  # DESIGN.md 5: the FLOP convention's C

# Mixed lengths for the packed-sequence shapes: 15 sequences, 32768 tokens; long and short ones, lengths that
# are and are not multiples of the chunk (1 and 63 tokens included, one sequence of 12288).
VARLEN_LENGTHS = (12288, 5000, 4096, 3001, 2048, 1999, 1500, 1024, 700, 513, 342, 129, 64, 63, 1)
assert sum(VARLEN_LENGTHS) == 32768


def shape(name, B, T, H, HV, K, V, lengths=None, note=""):
    return dict(name=name, B=B, T=T, H=H, HV=HV, K=K, V=V, lengths=list(lengths) if lengths else None, note=note)


# DESIGN.md 5's shapes (bf16, Gated DeltaNet), then packed sequences (cu_seqlens, B = 1) without and with GVA.
SHAPES = [
    shape("B8_T4096_H16_K128", 8, 4096, 16, 16, 128, 128),
    shape("B4_T8192_H32_K128", 4, 8192, 32, 32, 128, 128),
    shape("B1_T32768_H16_HV32_K128", 1, 32768, 16, 32, 128, 128, note="GVA"),
    shape("B16_T2048_H32_K64", 16, 2048, 32, 32, 64, 64),
    shape("varlen32k_H16_K128", 1, 32768, 16, 16, 128, 128, VARLEN_LENGTHS, note="varlen"),
    shape("varlen32k_H16_HV32_K128", 1, 32768, 16, 32, 128, 128, VARLEN_LENGTHS, note="varlen+GVA"),
]

# Small shapes for the correctness cross-check against a float64 recurrence. The first shares H, HV, K, V and
# the packed layout with the varlen+GVA shape, so FlashQLA's TileLang kernels compiled for one serve both; the
# second is the shape DESIGN.md's anchor check used (B2 T512 H4 HV8), a separate TileLang compile.
CHECK_SHAPES = [
    shape("check_varlen_H16_HV32_K128", 1, 1193, 16, 32, 128, 128, (1, 63, 64, 65, 300, 700), note="varlen+GVA"),
    shape("check_B2_T512_H4_HV8_K128", 2, 512, 4, 8, 128, 128, note="GVA"),
    # production length with many heads (issue 16 item 3: T >= 4096), packed sequences of 4096 tokens in all, GVA
    # (the float64 reference under checkpointed spans: side_by_side.recurrence)
    shape("check_T4096_H16_HV32_K128", 1, 4096, 16, 32, 128, 128, (3000, 1, 1095), note="production length"),
]

# What DESIGN.md 5 recorded on one H200 (ms, fwd and fwd+bwd): where the run drifts from them, say why.
RECORDED = {
    ("fla", "B8_T4096_H16_K128"): (1.02, 4.21),
    ("fla", "B4_T8192_H32_K128"): (1.85, 7.66),
    ("flashqla", "B8_T4096_H16_K128"): (0.470, 1.837),
    ("flashqla", "B4_T8192_H32_K128"): (0.707, 3.139),
    ("glr", "B8_T4096_H16_K128"): (23.9, 102.7),
}

IMPLS = ["glr", "fla", "flashqla"]  # row order
ANCHORS = ["fla", "flashqla"]
LABEL = {"glr": "glr (torch op)", "fla": "fla 0.6 Triton", "flashqla": "FlashQLA 0.1.3"}


def tokens(s):
    return sum(s["lengths"]) if s["lengths"] else s["B"] * s["T"]


def flops(s, C=CHUNK):
    """(fwd, bwd) FLOP by DESIGN.md 5's convention, per token per value head:
    fwd 2(3KV + C(3K + 2V)), bwd 2(8KV + C(9K + 5V) + 2C^2)."""
    K, V = s["K"], s["V"]
    n = tokens(s) * s["HV"]
    return n * 2 * (3 * K * V + C * (3 * K + 2 * V)), n * 2 * (8 * K * V + C * (9 * K + 5 * V) + 2 * C * C)


def tflops(flop, ms):
    return None if not ms else flop / (ms * 1e-3) / 1e12


def speedup(anchor_ms, ms):
    return None if not anchor_ms or not ms else anchor_ms / ms


def result(shape_name, impl, status="ok", reason="", **kw):
    """One (shape, implementation) record. status: ok, unsupported (the implementation cannot run this
    configuration; reason says why), error (it raised; reason holds the message), skipped (the time budget ran
    out before it)."""
    assert status in ("ok", "unsupported", "error", "skipped"), status
    r = dict(shape=shape_name, impl=impl, status=status, reason=reason, fwd_ms=None, fwdbwd_ms=None)
    r.update(kw)
    return r


def derive(results, shapes, peak_tflops):
    """Adds FLOP, TFLOP/s, % of the measured bf16 peak and speedups to each anchor, per record."""
    by_name = {s["name"]: s for s in shapes}
    index = {(r["shape"], r["impl"]): r for r in results}
    out = []
    for r in results:
        r = dict(r)
        s = by_name[r["shape"]]
        f, b = flops(s)
        r["flop_fwd"], r["flop_fwdbwd"] = f, f + b
        r["tflops_fwd"] = tflops(f, r.get("fwd_ms"))
        r["tflops_fwdbwd"] = tflops(f + b, r.get("fwdbwd_ms"))
        for p in ("fwd", "fwdbwd"):
            t = r[f"tflops_{p}"]
            r[f"pct_peak_{p}"] = None if t is None or not peak_tflops else 100.0 * t / peak_tflops
        for a in ANCHORS:
            ar = index.get((r["shape"], a))
            for p in ("fwd", "fwdbwd"):
                r[f"x_{a}_{p}"] = speedup(ar.get(f"{p}_ms") if ar else None, r.get(f"{p}_ms"))
        out.append(r)
    return out


def _num(x, spec):
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _mb(x):
    return "-" if x is None else f"{x / 2**20:.0f}"


def _ordered(rows, shapes):
    order = {s["name"]: i for i, s in enumerate(shapes)}
    return sorted(rows, key=lambda r: (order.get(r["shape"], 99), IMPLS.index(r["impl"]) if r["impl"] in IMPLS
                                        else 99))


def markdown_tables(rows, shapes, peak_tflops):
    """The time table (medians, speedups to each anchor, first-call seconds) and the throughput/memory table."""
    rows = _ordered(rows, shapes)
    out = ["| shape | implementation | fwd ms | fwd+bwd ms | fwd x fla | fwd+bwd x fla | fwd x FlashQLA | "
           "fwd+bwd x FlashQLA | first call s (fwd / fwd+bwd) | note |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        note = f"{r['status']}: {r['reason']}" if r["status"] != "ok" else \
            "; ".join(x for x in (r.get("warning"), r.get("path")) if x)
        first = "-"
        if r.get("first_fwd_s") is not None or r.get("first_fwdbwd_s") is not None:
            first = f"{_num(r.get('first_fwd_s'), '.1f')} / {_num(r.get('first_fwdbwd_s'), '.1f')}"
        out.append(f"| {r['shape']} | {LABEL.get(r['impl'], r['impl'])} | {_num(r.get('fwd_ms'), '.3f')} | "
                   f"{_num(r.get('fwdbwd_ms'), '.3f')} | {_num(r.get('x_fla_fwd'), '.2f')} | "
                   f"{_num(r.get('x_fla_fwdbwd'), '.2f')} | {_num(r.get('x_flashqla_fwd'), '.2f')} | "
                   f"{_num(r.get('x_flashqla_fwdbwd'), '.2f')} | {first} | {note.replace('|', '/')} |")
    out += ["", f"Effective TFLOP/s by DESIGN.md 5's convention; % of the bf16 matmul peak measured in this run "
            f"({_num(peak_tflops, '.0f')} TFLOP/s); saved = memory the forward (grad enabled) leaves allocated "
            "beyond its output, i.e. what autograd keeps for the backward; peak = the most allocated above the "
            "inputs during forward+backward.", "",
            "| shape | implementation | TFLOP/s fwd | TFLOP/s fwd+bwd | % peak fwd | % peak fwd+bwd | saved MiB | "
            "fwd+bwd peak MiB |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            continue
        out.append(f"| {r['shape']} | {LABEL.get(r['impl'], r['impl'])} | {_num(r.get('tflops_fwd'), '.1f')} | "
                   f"{_num(r.get('tflops_fwdbwd'), '.1f')} | {_num(r.get('pct_peak_fwd'), '.1f')} | "
                   f"{_num(r.get('pct_peak_fwdbwd'), '.1f')} | {_mb(r.get('saved_bytes'))} | "
                   f"{_mb(r.get('fwdbwd_peak_bytes'))} |")
    rec = [(k, v) for k, v in RECORDED.items()]
    if rec:
        out += ["", "Recorded in DESIGN.md 5 (earlier runs on one H200), beside this run:", "",
                "| shape | implementation | recorded fwd / fwd+bwd ms | this run fwd / fwd+bwd ms |",
                "|---|---|---|---|"]
        index = {(r["shape"], r["impl"]): r for r in rows}
        for (impl, name), (f, fb) in rec:
            r = index.get((name, impl))
            now = "-" if r is None or r["status"] != "ok" else \
                f"{_num(r.get('fwd_ms'), '.3f')} / {_num(r.get('fwdbwd_ms'), '.3f')}"
            out.append(f"| {name} | {LABEL[impl]} | {f} / {fb} | {now} |")
    return "\n".join(out)


GRADS = ["o", "dq", "dk", "dv", "dg", "dbeta"]
FLAG_ABOVE = 2e-2  # a flag for the reader, not a verdict: the anchors agree with float64 to ~5e-3 (DESIGN.md 5)


def check_flag(errs):
    vals = [errs.get(g) for g in GRADS if errs.get(g) is not None]
    if any(not math.isfinite(v) for v in vals):
        return "NON-FINITE"
    if any(v > FLAG_ABOVE for v in vals):
        return f"above {FLAG_ABOVE:g}"
    return ""


def check_table(checks):
    """checks: records {check, impl, against, status, reason, o, dq, dk, dv, dg, dbeta} with normwise relative
    errors ||x - ref|| / ||ref||; against is 'float64' or another implementation."""
    out = [f"Normwise relative error ||x - ref|| / ||ref|| on the same inputs (bf16 q, k, v, beta; fp32 g); flag: "
           f"above {FLAG_ABOVE:g} or non-finite (a flag, not a verdict).", "",
           "| check shape | implementation | against | o | dq | dk | dv | dg | dbeta | flag |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in checks:
        against = LABEL.get(c["against"], c["against"])
        if c.get("status", "ok") != "ok":
            out.append(f"| {c['check']} | {LABEL.get(c['impl'], c['impl'])} | {against} | "
                       + " | ".join("-" for _ in GRADS) + f" | {c['status']}: {c.get('reason', '')} |")
            continue
        out.append(f"| {c['check']} | {LABEL.get(c['impl'], c['impl'])} | {against} | "
                   + " | ".join(_num(c.get(g), ".2e") for g in GRADS) + f" | {check_flag(c)} |")
    return "\n".join(out)


def report(meta, rows, checks, shapes):
    """The whole markdown page: header lines from meta, the two tables, the check table, the notes."""
    peak = meta.get("peak_tflops")
    head = ["# glr side by side with flash-linear-attention's Triton path and FlashQLA",
            "", f"{meta.get('device', '?')} | torch {meta.get('torch', '?')} | triton {meta.get('triton', '?')} | "
                f"fla {meta.get('fla', '-')} | flash_qla {meta.get('flash_qla', '-')} | tilelang "
                f"{meta.get('tilelang', '-')} | {meta.get('date', '')} | commit {meta.get('commit', '?')}",
            f"Medians of CUDA-event timings after warm-up; bf16 matmul 8192^3 peak this run: "
            f"{_num(peak, '.0f')} TFLOP/s.", ""]
    for n in meta.get("notes", []):
        head.append(f"- {n}")
    if "fla" in meta.get("impls", {}):
        log = meta.get("fla_backend_log") or []
        head += [f"- fla's dispatcher: {m}" for m in dict.fromkeys(log)] or \
            ["- fla's dispatcher logged no backend taking a call: fla's own Triton functions ran"]
    return "\n".join(head + ["", markdown_tables(derive(rows, shapes, peak), shapes, peak), "",
                             check_table(checks), ""] + kernel_table(rows, shapes))


def kernel_table(rows, shapes, top=12):
    """Per row that was profiled (side_by_side.py --kernels): its largest kernels, ms per forward+backward, and
    the share of the row's fwd+bwd median each takes; the rest summed in one line. Empty when none was."""
    out = []
    for r in _ordered(rows, shapes):
        ks = r.get("kernels")
        if not ks:
            continue
        total = r.get("fwdbwd_ms")
        if not out:
            out = ["Kernels of one warm forward+backward (torch.profiler; ms per call, launches per call, share of "
                   "the row's fwd+bwd median):", ""]
        out += [f"{r['shape']} / {LABEL.get(r['impl'], r['impl'])} (fwd+bwd median {_num(total, '.3f')} ms):", "",
                "| kernel | ms | launches | share |", "|---|---|---|---|"]
        share = lambda ms: _num(100.0 * ms / total, ".1f") + "%" if total else "-"  # noqa: E731
        for k in ks[:top]:
            out.append(f"| `{k['kernel']}` | {k['ms']:.3f} | {k['launches']:g} | {share(k['ms'])} |")
        rest = ks[top:]
        if rest:
            ms = sum(k["ms"] for k in rest)
            out.append(f"| {len(rest)} others | {ms:.3f} | {sum(k['launches'] for k in rest):g} | {share(ms)} |")
        out.append(f"| all kernels | {sum(k['ms'] for k in ks):.3f} | {sum(k['launches'] for k in ks):g} | "
                   f"{share(sum(k['ms'] for k in ks))} |")
        out.append("")
    return out


def record(meta, rows, checks, shapes):
    """The JSON record: meta, shapes, derived rows, checks."""
    return dict(meta=meta, shapes=shapes, rows=derive(rows, shapes, meta.get("peak_tflops")), checks=checks)


def dumps(rec):
    def fix(x):  # JSON has no NaN/Inf: write them as strings
        if isinstance(x, float) and not math.isfinite(x):
            return str(x)
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [fix(v) for v in x]
        return x
    return json.dumps(fix(rec), indent=1, allow_nan=False)
