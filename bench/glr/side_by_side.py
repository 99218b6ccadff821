#!/usr/bin/env python3
"""glr side by side with its two anchors, in one GPU process on the same inputs: glr through its PyTorch ops
(glr.chunk_gated_delta_rule -> torch.ops.glr.recurrence, autograd in C++), flash-linear-attention 0.6's Triton
path (fla.ops.gated_delta_rule.chunk_gated_delta_rule with FLA_FLASH_QLA=0 and FLA_TILELANG=0), and FlashQLA 0.1.3
(flash_qla.chunk_gated_delta_rule, TileLang kernels, called as fla 0.6 calls it: auto_cp=True).

Per shape and implementation: median ms of the forward (no grad) and of forward+backward (autograd, leaf inputs,
o.backward(do)), CUDA events after warm-up; speedups to each anchor; effective TFLOP/s by DESIGN.md 5's convention
and % of the bf16 matmul peak measured at the start of the same run; memory the forward keeps for the backward
and the peak of forward+backward; the first call's seconds (compilation, autotuning). A correctness cross-check
compares outputs and all five gradients with a float64 recurrence and with each other at small shapes. Where an
implementation cannot run a configuration, its row says why; nothing here fails on a timing.

Run on the GPU machine from the repository root (bench/glr/README.md has the device calls):
    python3 bench/glr/side_by_side.py --prepare     build glr's extension, compile fla's Triton kernels
    python3 bench/glr/side_by_side.py               the whole run; side_by_side.{md,json} under $OUT
Without a GPU: --dry-run (the plan) and --self-test (the tables and JSON from synthetic timings).
"""
import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import side_by_side_report as rep  # noqa: E402
from timing import median_ms  # noqa: E402,F401 - used by the timed loop below

from side_by_side_impls import (T_START, fla_env, glr_build_plan, load_glr, load_impls, log,  # noqa: E402
                                one_line, start_glr_build)

# ---------------------------------------------------------------------------------------------------------------
# Inputs, timing, memory

def make_inputs(s, seed, device="cuda"):
    import torch
    import torch.nn.functional as F
    gen = torch.Generator(device=device).manual_seed(seed)
    B, T, H, HV, K, V = s["B"], s["T"], s["H"], s["HV"], s["K"], s["V"]
    r = lambda *shape: torch.randn(*shape, device=device, generator=gen)  # noqa: E731
    q = r(B, T, H, K).to(torch.bfloat16)
    k = F.normalize(r(B, T, H, K), dim=-1).to(torch.bfloat16)
    v = r(B, T, HV, V).to(torch.bfloat16)
    g = F.logsigmoid(r(B, T, HV) + 3.0).float()  # log-decay <= 0, mostly slow
    beta = torch.sigmoid(r(B, T, HV)).to(torch.bfloat16)
    do = r(B, T, HV, V).to(torch.bfloat16)
    cu = None
    if s["lengths"]:
        offs = [0]
        for n in s["lengths"]:
            offs.append(offs[-1] + n)
        assert offs[-1] == T and B == 1
        cu = torch.tensor(offs, dtype=torch.int64, device=device)
    return dict(q=q, k=k, v=v, g=g, beta=beta, do=do, cu=cu, scale=K ** -0.5)


def leaves(inp):
    return [inp[n].detach().requires_grad_(True) for n in ("q", "k", "v", "g", "beta")]




def matmul_peak_tflops():
    """bf16 torch.matmul 8192^3 on random data: median of 10 after 3 warm-ups."""
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    med, lo, hi, cnt = median_ms(lambda: torch.matmul(a, b), 3, 10, 1e9)
    return 2 * n ** 3 / (med * 1e-3) / 1e12, med


def fwdbwd_call(impl, inp):
    """(leaves, fn): fn runs one forward+backward of impl on fresh leaf copies of inp's tensors, gradients reset."""
    L = leaves(inp)

    def fwdbwd():
        for x in L:
            x.grad = None
        o = impl.fn(*L, inp["scale"], inp["cu"])
        o.backward(inp["do"])
    return L, fwdbwd


