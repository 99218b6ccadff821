"""Summary tables, the four defences' tables, and the HTML report: from results files alone (no torch, no
matplotlib: plots are inline SVG written here), so the report renders on any machine."""
from __future__ import annotations

import html
import math
import os
import random
import time
from collections import Counter, defaultdict

from .classify import (FAILING, GATES as KGATE_GATES, REJECTS, classification, counted_failure, deeper_pass,
                       engine_classification, fails_at_scale, finite_ratio, gate_family)
from .results import _parse_lines, find_records, plain_name, read_results, stem

SCALES = (1, 10, 100, 1000)


def load(paths) -> list[dict]:
    recs = []
    for p in paths:
        recs.extend(read_results(p))
    return recs


def compile_records(paths) -> list[dict]:
    """The compile jobs' records kept beside each results file (<stem>.compile.jsonl), where there are some."""
    out = []
    for p in paths:
        c = stem(p) + ".compile.jsonl"
        if find_records(c):
            out.extend(read_results(c))
    return out


def audited(recs):
    return [r for r in recs if r.get("status") == "ok"]


def gate(r, name):
    return next((g for g in r.get("gates", []) if g.get("gate") == name), None)


def pct(n, d):
    return f"{100.0 * n / d:.1f}%" if d else "-"


def table(headers, rows) -> str:
    cols = [headers] + [[str(c) for c in row] for row in rows]
    w = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = lambda r: "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r))  # noqa: E731
    return "\n".join([line(headers), "  ".join("-" * x for x in w)] + [line(r) for r in cols[1:]])


# ---- the numbers ------------------------------------------------------------------------------------------

def summary(recs) -> dict:
    aud = audited(recs)
    classes = Counter(classification(r) for r in aud)
    status = Counter(r.get("status") for r in recs)
    base_pass = [r for r in aud if (gate(r, "baseline") or {}).get("verdict") == "PASS"]
    base_fail = [r for r in aud if (gate(r, "baseline") or {}).get("verdict") in FAILING]
    kg_reject = lambda r: classification(r) in REJECTS  # noqa: E731
    per_gate = {}
    # the bounds gate's compute-sanitizer passes (bounds/memcheck, ...: kernelbench/sanitizer.py), where run
    passes = sorted({str(g.get("gate")) for r in aud for g in r.get("gates", []) if deeper_pass(g.get("gate"))})
    for g in KGATE_GATES + passes + ["baseline", "public_harness"]:
        c = Counter((gate(r, g) or {}).get("verdict", "-") for r in aud)
        per_gate[g] = c
    per_level = defaultdict(Counter)
    for r in aud:
        per_level[str(r.get("level"))][classification(r)] += 1
        per_level[str(r.get("level"))]["audited"] += 1
    downgrades = Counter((gate(r, "oracle") or {}).get("precision_label") for r in aud)
    not_counted = Counter(g["gate"] for r in aud for g in r.get("gates", [])
                          if g.get("verdict") in FAILING and not counted_failure(g))
    # A gate's own findings: its counted failures (a tolerance error the oracle gate reports at the same
    # magnitude is counted once, under oracle; an out-of-domain finding is not counted at all).
    counted = Counter(g["gate"] for r in aud for g in r.get("gates", []) if counted_failure(g))
    downgrades.pop(None, None)
    secs = [r.get("row_seconds", r.get("seconds", 0)) or 0 for r in aud]
    # compile_seconds of a verification record: what its own workers compiled (a cache miss), inside its
    # row-seconds; compilation apart from them is in the compile jobs' records (compile_records).
    comp = [r.get("compile_seconds", 0) or 0 for r in aud]
    return {"rows": len(recs), "audited": len(aud), "status": status, "classes": classes,
            "base_accept_kgate_reject": sum(1 for r in base_pass if kg_reject(r)),
            "base_reject_kgate_accept": sum(1 for r in base_fail if classification(r) == "clean"),
            "base_pass": len(base_pass), "base_fail": len(base_fail), "per_gate": per_gate, "per_level": per_level,
            "downgrades": downgrades, "not_counted": not_counted, "counted": counted, "row_seconds": sum(secs), "compile_seconds": sum(comp),
            # rows whose candidate's own extension failed to build: what ran, and was judged, is its fallback
            "ext_failed": Counter(classification(r) for r in aud if r.get("extension_build_failed")),
            # torch rows whose candidate-owned memory had no guard zones (issue 14, Deliver 2): the guard
            # allocator was turned off for the row (cuDNN asked it for what a pluggable allocator cannot answer)
            # or was not there; a write past the candidate's own allocations went unseen by bounds (coverage
            # still saw poison, put into torch's caching allocator instead: fw_torch.poison_allocator)
            "unguarded": Counter(classification(r) for r in aud if unguarded(r)),
            # of the rows the guard allocator failed, those whose guarded gates (coverage, bounds) got guard
            # zones in a second pass with cuDNN's benchmark mode held off (kernelbench/rowjob.py _guarded_pass)
            "guarded_second_pass": Counter(classification(r) for r in aud if guarded_second_pass(r)),
            # rows whose bounds gate's calls ran again under compute-sanitizer (a bounds/<tool> record that is
            # not a SKIP: the tool missing, or no time left in the row)
            "sanitizer_pass": Counter(classification(r) for r in aud if sanitizer_ran(r))}


