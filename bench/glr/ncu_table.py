#!/usr/bin/env python3
"""Where each kernel of one warm forward+backward spends its time and bytes, from Nsight Compute's raw CSV
(ncu --csv --page raw --print-units base, written by bench/glr/ncu_kernels.sh, one file per shape and
implementation). Per kernel: duration, DRAM bytes read and written, the bandwidth that makes (bytes / duration),
its share of the copy ceiling measured in the same call (--copy-tbs, read + written bytes counted, as the
ceiling), L2 bytes, the tensor pipes' activity (wgmma: gmma, mma.sync: hmma), SM throughput and achieved
occupancy, as ncu names them; then where the warps wait (ncu's stall reasons, the largest first), which says what
a kernel far below the copy ceiling is waiting for: its loads (long_scoreboard), its barriers, shared memory. A kernel near the copy ceiling is bound by its traffic: fewer bytes, not faster
arithmetic, make it faster.

    python3 bench/glr/ncu_table.py [--copy-tbs X] FILE.csv ...     Markdown on stdout
"""
import argparse
import csv
import os
import re
import sys

# ncu metric -> (column, scale to the unit the table prints)
METRICS = [
    ("gpu__time_duration.sum", "us", 1e-3),  # ns -> us
    ("dram__bytes_read.sum", "DRAM read MB", 1e-6),
    ("dram__bytes_write.sum", "DRAM write MB", 1e-6),
    ("lts__t_bytes.sum", "L2 MB", 1e-6),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM % ncu peak", 1.0),
    ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed", "gmma %", 1.0),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", "hmma %", 1.0),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM %", 1.0),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "warps active %", 1.0),
    ("launch__registers_per_thread", "regs", 1.0),
]
# Where the warps wait: ncu's stall reasons as "warps stalled for this reason per issued instruction" (the
# WarpStateStats section's measure; their sum over the reasons is the average cycles between two issues of a warp),
# and how busy the issue slots are. long_scoreboard: waiting on global or local memory (a load's latency exposed);
# barrier: __syncthreads / bar.sync; short_scoreboard: shared memory (ldmatrix, cp.async's wait) or MUFU results;
# wait: fixed-latency dependencies; math_pipe_throttle: a pipe busy (the tensor pipes' own saturation);
# mio_throttle / lg_throttle: the shared-memory / global-memory instruction queues full; sleeping: nanosleep and
# mbarrier try-wait back-off; membar: fences. Which of them this ncu counts on sm_90 is read from --query-metrics
# (ncu_kernels.sh); a reason it lacks is left out.
STALL_REASONS = ["long_scoreboard", "barrier", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle",
                 "lg_throttle", "sleeping", "membar", "dispatch_stall", "not_selected", "selected", "no_instruction",
                 "branch_resolving", "drain", "imc_miss", "tex_throttle", "misc"]