def measure(impl, s, inp, args):
    """One (shape, implementation) record: first calls, memory, then timings."""
    import torch
    q, k, v, g, beta, do, cu, scale = (inp[n] for n in ("q", "k", "v", "g", "beta", "do", "cu", "scale"))
    L, fwdbwd = fwdbwd_call(impl, inp)

    def fwd():
        with torch.no_grad():
            return impl.fn(q, k, v, g, beta, scale, cu)

    rec = {}
    t0 = time.perf_counter()
    o = fwd()
    torch.cuda.synchronize()
    rec["first_fwd_s"] = time.perf_counter() - t0
    if not bool(torch.isfinite(o).all()):
        rec["warning"] = "non-finite values in the forward's output"
    del o
    t0 = time.perf_counter()
    fwdbwd()
    torch.cuda.synchronize()
    rec["first_fwdbwd_s"] = time.perf_counter() - t0
    # memory: what the forward keeps for the backward, and the peak of forward+backward above the inputs
    for x in L:
        x.grad = None
    gc.collect()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    o = impl.fn(*L, scale, cu)
    torch.cuda.synchronize()
    rec["saved_bytes"] = torch.cuda.memory_allocated() - base - o.untyped_storage().nbytes()  # o may be a view
    rec["fwd_peak_bytes"] = torch.cuda.max_memory_allocated() - base
    o.backward(do)
    torch.cuda.synchronize()
    rec["fwdbwd_peak_bytes"] = torch.cuda.max_memory_allocated() - base
    warm_call_s = time.perf_counter() - t0  # a third, warm, forward+backward
    del o
    for x in L:
        x.grad = None
    warmup = args.warmup if warm_call_s < 0.5 else 1  # slow calls: already warm, spend the time on timed reps
    f = median_ms(fwd, warmup, args.reps, args.budget_ms)
    b = median_ms(fwdbwd, warmup, args.reps, args.budget_ms)
    rec.update(fwd_ms=f[0], fwd_min=f[1], fwd_max=f[2], fwd_reps=f[3], fwdbwd_ms=b[0], fwdbwd_min=b[1],
               fwdbwd_max=b[2], fwdbwd_reps=b[3])
    if args.kernels:
        rec["kernels"] = kernel_times(fwdbwd, args.kernels)
    return rec