def sanitizer_ran(rec: dict) -> bool:
    """An audited row with a compute-sanitizer pass that ran (kernelbench/sanitizer.py): a bounds/<tool>
    gate record whose verdict is not SKIP."""
    return any(deeper_pass(g.get("gate")) and g.get("verdict") != "SKIP" for g in rec.get("gates", []))


def unguarded(rec: dict) -> bool:
    """A torch row whose candidate's own allocations ran without the guard allocator (its record's
    `guard_allocator` is "off: ..." or "no guard allocator (...)"; numpy rows carry none: malloc is never
    guarded, docs/audit.md). A row whose guarded gates got the guard allocator in a second pass is not one
    (its `guard_allocator` starts "on for coverage, bounds: ..."; guarded_second_pass)."""
    if guarded_second_pass(rec):
        return False
    note = str(rec.get("guard_allocator") or "")
    return note.startswith("off") or note.startswith("no guard allocator")


def guarded_second_pass(rec: dict) -> bool:
    """A row run on torch's caching allocator (the guard allocator failed it) whose bounds and coverage
    records come from a second pass with the guard allocator on and cuDNN's benchmark mode held off."""
    return bool((rec.get("guarded_pass") or {}).get("merged"))


def summary_text(paths) -> str:
    per_path = {p: read_results(p) for p in paths}
    recs = [r for p in paths for r in per_path[p]]
    s = summary(recs)
    n = s["audited"]
    out = [f"kgate audit of {', '.join(map(plain_name, paths))}: {s['rows']} rows, {n} audited", ""]
    out.append(table(["row status", "rows"], sorted(s["status"].items(), key=lambda kv: -kv[1])))
    out.append("")
    c = s["classes"]
    out.append(table(["classification (audited rows)", "kernels", "share"], [
        ["broken beyond tolerance", c["broken"], pct(c["broken"], n)],
        ["at least one violation (incl. broken)", c["broken"] + c["violation"], pct(c["broken"] + c["violation"], n)],
        ["incomplete (nothing failed, a gate could not run)", c["incomplete"], pct(c["incomplete"], n)],
        ["clean", c["clean"], pct(c["clean"], n)]]))
    out.append("")
    out.append(table(["baseline vs kgate", "kernels"], [
        ["baseline accepts, kgate rejects", s["base_accept_kgate_reject"]],
        ["baseline rejects, kgate accepts", s["base_reject_kgate_accept"]],
        ["baseline accepts (of audited)", s["base_pass"]], ["baseline rejects (of audited)", s["base_fail"]]]))
    out.append("")
    rows = []
    for g, cnt in s["per_gate"].items():
        rows.append([g, s["counted"][g] if gate_family(g) in KGATE_GATES else "-", cnt["PASS"], cnt["FAIL"], cnt["CRASH"],
                     cnt["TIMEOUT"], cnt["REFUSED"], cnt["SKIP"], cnt["ERROR"], s["not_counted"][g]])
    out.append(table(["gate", "its own findings", "PASS", "FAIL", "CRASH", "TIMEOUT", "REFUSED", "SKIP", "ERROR",
                      "not counted (attributed or out of domain)"], rows))
    out.append("")
    out.append(table(["level", "audited", "broken", "violation", "incomplete", "clean"],
                     [[lv, c["audited"], c["broken"], c["violation"], c["incomplete"], c["clean"]]
                      for lv, c in sorted(s["per_level"].items())]))
    if s["downgrades"]:
        out.append("")
        out.append(table(["oracle failures matching a lower precision", "kernels"], list(s["downgrades"].items())))
    for what, by_class in (("audited rows whose candidate's CUDA extension failed to build here, so that its "
                            "fallback was judged", s["ext_failed"]),
                           ("audited rows whose candidate's own allocations had no guard zones (guard allocator "
                            "off: bounds saw only the engine's buffers)", s["unguarded"]),
                           ("audited rows whose guarded gates (coverage, bounds) got guard zones through a second "
                            "pass (the guard allocator failed the row's run, which stands for every other gate; "
                            "cuDNN's benchmark mode held off)", s["guarded_second_pass"]),
                           ("audited rows whose bounds gate's calls ran again under compute-sanitizer (the "
                            "bounds/<tool> rows of the gate table; a FAIL there is a bounds finding)",
                            s["sanitizer_pass"])):
        if by_class:
            out.append("")
            out.append(f"{what}: {sum(by_class.values())} of {n} ("
                       + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())) + ")")
    out.append("")
    rate = n / (s["row_seconds"] / 60) if s["row_seconds"] else float("nan")
    comp = compile_records(paths)
    apart = (f"compile jobs apart: {len(comp)}, {sum(r.get('seconds', 0) or 0 for r in comp):.0f} s, of which "
             f"{sum(r.get('compile_seconds', 0) or 0 for r in comp):.0f} s building extensions" if comp
             else "no compile records beside the results")
    out.append(f"time: {s['row_seconds']:.0f} row-seconds for {n} audited rows ({rate:.2f} rows per row-minute; "
               f"divide by the parallelism for wall time), of which {s['compile_seconds']:.0f} s compiling in "
               f"the rows' own workers; {apart}")
    cost = cost_text(recs)
    if cost:
        out.append("")
        out.append(cost)
    mem = gpu_memory_text(recs)
    if mem:
        out.append("")
        out.append(mem)
    for p in paths:
        spans = throughput(p, per_path[p])
        if spans:
            out.append("")
            out.append(throughput_text(p, spans))
    return "\n".join(out)