STALLS = [(r, f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio") for r in STALL_REASONS]
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
TOP_STALLS = 4  # reasons shown per kernel, largest first
WANTED = [m for m, _, _ in METRICS] + [m for _, m in STALLS] + [ISSUE_ACTIVE]

# units ncu may print even with --print-units base (ncu 2025.x on the H100 of 2026-12-05 wrote 'ns' for
# gpu__time_duration), and their factor to the base unit
UNIT = {"": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1.0, "usecond": 1e3,
        "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "%": 1.0, "register/thread": 1.0, "cycle": 1.0,
        "inst": 1.0}  # ncu 2025 on the H100 of 2026-12-07 labels the stall ratios (warps per issued instruction) "inst"


class NcuCsvError(ValueError):
    pass


def number(text, unit, where):
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A"):
        return None
    try:
        v = float(t)
    except ValueError as e:
        raise NcuCsvError(f"{where}: not a number: {text!r}") from e
    f = UNIT.get(unit.strip().lower())
    if f is None:
        raise NcuCsvError(f"{where}: unknown unit {unit!r}")
    return v * f


def read(path):
    """[(kernel name, {metric: value in base units})] in launch order, from one ncu raw CSV; ncu's own lines
    (==PROF== ...) before the header are skipped."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))  # one row a line: ncu's own lines are one-cell rows before the header
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        raise NcuCsvError(f"{path}: no header row with 'Kernel Name' (is it ncu --csv --page raw output?)")
    cols = rows[head]
    kcol = cols.index("Kernel Name")
    has_units = head + 1 < len(rows) and len(rows[head + 1]) > kcol and rows[head + 1][kcol] == ""
    units = rows[head + 1] if has_units else [""] * len(cols)
    body = rows[head + (2 if has_units else 1):]
    out = []
    for n, r in enumerate(body, start=head + (3 if has_units else 2)):
        if not r or len(r) < len(cols):
            continue
        vals = {}
        for m in WANTED:
            if m in cols:
                j = cols.index(m)
                vals[m] = number(r[j], units[j] if j < len(units) else "", f"{path}:{n} {m}")
        out.append((r[kcol], vals))
    return out


def short(name):
    """A kernel's name without its template arguments' namespaces and its parameter list."""
    name = re.sub(r"\(.*\)$", "", name.strip())
    name = re.sub(r"^void ", "", name)
    return re.sub(r"[A-Za-z_0-9]+::", "", name)[:90]


def table(path, copy_tbs=None):
    ks = read(path)
    if not ks:
        return f"{os.path.basename(path)}: no kernels recorded\n"
    agg = {}
    order = []
    for name, v in ks:
        key = short(name)
        if key not in agg:
            agg[key] = dict(n=0, vals=[])
            order.append(key)
        agg[key]["n"] += 1
        agg[key]["vals"].append(v)
    cols = ["kernel", "launches"] + [c for m, c, _ in METRICS if any(m in v for _, v in ks)]
    cols.insert(cols.index("DRAM write MB") + 1 if "DRAM write MB" in cols else len(cols), "DRAM TB/s")
    if copy_tbs:
        cols.insert(cols.index("DRAM TB/s") + 1, "% copy ceiling")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    tot = dict(t=0.0, r=0.0, w=0.0)

    def row(label, n, vs):
        t = sum(v.get("gpu__time_duration.sum") or 0 for v in vs)  # ns
        r = sum(v.get("dram__bytes_read.sum") or 0 for v in vs)
        w = sum(v.get("dram__bytes_write.sum") or 0 for v in vs)
        cells = {"kernel": f"`{label}`", "launches": str(n)}
        for m, c, f in METRICS:
            xs = [v[m] for v in vs if v.get(m) is not None]
            if not xs:
                cells[c] = "-"
            elif m.endswith(".sum") and not m.startswith("launch"):
                cells[c] = f"{sum(xs) * f:.1f}"
            else:  # a rate or percentage: weighted by duration over the launches
                cells[c] = f"{weighted(vs, m) * f:.1f}"
        tbs = (r + w) / t * 1e-3 if t > 0 else 0.0  # bytes / ns = GB/s; / 1e3 = TB/s
        cells["DRAM TB/s"] = f"{tbs:.2f}"
        if copy_tbs:
            cells["% copy ceiling"] = f"{100 * tbs / copy_tbs:.0f}"
        return cells, t, r, w

    for key in sorted(order, key=lambda k: -sum(v.get("gpu__time_duration.sum") or 0 for v in agg[k]["vals"])):
        cells, t, r, w = row(key, agg[key]["n"], agg[key]["vals"])
        tot["t"] += t
        tot["r"] += r
        tot["w"] += w
        lines.append("| " + " | ".join(cells.get(c, "-") for c in cols) + " |")
    cells, _, _, _ = row("all kernels", len(ks), [v for _, v in ks])
    for m, c, _ in METRICS:  # rates and percentages of the whole are not a sum: left out of the total
        if not m.endswith(".sum"):
            cells[c] = "-"
    lines.append("| " + " | ".join(cells.get(c, "-") for c in cols) + " |")
    head = (f"{os.path.basename(path)}: {len(ks)} launches, {tot['t'] * 1e-6:.3f} ms of kernels, DRAM "
            f"{(tot['r'] + tot['w']) * 1e-9:.2f} GB ({tot['r'] * 1e-9:.2f} read, {tot['w'] * 1e-9:.2f} written)")
    waits = stall_table(agg, order)
    return head + "\n\n" + "\n".join(lines) + "\n" + (f"\n{waits}" if waits else "")


def weighted(vs, m):
    """A rate's mean over a kernel's launches, weighted by their durations (None: not recorded)."""
    xs = [(v[m], v.get("gpu__time_duration.sum") or 0) for v in vs if v.get(m) is not None]
    if not xs:
        return None
    wsum = sum(t for _, t in xs)
    return sum(x * t for x, t in xs) / wsum if wsum else sum(x for x, _ in xs) / len(xs)


def stall_table(agg, order):
    """Per kernel (longest first): the issue slots' activity and the TOP_STALLS largest stall reasons, each as
    warps stalled per issued instruction and its share of all the reasons recorded; "" when the CSV has none."""
    rows = []
    for key in sorted(order, key=lambda k: -sum(v.get("gpu__time_duration.sum") or 0 for v in agg[k]["vals"])):
        vs = agg[key]["vals"]
        got = [(r, weighted(vs, m)) for r, m in STALLS]
        got = [(r, x) for r, x in got if x is not None]
        if not got:
            continue
        total = sum(x for _, x in got)
        top = sorted(got, key=lambda rx: -rx[1])[:TOP_STALLS]
        issue = weighted(vs, ISSUE_ACTIVE)
        reasons = ", ".join(f"{r} {x:.2f} ({100 * x / total:.0f}%)" if total > 0 else f"{r} {x:.2f}" for r, x in top)
        rows.append(f"| `{key}` | {'-' if issue is None else f'{issue:.1f}'} | {total:.2f} | {reasons} |")
    if not rows:
        return ""
    return ("Where the warps wait (ncu's stall reasons: warps stalled per issued instruction, weighted by duration "
            "over the launches; their sum is the mean cycles between a warp's issues):\n\n"
            "| kernel | issue slots busy % | stalls per issue, all reasons | largest reasons (share) |\n"
            "|---|---|---|---|\n" + "\n".join(rows) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--copy-tbs", type=float, default=None,
                    help="the copy ceiling measured in the same call, TB/s (read + written bytes)")
    a = ap.parse_args(argv)
    if a.copy_tbs is not None and not a.copy_tbs > 0:
        print(f"ncu_table.py: --copy-tbs {a.copy_tbs}: a ceiling must be positive", file=sys.stderr)
        return 2
    out = []
    for f in a.files:
        try:
            out.append(table(f, a.copy_tbs))
        except (OSError, NcuCsvError) as e:
            print(f"ncu_table.py: {e}", file=sys.stderr)
            return 2
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