def kernel_times(fn, reps):
    """Where one call's GPU time goes: fn run reps times (already warm) under torch.profiler; each CUDA kernel's
    summed device time over the reps, divided by reps (ms per call), with its launches per call, largest first.
    The profiler's own overhead stretches host gaps, not kernel durations, so the rows are comparable with the
    CUDA-event medians but their sum is below them by whatever the GPU spent idle or in copies."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            name = e.name if len(e.name) <= 120 else e.name[:117] + "..."
            t, n = per.get(name, (0.0, 0))
            per[name] = (t + e.device_time / 1000.0, n + 1)  # device_time: microseconds
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])
    return [dict(kernel=k, ms=t / reps, launches=n / reps) for k, (t, n) in rows]


# ---------------------------------------------------------------------------------------------------------------
# Correctness: a float64 recurrence, independent of all three

def recurrence64(inp):
    """S_t = e^{g_t} (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t, token by token in
    float64 on the GPU, each packed sequence from a zero state; gradients by autograd against do."""
    q, k, v, g, beta = (inp[n].detach().double().requires_grad_(True) for n in ("q", "k", "v", "g", "beta"))
    o = recurrence(q, k, v, g, beta, inp["scale"], inp["cu"])
    (o * inp["do"].double()).sum().backward()
    return dict(o=o.detach(), dq=q.grad, dk=k.grad, dv=v.grad, dg=g.grad, dbeta=beta.grad)


def recurrence(q, k, v, g, beta, scale, cu, span=256):
    """The recurrence in the inputs' dtype, differentiable; o [B, T, HV, V]. Every `span` tokens of a sequence run
    under activation checkpointing (their per-token states recomputed in the backward), so the float64 reference of
    a production-length check (T 4096, 32 value heads: 4 MiB a state) holds one span's states, not every token's."""
    import torch
    from torch.utils.checkpoint import checkpoint
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    grp = HV // H
    qx, kx = q.repeat_interleave(grp, dim=2), k.repeat_interleave(grp, dim=2)  # [B, T, HV, K]
    if cu is None:
        segs = [(slice(None), 0, T)]
    else:
        offs = cu.tolist()
        segs = [(slice(0, 1), offs[i], offs[i + 1]) for i in range(len(offs) - 1)]

    def steps(S, bs, a, e):  # tokens a .. e - 1 from the state S: (the state after them, their outputs)
        outs = []
        for t in range(a, e):
            S = S * torch.exp(g[bs, t])[..., None, None]
            kt = kx[bs, t]
            u = beta[bs, t][..., None] * (v[bs, t] - torch.einsum("bhkv,bhk->bhv", S, kt))
            S = S + kt[..., :, None] * u[..., None, :]
            outs.append(scale * torch.einsum("bhkv,bhk->bhv", S, qx[bs, t]))
        return S, torch.stack(outs, dim=1)

    outs = []
    for bs, a, e in segs:
        S = q.new_zeros(qx[bs].shape[0], HV, K, V)
        for a0 in range(a, e, span):
            e0 = min(e, a0 + span)
            if e - a > span and torch.is_grad_enabled():
                S, o = checkpoint(steps, S, bs, a0, e0, use_reentrant=False)
            else:
                S, o = steps(S, bs, a0, e0)
            outs.append(o)
    if not outs:
        return q.new_zeros(B, 0, HV, V)
    return torch.cat(outs, dim=1)  # [B, T, HV, V]: sequences in token order (packed: B = 1)


def run_impl_once(impl, inp):
    L = leaves(inp)
    o = impl.fn(*L, inp["scale"], inp["cu"])
    o.backward(inp["do"])
    return dict(o=o.detach(), dq=L[0].grad, dk=L[1].grad, dv=L[2].grad, dg=L[3].grad, dbeta=L[4].grad)


def rel(x, ref):
    x, ref = x.double(), ref.double()
    d = (x - ref).norm().item()
    n = ref.norm().item()
    return d / n if n > 0 else d


def check(s, impls, missing, args):
    """Records for one check shape: each implementation against float64 and against each other."""
    import torch
    recs = []
    inp = make_inputs(s, seed=args.seed + 1000)
    t0 = time.perf_counter()
    ref = recurrence64(inp)
    log(f"check {s['name']}: float64 recurrence in {time.perf_counter() - t0:.1f} s")
    got = {}
    for name in rep.IMPLS:
        if name in missing or name not in impls:
            recs.append(dict(check=s["name"], impl=name, against="float64", status="unsupported",
                             reason=missing.get(name, "not asked for")))
            continue
        why = impls[name].limits(s)
        if why:
            recs.append(dict(check=s["name"], impl=name, against="float64", status="unsupported", reason=why))
            continue
        try:
            got[name] = run_impl_once(impls[name], inp)
            torch.cuda.synchronize()
        except Exception as e:
            recs.append(dict(check=s["name"], impl=name, against="float64", status="error", reason=one_line(e)))
            continue
        recs.append(dict(check=s["name"], impl=name, against="float64", status="ok",
                         **{k: rel(got[name][k], ref[k]) for k in rep.GRADS}))
    names = [n for n in rep.IMPLS if n in got]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            recs.append(dict(check=s["name"], impl=a, against=b, status="ok",
                             **{k: rel(got[a][k], got[b][k]) for k in rep.GRADS}))
    del ref, got, inp
    torch.cuda.empty_cache()
    return recs


# ---------------------------------------------------------------------------------------------------------------
# FlashQLA warm-up: TileLang compiles each configuration's kernels on first use (about a minute each); done before
# timing in one process per shape, all in parallel (16 cores on the H200 machine). The compiled kernels land in
# TileLang's disk cache, which the timed process then reads. TileLang 0.1.15 saves a cache entry by staging it and
# renaming it into place, so two processes that compile one kernel at once waste CPU but never corrupt an entry.

def flashqla_groups(shapes):
    """One warm-up process per shape FlashQLA can run (K = V = 128)."""
    return [[s["name"]] for s in shapes if s["K"] == 128 and s["V"] == 128]


def warm_flashqla_parallel(args, shapes):
    groups = flashqla_groups(shapes)
    if not groups:
        return []
    log(f"FlashQLA warm-up: {len(groups)} processes compile TileLang kernels, one per shape, in parallel")
    procs = []
    for grp in groups:
        cmd = [sys.executable, os.path.abspath(__file__), "--warm-only", "--impls", "flashqla", "--shapes",
               ",".join(grp), "--anchors-site", args.anchors_site, "--out", args.out]
        lf = open(os.path.join(tempfile.gettempdir(), f"glr_warm_{grp[0]}.log"), "w")
        procs.append((grp, subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT), lf, time.perf_counter()))
    res = []
    for grp, p, lf, t0 in procs:
        try:
            rc = p.wait(timeout=max(10.0, args.warm_timeout_s - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        lf.close()
        with open(lf.name) as fh:
            tail = [ln.split("] ", 1)[-1] for ln in fh.read().splitlines() if "] warm " in ln]
        res.append(dict(shapes=grp, rc=rc, wall_s=time.perf_counter() - t0, lines=tail))
        log(f"FlashQLA warm-up {','.join(grp)}: rc {rc}, {time.perf_counter() - t0:.0f} s; " + " ; ".join(tail))
    return res


def warm_only(args, shapes, impls, missing):
    """First calls (fwd, fwd+bwd) per shape and implementation, untimed: compiles and autotunes."""
    import torch
    for s in shapes:
        for name, impl in impls.items():
            if time.perf_counter() > T_START + args.budget_s:
                log(f"warm {s['name']} {name}: skipped, time budget ({args.budget_s:.0f} s) spent")
                continue
            why = impl.limits(s)
            if why:
                log(f"warm {s['name']} {name}: skipped ({why})")
                continue
            try:
                inp = make_inputs(s, args.seed)
                t0 = time.perf_counter()
                with torch.no_grad():
                    impl.fn(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], inp["scale"], inp["cu"])
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                run_impl_once(impl, inp)
                torch.cuda.synchronize()
                log(f"warm {s['name']} {name}: first fwd {t1 - t0:.1f} s, first fwd+bwd "
                    f"{time.perf_counter() - t1:.1f} s")
                del inp
                torch.cuda.empty_cache()
            except Exception as e:
                log(f"warm {s['name']} {name}: {one_line(e)}")
    for name, why in missing.items():
        log(f"warm {name}: {why}")


# ---------------------------------------------------------------------------------------------------------------

def profile_pass(args, shapes, notes):
    """Each (shape, implementation): two warm forward+backward calls, then one between cudaProfilerStart and
    cudaProfilerStop, so a profiler started with collection off (ncu --profile-from-start off) sees exactly one
    warm forward+backward per pair. bench/glr/ncu_kernels.sh runs it once per pair, so each profile is one pair's."""
    import torch
    impls, missing = load_impls(args, notes)
    for s in shapes:
        inp = make_inputs(s, args.seed)
        for name in rep.IMPLS:
            if name not in args.impls.split(","):
                continue
            why = missing.get(name) or (impls[name].limits(s) if name in impls else "not loaded")
            if why:
                log(f"profile {s['name']} {name}: not run ({why})")
                continue
            _, fwdbwd = fwdbwd_call(impls[name], inp)
            for _ in range(2):
                fwdbwd()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            fwdbwd()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            log(f"profile {s['name']} {name}: one warm forward+backward recorded")
        del inp
        gc.collect()
        torch.cuda.empty_cache()
    return 0


def select(all_shapes, spec):
    if spec in ("all", ""):
        return list(all_shapes)
    if spec == "none":
        return []
    names = spec.split(",")
    unknown = [n for n in names if n not in {s["name"] for s in all_shapes}]
    if unknown:
        raise SystemExit(f"unknown shape(s) {unknown}; known: {[s['name'] for s in all_shapes]}")
    return [s for s in all_shapes if s["name"] in names]


def parse_args(argv=None):
    anchors = os.path.join(os.environ.get("GLR_ANCHORS", "/tmp/glr-anchors"), "site")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for side_by_side.{md,json} (default $OUT, else build-bench/; "
                    "--self-test: a new temporary folder)")
    ap.add_argument("--anchors-site", default=anchors, help="where anchors/install.sh put the wheels")
    ap.add_argument("--glr-site", default=os.path.join(ROOT, "build-py", "glr-gpu"),
                    help="glr's built package (python/glr/gpu_check.sh's folder)")
    ap.add_argument("--glr-build", choices=["auto", "always", "never"], default="auto",
                    help="auto: build glr's extension when missing or built from other sources")
    ap.add_argument("--impls", default="glr,fla,flashqla")
    ap.add_argument("--shapes", default="all", help="comma-separated names, all, or none; --dry-run lists them")
    ap.add_argument("--checks", default="all", help="check shapes (comma-separated), all, or none")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-ms", type=float, default=8000.0, help="per timing: fewer reps beyond this")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="whole run: rows not started by then are reported as skipped")
    ap.add_argument("--no-warm", action="store_true", help="no parallel FlashQLA warm-up before timing")
    ap.add_argument("--warm-timeout-s", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="also profile N warm forward+backward calls per row (torch.profiler): ms per call of "
                    "every kernel, in the report's kernel table (default 0: none)")
    ap.add_argument("--profile-pass", action="store_true",
                    help="for bench/glr/ncu_kernels.sh: per shape and implementation two warm forward+backward "
                         "calls, then one between cudaProfilerStart and Stop (what ncu --profile-from-start off "
                         "records); no timing, no checks")
    ap.add_argument("--prepare", action="store_true",
                    help="build glr and make every loadable implementation's first calls (compile, autotune); no "
                         "timing")
    ap.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU")
    ap.add_argument("--self-test", action="store_true", help="tables and JSON from synthetic timings; no GPU")
    a = ap.parse_args(argv)
    if a.kernels < 0:
        ap.error(f"--kernels: {a.kernels} calls to profile; use 0 (none) or more")
    if a.out is None and not a.self_test:
        a.out = os.environ.get("OUT") or os.path.join(ROOT, "build-bench")
    return a


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "?"
    except Exception:
        return "?"


def static_limits(name, s):
    if name == "flashqla" and (s["K"] != 128 or s["V"] != 128):
        return "FlashQLA 0.1.3 takes K = V = 128 only"
    return None


def dry_run(args, shapes, checks):
    print(f"out: {args.out}\nanchors site: {args.anchors_site}\nglr site: {args.glr_site} (build {args.glr_build})")
    print("\n| shape | tokens | B T H HV K V | GFLOP fwd | GFLOP fwd+bwd | plan |\n|---|---|---|---|---|---|")
    for s in shapes:
        f, b = rep.flops(s)
        plan = ", ".join(f"{n}: {static_limits(n, s) or 'run'}" for n in args.impls.split(","))
        print(f"| {s['name']} | {rep.tokens(s)} | {s['B']} {s['T']} {s['H']} {s['HV']} {s['K']} {s['V']} | "
              f"{f / 1e9:.1f} | {(f + b) / 1e9:.1f} | {plan} |")
    print("\nchecks: " + (", ".join(c["name"] for c in checks) or "none"))
    print("FlashQLA warm-up processes (one per shape): " + str(flashqla_groups(shapes + checks)))
    return 0


def synthetic(shapes, checks):
    """Rows and checks as a run would give them, with made-up numbers, every status included."""
    rows, cks = [], []
    base = {"glr": 2.0, "fla": 1.0, "flashqla": 0.5}
    for i, s in enumerate(shapes):
        scale = rep.tokens(s) * s["HV"] / (8 * 4096 * 16)
        for name in rep.IMPLS:
            if static_limits(name, s):
                rows.append(rep.result(s["name"], name, "unsupported", static_limits(name, s)))
            elif name == "glr" and i == len(shapes) - 1:
                rows.append(rep.result(s["name"], name, "error", "RuntimeError: glr.fwd: synthetic failure"))
            elif name == "fla" and i == len(shapes) - 1:
                rows.append(rep.result(s["name"], name, "skipped", "time budget (540 s) spent"))
            else:
                t = base[name] * scale
                rows.append(rep.result(s["name"], name, fwd_ms=t, fwdbwd_ms=4 * t, first_fwd_s=0.1,
                                       first_fwdbwd_s=60.0 if name == "flashqla" else 0.5, saved_bytes=2 ** 30,
                                       fwdbwd_peak_bytes=3 * 2 ** 30))
    for c in checks:
        for name in rep.IMPLS:
            cks.append(dict(check=c["name"], impl=name, against="float64", status="ok",
                            **{g: 3e-3 for g in rep.GRADS}))
        cks.append(dict(check=c["name"], impl="glr", against="fla", status="ok", **{g: 4e-3 for g in rep.GRADS}))
        cks.append(dict(check=c["name"], impl="fla", against="float64", status="error", reason="synthetic"))
        cks.append(dict(check=c["name"], impl="flashqla", against="float64", status="ok",
                        **dict({g: 1e-3 for g in rep.GRADS}, dg=float("nan"))))
    return rows, cks


def write(args, meta, rows, checks, shapes):
    os.makedirs(args.out, exist_ok=True)
    md = rep.report(meta, rows, checks, shapes)
    with open(os.path.join(args.out, "side_by_side.md"), "w") as fh:
        fh.write(md)
    with open(os.path.join(args.out, "side_by_side.json"), "w") as fh:
        fh.write(rep.dumps(rep.record(meta, rows, checks, shapes)))
    return md


def self_test(args):
    shapes, checks = rep.SHAPES, rep.CHECK_SHAPES
    rows, cks = synthetic(shapes, checks)
    meta = dict(device="(synthetic)", torch="-", triton="-", fla="0.6.0", flash_qla="0.1.3", tilelang="0.1.15",
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=git_commit(), peak_tflops=780.0,
                notes=["synthetic timings: --self-test exercises the tables and the JSON, it measures nothing"])
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="side_by_side_selftest_")
    md = write(args, meta, rows, cks, shapes)
    print(md)
    import json
    with open(os.path.join(args.out, "side_by_side.json")) as fh:
        back = json.load(fh)
    assert len(back["rows"]) == len(shapes) * len(rep.IMPLS)
    print(f"\nself-test: wrote {args.out}/side_by_side.md and .json ({len(back['rows'])} rows)")
    return 0