# ---- where a row's time goes -----------------------------------------------------------------------------
# Each engine gate's record carries what it spent (docs/report.md: candidate_calls, oracle_evaluations,
# oracle_reuses, reference_evaluations, candidate_seconds, oracle_seconds, draw_seconds); the row's `phases`
# the rest (worker start, builds, baseline, public harness). docs/audit.md's cost model reads this table.

COST_FIELDS = ("cases", "shrink_runs", "candidate_calls", "oracle_evaluations", "oracle_reuses", "reference_evaluations",
               "label_evaluations", "input_draws", "seconds", "candidate_seconds", "oracle_seconds", "draw_seconds")


def cost_rows(recs) -> list[list]:
    """Per engine gate, summed over the audited rows whose records carry the counters: rows, then COST_FIELDS,
    then the seconds left to kgate's own host work (seconds - candidate - oracle - draws)."""
    sums: dict = {}
    rows_of: dict = defaultdict(int)
    for r in audited(recs):
        for g in r.get("gates") or []:
            if "candidate_calls" not in g:
                continue
            name = g.get("gate")
            acc = sums.setdefault(name, dict.fromkeys(COST_FIELDS, 0.0))
            rows_of[name] += 1
            for f in COST_FIELDS:
                v = g.get(f)
                acc[f] += v if isinstance(v, (int, float)) else 0
    out = []
    for name, a in sums.items():
        host = a["seconds"] - a["candidate_seconds"] - a["oracle_seconds"] - a["draw_seconds"]
        out.append([name, rows_of[name]] + [int(a[f]) if not f.endswith("seconds") else round(a[f], 1)
                                             for f in COST_FIELDS] + [round(host, 1)])
    return out


def cost_text(recs) -> str:
    rows = cost_rows(recs)
    if not rows:
        return ""
    n = max(r[1] for r in rows)
    tot = [sum(r[i] for r in rows) for i in range(2, len(rows[0]))]
    rows.append(["every gate", n] + [round(t, 1) if isinstance(t, float) else t for t in tot])
    phases: dict = defaultdict(float)
    for r in audited(recs):
        if any("candidate_calls" in g for g in r.get("gates") or []):
            for k, v in (r.get("phases") or {}).items():
                phases[k] += v if isinstance(v, (int, float)) else 0
    head = (f"where the audited rows' time went ({n} rows with per-gate counters): phases "
            + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])))
    return head + "\n" + table(["gate", "rows", "cases", "shrink runs", "candidate calls", "oracle runs", "oracle memo hits",
                                 "reference runs", "label runs", "input draws", "seconds", "in candidate",
                                 "in oracle", "drawing", "kgate host"], rows)


# ---- GPU memory admission -----------------------------------------------------------------------------------
# A torch audit's records carry `gpu` (audit.py, scheduler.run_jobs): the row's estimate before it started and
# where it came from (gpumem.estimate: observed, contract, source, level, compile job), how it was admitted
# (beside: verify jobs running when it started; waited_s; alone; passed: the held row it started past), and
# peak_bytes, the most its processes held on the GPU (the driver's NVML readings).

def _q(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def gpu_memory_rows(recs) -> list[list]:
    """Per estimate source: rows, rows with a measured peak, the ratio peak / estimate (median, 90th percentile,
    largest), rows whose peak passed their estimate, and rows out of memory beside others."""
    by: dict = defaultdict(list)
    for r in recs:
        g = r.get("gpu")
        if isinstance(g, dict) and isinstance(g.get("estimate_bytes"), int):
            by[g.get("estimate_from") or "?"].append(r)
    rows = []
    for src, rs in sorted(by.items()):
        ratios = [r["gpu"]["peak_bytes"] / r["gpu"]["estimate_bytes"] for r in rs
                  if isinstance(r["gpu"].get("peak_bytes"), int) and r["gpu"]["estimate_bytes"] > 0]
        rows.append([src, len(rs), len(ratios), f"{_q(ratios, 0.5):.2f}" if ratios else "-",
                     f"{_q(ratios, 0.9):.2f}" if ratios else "-", f"{max(ratios):.2f}" if ratios else "-",
                     sum(1 for x in ratios if x > 1), sum(1 for r in rs if r.get("status") == "gpu_out_of_memory")])
    return rows


def gpu_memory_text(recs) -> str:
    rows = gpu_memory_rows(recs)
    if not rows:
        return ""
    gs = [r["gpu"] for r in recs if isinstance(r.get("gpu"), dict) and "estimate_bytes" in r["gpu"]]
    waited = [g["waited_s"] for g in gs if isinstance(g.get("waited_s"), (int, float))]
    peaks = [g["peak_bytes"] for g in gs if isinstance(g.get("peak_bytes"), int)]
    head = (f"GPU memory admission: {len(gs)} rows with an estimate; {sum(1 for g in gs if g.get('beside'))} "
            f"admitted beside other rows, {sum(1 for g in gs if g.get('alone'))} started alone after waiting, "
            f"{sum(1 for g in gs if g.get('passed'))} started past a held row; {len(waited)} waited "
            f"{sum(waited):.0f} s in all; largest peak {max(peaks) / 2**30:.1f} GiB" if peaks else
            f"GPU memory admission: {len(gs)} rows with an estimate, no peak measured")
    return head + "\n" + table(["estimate from", "rows", "peak measured", "peak/estimate median", "p90", "max",
                                "peak above estimate", "out of memory beside others"], rows)


# ---- throughput ----------------------------------------------------------------------------------------------
# The one definition of the audit's throughput (docs/perf.md uses it): per driver run (one `kgate audit` call,
# told apart by its pid in the attempts journal `<stem>.attempts.jsonl`), the wall seconds from its first
# attempt's start to its last attempt's end, and the rows whose current record it wrote in that span
# (record `written_at` inside it): rows finished (any status; a row without a candidate gets its record
# before the first attempt and is not counted), and of them audited (status ok); and the compile and verify
# attempts it started. Rates are per wall minute of that span; "all" sums the spans and the rows. A run that
# started no verify attempt is a compile-only run (`kgate audit --compile-only`); where there is one, the line
# "verifying runs" sums the others: the rate with compilation apart.

def throughput(results_path: str, recs: list[dict]) -> list[dict]:
    """The spans of the runs that wrote results_path's records `recs` (see above)."""
    journal = stem(results_path) + ".attempts.jsonl"
    if not find_records(journal):
        return []
    runs: dict = {}
    pid_of: dict = {}
    kinds: dict = defaultdict(Counter)
    for _, e, _ in _parse_lines(journal):
        if e is None or not isinstance(e.get("t"), (int, float)):
            continue
        if e.get("event") == "start":
            pid_of[e.get("id")] = e.get("pid")
            kinds[e.get("pid")][e.get("kind")] += 1
        pid = e.get("pid") if e.get("event") == "start" else pid_of.get(e.get("id"))
        if pid is None:
            continue
        lo, hi = runs.get(pid, (e["t"], e["t"]))
        runs[pid] = (min(lo, e["t"]), max(hi, e["t"]))
    mine = [r for r in recs if isinstance(r.get("written_at"), (int, float))]
    out = []
    for pid, (lo, hi) in sorted(runs.items(), key=lambda kv: kv[1][0]):
        done = [r for r in mine if lo <= r["written_at"] <= hi + 1.0]
        out.append({"pid": pid, "start": lo, "seconds": hi - lo, "rows": len(done),
                    "audited": sum(1 for r in done if r.get("status") == "ok"),
                    "compile": kinds[pid]["compile"], "verify": kinds[pid]["verify"]})
    return out


def throughput_text(path: str, spans: list[dict]) -> str:
    def rate(n, secs):
        return f"{60.0 * n / secs:.1f}" if secs > 0 else "-"
    def line(name, group):
        secs, n, a = (sum(s[k] for s in group) for k in ("seconds", "rows", "audited"))
        return [name, f"{secs:.0f}", sum(s.get("compile", 0) for s in group), sum(s.get("verify", 0) for s in group),
                n, a, rate(n, secs), rate(a, secs)]
    def compile_only(s):  # a run that started compile jobs and no verify job
        return bool(s.get("compile")) and not s.get("verify")
    rows = [line(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(s["start"]))
                 + (" compile only" if compile_only(s) else ""), [s]) for s in spans]
    rows.append(line("all", spans))
    verifying = [s for s in spans if not compile_only(s)]
    if len(verifying) < len(spans):
        rows.append(line("verifying runs", verifying))
    return (f"throughput ({os.path.basename(stem(path))}.attempts.jsonl: each audit run from its first attempt to "
            f"its last, the rows whose record it wrote)\n"
            + table(["run (UTC)", "wall s", "compile jobs", "verify jobs", "rows finished", "audited", "rows/min",
                     "audited/min"], rows))