def main(argv=None):
    args = parse_args(argv)
    # a warm-up process may be given a check shape too
    shapes = select(rep.SHAPES + rep.CHECK_SHAPES if args.warm_only else rep.SHAPES, args.shapes)
    checks = select(rep.CHECK_SHAPES, args.checks)
    if args.dry_run:
        return dry_run(args, shapes, checks)
    if args.self_test:
        return self_test(args)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TILELANG_CACHE_DIR", os.path.join(os.path.dirname(args.anchors_site), "tilelang-cache"))
    notes = fla_env()
    # any fla backend that takes a call says so (with FLA_FLASH_QLA=0, FLA_TILELANG=0 none should); the messages
    # go to stderr and into the JSON (meta.fla_backend_log)
    import logging
    logging.basicConfig(format="%(name)s: %(message)s")
    fla_backend_log = []

    class Keep(logging.Handler):
        def emit(self, record):
            fla_backend_log.append(record.getMessage())

    logging.getLogger("fla.backends").setLevel(logging.INFO)
    logging.getLogger("fla.backends").addHandler(Keep())
    import torch
    if not torch.cuda.is_available():
        print("side_by_side.py: no CUDA device (use --dry-run or --self-test here)", file=sys.stderr)
        return 2
    if args.warm_only:
        impls, missing = load_impls(args, notes)
        warm_only(args, shapes, impls, missing)
        return 0
    if args.profile_pass:
        return profile_pass(args, shapes, notes)
    if args.prepare:
        # glr's build (CPU) runs while the anchors compile and autotune (GPU, some CPU); then glr's first calls
        want = args.impls.split(",")
        build, glr_missing = None, {}
        if "glr" in want:
            needed, why, _ = glr_build_plan(args.glr_site, args.glr_build)
            if needed:
                build = start_glr_build(args.glr_site, why, args.out)
        args.impls = ",".join(n for n in want if n != "glr")
        impls, missing = load_impls(args, notes)
        warm_only(args, shapes + checks, impls, missing)
        if "glr" in want:
            try:
                glr_impl = {"glr": load_glr(args, notes, build)}
            except Exception as e:
                glr_impl, glr_missing = {}, {"glr": f"glr not loaded: {one_line(e)}"}
            warm_only(args, shapes + checks, glr_impl, glr_missing)
        log("prepare done")
        return 0

    import triton
    deadline = T_START + args.budget_s
    peak, peak_ms = matmul_peak_tflops()
    log(f"bf16 matmul 8192^3: {peak_ms:.3f} ms, {peak:.0f} TFLOP/s")
    # imports first (and glr's build if needed): tilelang's one-time set-up happens here, not in the warm-ups
    impls, missing = load_impls(args, notes)
    warm = []
    if not args.no_warm and "flashqla" in impls:
        warm = warm_flashqla_parallel(args, shapes + checks)
        for w in warm:
            notes.append(f"FlashQLA warm-up (TileLang compiles, one process per shape, in parallel before "
                         f"timing) {', '.join(w['shapes'])}: rc {w['rc']}, {w['wall_s']:.0f} s wall; "
                         + "; ".join(w["lines"]))
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=git_commit(), peak_tflops=peak,
                peak_ms=peak_ms, reps=args.reps, warmup=args.warmup,
                env={k: os.environ.get(k) for k in ("FLA_FLASH_QLA", "FLA_TILELANG", "TILELANG_CACHE_DIR")},
                impls={n: i.version for n, i in impls.items()}, missing=missing, flashqla_warmup=warm,
                fla_guard_bypassed=bool(getattr(impls.get("fla"), "bypassed", False)),
                fla_backend_log=fla_backend_log,
                notes=notes + ["fla runs with FLA_FLASH_QLA=0 and FLA_TILELANG=0: its Triton kernels alone",
                               "FlashQLA is called as fla 0.6 calls it (flash_qla.chunk_gated_delta_rule, "
                               "auto_cp=True)"])
    for name, lib in (("fla", "fla"), ("flash_qla", "flash_qla"), ("tilelang", "tilelang")):
        meta[name] = getattr(sys.modules.get(lib), "__version__", "-")
    print(f"# {meta['device']} | torch {meta['torch']} | triton {meta['triton']} | " +
          " | ".join(f"{n}: {v}" for n, v in meta["impls"].items()), flush=True)

    rows, cks = [], []
    # the checks first: small, and what the timings of an implementation with wrong gradients are worth
    for c in checks:
        if time.perf_counter() > deadline:
            cks.append(dict(check=c["name"], impl="-", against="float64", status="skipped",
                            reason=f"time budget ({args.budget_s:.0f} s) spent"))
            continue
        try:
            cks += check(c, impls, missing, args)
        except Exception as e:
            cks.append(dict(check=c["name"], impl="-", against="float64", status="error", reason=one_line(e)))
            traceback.print_exc()
        write(args, meta, rows, cks, shapes)
    for s in shapes:
        inp = None
        for name in rep.IMPLS:
            if name not in args.impls.split(","):
                continue
            if name in missing:
                rows.append(rep.result(s["name"], name, "unsupported", missing[name]))
                continue
            why = impls[name].limits(s)
            if why:
                rows.append(rep.result(s["name"], name, "unsupported", why))
                continue
            if time.perf_counter() > deadline:
                rows.append(rep.result(s["name"], name, "skipped", f"time budget ({args.budget_s:.0f} s) spent"))
                continue
            try:
                if inp is None:
                    inp = make_inputs(s, args.seed)  # the same tensors for every implementation
                r = measure(impls[name], s, inp, args)
                try:
                    path = impls[name].describe(inp)
                except Exception as e:  # noqa: BLE001 - a note, never the row's result
                    path = f"path unknown: {one_line(e)}"
                if path:
                    r["path"] = path
                    log(f"{s['name']} {name}: {path}")
                rows.append(rep.result(s["name"], name, **r))
                log(f"{s['name']} {name}: fwd {r['fwd_ms']:.3f} ms, fwd+bwd {r['fwdbwd_ms']:.3f} ms, saved "
                    f"{r['saved_bytes'] / 2**20:.0f} MiB, first calls {r['first_fwd_s']:.1f} / "
                    f"{r['first_fwdbwd_s']:.1f} s")
            except Exception as e:
                rows.append(rep.result(s["name"], name, "error", one_line(e)))
                log(f"{s['name']} {name}: {one_line(e)}")
                traceback.print_exc()
            gc.collect()
            torch.cuda.empty_cache()
        del inp
        torch.cuda.empty_cache()
        write(args, meta, rows, cks, shapes)  # after every shape, so a call cut short still leaves its rows
    md = write(args, meta, rows, cks, shapes)
    print("\n" + md, flush=True)
    log(f"done; {args.out}/side_by_side.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