def sweep_rows(recs):
    """Per tolerance multiplier m: kernels with a counted gate failure that survives x m, of them those the
    engine classified broken, and the counted tolerance failures (error ratio > m). The classes stay the
    engine's (x1); a multiplier only reads each failure's error ratio."""
    aud = audited(recs)
    rows = []
    for m in SCALES:
        failing = [r for r in aud if any(fails_at_scale(g, m) for g in r.get("gates", []))]
        tol = sum(1 for r in aud for g in r.get("gates", []) if fails_at_scale(g, m)
                  and isinstance(g.get("error_ratio"), (int, float)) and not math.isinf(g["error_ratio"]))
        rows.append([f"x{m}", len(failing), sum(1 for r in failing if classification(r) == "broken"), tol])
    return rows


def sweep_text(paths) -> str:
    recs = load(paths)
    return ("Defence 2, threshold sweep: every tolerance multiplied by m (failures with no bound behind them "
            "unaffected; classes are the engine's at x1)\n" +
            table(["tolerance", "kernels failing", "of them broken (engine)", "tolerance-gate failures"],
                  sweep_rows(recs)))


# Near the line. Where a tolerance ratio decides a kernel's class (a FAIL of oracle, shapes or accumulation at or
# past 100x its bound is broken, below it a violation: docs/report.md), the ratio is the largest error a few random
# draws and a shrunk case found, and another run's draws can find a larger or a smaller one (the 2026-12-07 rerun:
# h100/L1/T62 at 77x, then 109x; h100/L2/T24 at 121x, then 56x). A kernel is *near the line* when its class changes
# with every finite error ratio in its gate records divided by NEAR_LINE (a broken kernel) or multiplied by it (a
# violation), the engine classifying both the records as they are and the scaled ones (engine_classification):
# nothing here decides a class. A broken kernel that a tolerance-free gate, a crash or a failure with no bound
# behind it makes broken is never near the line.
NEAR_LINE = 2.0


def _ratios_scaled(gates: list[dict], factor: float) -> list[dict]:
    return [{**g, "error_ratio": finite_ratio(g) * factor} if finite_ratio(g) is not None else g for g in gates]


def margin_of(rec: dict) -> str | None:
    """near_line's answer, or 'stale' for a broken or violation row whose gate records the engine of today
    classifies otherwise than its record says (an older engine's record)."""
    c = classification(rec)
    if c not in ("broken", "violation"):
        return None
    gates = rec.get("gates", [])
    if engine_classification(gates)["classification"] != c:
        return "stale"
    scaled = engine_classification(_ratios_scaled(gates, 1.0 / NEAR_LINE if c == "broken" else NEAR_LINE))
    return c if (scaled["classification"] == "broken") != (c == "broken") else None


def near_line(rec: dict) -> str | None:
    """'broken' or 'violation': the row's class, when it is near the line (above); None otherwise, and for a row
    whose gate records the engine of today classifies otherwise than its record says (an older engine's record)."""
    m = margin_of(rec)
    return None if m == "stale" else m


def margin_rows(recs) -> tuple[list[list], list[str], int]:
    """(table rows: class, kernels near the line, kernels of that class; one line per near row: key, class and its
    counted failures' error ratios; rows skipped because today's engine classifies their records otherwise)."""
    aud = audited(recs)
    near, skipped = [], 0
    for r in aud:
        m = margin_of(r)  # one engine classification of the records as they are, one of the scaled ones
        if m == "stale":
            skipped += 1
        elif m:
            near.append(r)
    rows = [[c, sum(1 for r in near if classification(r) == c), sum(1 for r in aud if classification(r) == c)]
            for c in ("broken", "violation")]
    lines = []
    for r in sorted(near, key=lambda r: str(r.get("key"))):
        ratios = [f"{g.get('gate')} {finite_ratio(g):.3g}x" for g in r.get("gates", [])
                  if counted_failure(g) and finite_ratio(g) is not None]
        lines.append(f"  {r.get('key')}: {classification(r)} ({', '.join(ratios)})")
    return rows, lines, skipped


def margin_text(paths) -> str:
    rows, lines, skipped = margin_rows(load(paths))
    text = (f"Near the 100x line: kernels whose class changes with every error ratio divided by {NEAR_LINE:g} "
            f"(broken) or multiplied by {NEAR_LINE:g} (violation), the engine classifying both; another run's "
            "random draws can put these on the other side\n"
            + table(["class", "near the line", "kernels of the class"], rows)
            + "\n" + "\n".join(lines))
    if skipped:
        text += (f"\n{skipped} broken or violation rows left out: today's engine classifies their gate records "
                 "otherwise than their record says (written by an older engine)")
    return text.rstrip("\n") + "\n"


def agreement_rows(recs):
    with_cand = [r for r in recs if r.get("status") not in ("no_candidate", "bad_row")]
    aud = audited(recs)
    rows = []
    bp = [r for r in aud if (gate(r, "baseline") or {}).get("verdict") == "PASS"]
    rows.append(["producer's recorded acceptance", len(with_cand), len(with_cand)])
    rows.append(["kgate baseline (split process) accepts", len(bp), len(aud)])
    for mode in ("producer", "kernelbench"):
        got = [r for r in aud if ((gate(r, "public_harness") or {}).get("harnesses") or {}).get(mode, {}).get("passed")]
        rows.append([f"public harness logic in one process ({mode}) accepts", len(got), len(aud)])
    return rows


def agreement_text(paths) -> str:
    recs = load(paths)
    aud = audited(recs)
    out = ["Defence 3, agreement: every row was accepted by the producer; baseline mirrors its test",
           table(["check", "accepts", "of"], agreement_rows(recs)), ""]
    dis = [r for r in aud if (gate(r, "baseline") or {}).get("verdict") != "PASS"]
    out.append(f"disagreements with the producer ({len(dis)}):")
    for r in dis:
        b = gate(r, "baseline") or {}
        ph = (gate(r, "public_harness") or {}).get("harnesses", {})
        summary = " ".join(str(b.get("summary", "")).split())  # one line per row, whatever the message holds
        out.append(f"  {r['key']}: baseline {b.get('verdict', '-')}: {summary[:150]}"
                   f" | in-process producer: {ph.get('producer', {}).get('passed')}"
                   f" | kernelbench: {ph.get('kernelbench', {}).get('passed')}")
    cross = Counter()
    for r in aud:
        b = (gate(r, "baseline") or {}).get("verdict") == "PASS"
        p = ((gate(r, "public_harness") or {}).get("harnesses") or {}).get("producer", {}).get("passed")
        cross[(b, p)] += 1
    out.append("")
    out.append(table(["baseline \\ in-process producer harness", "passes", "fails", "not run"],
                     [[lbl, cross[(b, True)], cross[(b, False)], cross[(b, None)]]
                      for lbl, b in (("baseline passes", True), ("baseline fails", False))]))
    not_aud = Counter(r.get("status") for r in recs if r.get("status") not in ("ok", "no_candidate"))
    if not_aud:
        out.append("")
        out.append("rows with a candidate that could not be audited here (not counted above): " +
                   ", ".join(f"{k} {v}" for k, v in not_aud.items()))
    return "\n".join(out)


def sample_cases(recs, per_cell=2, seed=0):
    cells = defaultdict(list)
    for r in audited(recs):
        for g in r["gates"]:
            if counted_failure(g):
                cells[(g["gate"], str(r.get("level")))].append((r, g))
    rng = random.Random(seed)
    picked = []
    for k in sorted(cells):
        items = cells[k]
        rng.shuffle(items)
        picked.extend((k, r, g) for r, g in items[:per_cell])
    return cells, picked


def reproduce_command(r: dict, gate_name: str, corpus: str | None = None) -> str:
    """A command `python -m kgate audit` accepts that runs this row's gate again with the row's own seed, so it
    draws the very cases the record reports: --only KEY audits that row and no other, --retry KEY runs it
    even where the scratch results file already holds it, --row-seed gives it the seed it had. It needs the
    corpus only (no results file, no MAC key)."""
    corpus = corpus or f"../shared/corpus/cuda-l1/{r.get('file') or 'CORPUS.jsonl'}"  # beside a checkout
    scratch = "/tmp/kgate-reproduce-" + "".join(c if c.isalnum() else "_" for c in r["key"]) + ".jsonl"
    seed = f" --row-seed {r['seed']}" if r.get("seed") else ""
    return (f"python -m kgate audit {corpus} --results {scratch} --only {r['key']} --retry {r['key']}{seed} "
            f"--gates {gate_name} --fw {r.get('fw') or 'torch'}")


def sample_text(paths, per_cell=2, seed=0, corpus: str | None = None) -> str:
    recs = load(paths)
    cells, picked = sample_cases(recs, per_cell, seed)
    out = ["# Stratified sample of kgate failures, for checking by hand", "",
           f"{per_cell} case(s) per (gate, level) cell, drawn with random.Random({seed}) from {sum(len(v) for v in cells.values())} "
           "failing gate records. Each case gives what reproduces it: the row key, the row's seed, the case, "
           "the shape (bindings), the offending tensor and index, expected (oracle) and got (candidate).", "",
           table(["gate", "level", "failures", "sampled"],
                 [[g, lv, len(v), min(per_cell, len(v))] for (g, lv), v in sorted(cells.items())]), ""]
    for (gname, lv), r, g in picked:
        ev = g.get("evidence") or {}
        out.append(f"## {gname} / level {lv}: {r['key']}")
        out.append(f"- verdict: {g['verdict']}: {g.get('summary', '')}")
        if g.get("error_ratio") is not None:
            out.append(f"- error ratio: {g['error_ratio']}")
        out.append(f"- row seed: {r.get('seed')}; reproduce: `{reproduce_command(r, gname, corpus)}`")
        for k in ("case", "variant", "bindings", "tensor", "index", "expected", "got", "detail"):
            if ev.get(k) not in (None, "", []):
                out.append(f"- {k}: {ev[k]}")
        out.append("- checked by hand: [ ] real defect  [ ] kgate's mistake  notes:")
        out.append("")
    return "\n".join(out)


# ---- HTML ------------------------------------------------------------------------------------------------

def _svg_bars(title, labels, series, colors, width=760, height=260):
    """Grouped/stacked bar chart: series is [(name, [values per label])], stacked."""
    n = max(1, len(labels))
    top = max([sum(s[1][i] for s in series) for i in range(len(labels))] + [1])
    left, bottom, bar_w = 50, 60, (width - 70) / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    scale = (height - bottom - 30) / top
    for i, lab in enumerate(labels):
        y = height - bottom
        for (name, vals), col in zip(series, colors):
            h = vals[i] * scale
            if h > 0:
                parts.append(f'<rect x="{left + i * bar_w + 2:.1f}" y="{y - h:.1f}" width="{bar_w - 4:.1f}" '
                             f'height="{h:.1f}" fill="{col}"><title>{html.escape(str(lab))} {html.escape(name)}: '
                             f'{vals[i]}</title></rect>')
            y -= h
        tot = sum(s[1][i] for s in series)
        parts.append(f'<text x="{left + (i + 0.5) * bar_w:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{tot}</text>')
        parts.append(f'<text x="{left + (i + 0.5) * bar_w:.1f}" y="{height - bottom + 12}" font-size="10" '
                     f'text-anchor="end" transform="rotate(-35 {left + (i + 0.5) * bar_w:.1f} {height - bottom + 12})">'
                     f'{html.escape(str(lab))}</text>')
    for j, ((name, _), col) in enumerate(zip(series, colors)):
        parts.append(f'<rect x="{left + j * 110}" y="24" width="10" height="10" fill="{col}"/>'
                     f'<text x="{left + j * 110 + 14}" y="33" font-size="11">{html.escape(name)}</text>')
    parts.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#333"/>')
    parts.append("</svg>")
    return "".join(parts)


def _ratio_hist(recs):
    bins = list(range(-6, 9))  # log10 ratio bins
    counts = {g: [0] * len(bins) for g in ("accumulation", "layout", "oracle", "shapes", "stream")}
    inf = Counter()
    for r in audited(recs):
        for g in r["gates"]:
            if g["gate"] in counts and g.get("error_ratio") is not None:
                x = g["error_ratio"]
                if isinstance(x, (int, float)) and not math.isnan(x):
                    if math.isinf(x):
                        inf[g["gate"]] += 1
                        continue
                    b = min(len(bins) - 1, max(0, int(math.floor(math.log10(max(x, 1e-30)))) - bins[0]))
                    counts[g["gate"]][b] += 1
    labels = [f"1e{b}" for b in bins]
    return labels, counts, inf


def write_html(paths, out_path):
    recs = load(paths)
    s = summary(recs)
    aud = audited(recs)
    gates = KGATE_GATES
    fail_by_level = []
    levels = sorted({str(r.get("level")) for r in aud})
    for lv in levels:
        fail_by_level.append((f"level {lv}", [sum(1 for r in aud if str(r.get("level")) == lv and
                                                  fails_at_scale(gate(r, g) or {"gate": g})) for g in gates]))
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948"]
    svg_gates = _svg_bars("failures per gate (FAIL, CRASH, TIMEOUT), stacked by level", gates, fail_by_level, palette)
    svg_levels = _svg_bars("classification per level", [f"level {lv}" for lv in levels],
                           [(k, [s["per_level"][lv][k] for lv in levels]) for k in ("broken", "violation", "clean")],
                           ["#e15759", "#f28e2b", "#59a14f"])
    labels, counts, inf = _ratio_hist(recs)
    svg_ratio = _svg_bars("error ratio (error / bound) distribution, by gate (1 = at the bound)", labels,
                          list(counts.items()), palette)
    bv = Counter()
    for r in aud:
        b = (gate(r, "baseline") or {}).get("verdict") == "PASS"
        bv[(b, classification(r))] += 1
    svg_bvk = _svg_bars("baseline vs kgate", ["baseline accepts", "baseline rejects"],
                        [(k, [bv[(True, k)], bv[(False, k)]]) for k in ("broken", "violation", "clean")],
                        ["#e15759", "#f28e2b", "#59a14f"], width=420)
    pre = lambda t: f"<pre>{html.escape(t)}</pre>"  # noqa: E731
    examples = []
    for r in aud:
        for g in r["gates"]:
            if counted_failure(g) and len(examples) < 400:
                ev = g.get("evidence") or {}
                examples.append(f"<tr><td>{html.escape(r['key'])}</td><td>{g['gate']}</td><td>{g['verdict']}</td>"
                                f"<td>{html.escape(str(g.get('summary', '')))[:300]}</td>"
                                f"<td>{html.escape(str(ev.get('index', '')))}</td><td>{html.escape(str(ev.get('expected', '')))}</td>"
                                f"<td>{html.escape(str(ev.get('got', '')))}</td></tr>")
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>kgate audit report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}} pre{{background:#f6f6f6;padding:.6em;overflow:auto}}
table.ev{{border-collapse:collapse;font-size:12px}} table.ev td,table.ev th{{border:1px solid #ccc;padding:2px 4px}}</style></head><body>
<h1>kgate audit report</h1><p>Results: {html.escape(', '.join(map(plain_name, paths)))}. Rendered from the results file(s) alone.</p>
<h2>Summary</h2>{pre(summary_text(paths))}
<h2>Plots</h2>{svg_gates}<br>{svg_levels}<br>{svg_ratio}<p>Infinite ratios (non-finite or structural mismatches): {dict(inf)}</p>{svg_bvk}
<h2>Defence 2: threshold sweep</h2>{pre(sweep_text(paths))}
<h2>Defence 3: agreement</h2>{pre(agreement_text(paths))}
<h2>Defence 4: stratified sample</h2><p>Written by <code>python -m kgate sample</code>; the cells:</p>{pre(sample_text(paths).split(chr(10) + '## ')[0])}
<h2>Failures with evidence</h2><table class="ev"><tr><th>row</th><th>gate</th><th>verdict</th><th>summary</th><th>index</th><th>expected</th><th>got</th></tr>
{''.join(examples)}</table></body></html>"""
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(doc)
    return out_path
