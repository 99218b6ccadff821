#!/usr/bin/env python3
"""On which SASS instructions one kernel's warps stall, and on what, from Nsight Compute's source page (`ncu -i REPORT
--page source --csv --print-source sass`, written by bench/glr/ncu_source.sh for one launch of one kernel): ncu's
SourceCounters section samples each warp's program counter and stall reason every few cycles, and the page gives
each SASS instruction its samples in all ("Warp Stall Sampling (All Samples)") and per reason (stall_long_sb,
stall_mio, ...). ncu_table.py's stall table says how long a kernel's warps wait between issues, summed over the
kernel; this one says where. Printed:

  (a) the TOP instructions by samples, each with its largest reasons' samples, its offset in the kernel (as
      nvdisasm / cuobjdump print it) and its source file:line when --sass gives them;
  (b) the samples summed by opcode (MUFU keeps its function: MUFU.EX2; the rest is cut at the first '.': LDS.128 ->
      LDS) and by source line;
  (c) for each reason of --reasons (default mio_throttle, long_scoreboard, short_scoreboard): its 5 largest
      instructions.

    python3 bench/glr/ncu_source_table.py [--top N] [--reasons R,R] [--sass NVDISASM.txt] FILE.csv    Markdown

--sass: `nvdisasm -g -c` text of the cubins the profiled kernel came from (a -lineinfo build; its `//## File`
comments give the lines, read by sass_mix.parse). The kernel is found in it by its code, not its name: the one
function whose opcode at every offset of the CSV is the CSV's (offsets from the kernel's first address). Without
it, or with no such function, the source column is '-'.
A sample is charged to the instruction the warp is stalled on, the next it would issue: an mio_throttle sample
sits on an MIO instruction (LDS, STS, MUFU, ...) that found the MIO queue full, so the instructions just before it
filled the queue; a long_scoreboard sample sits on the instruction that waits for an L1TEX operation's result
(the first reader of a load's register, a DEPBAR on cp.async), not on the load itself. Samples are counts, not
cycles: a reason's share of the samples is about its share of the warps' time, so share x the kernel's stall cycles
an issue (ncu_table.py's, WarpStateStats) is about that reason's cycles an issue. Exit 2, with one line naming the
file and what is wrong (a missing column, a reason not in the CSV, a bad number), on bad input.
"""
import argparse
import csv
import os
import re
import sys
from collections import defaultdict

ALL = "Warp Stall Sampling (All Samples)"
ALL_OTHER = "# Samples"  # the same total as some ncu versions head it (read when ALL is absent)
ADDRESS, SOURCE = "Address", "Source"
EXECUTED = "Instructions Executed"  # optional: shown when present
# ncu's source-page column (stall_ + this) -> the reason's name in its metrics (and ncu_table.py's STALL_REASONS).
# A stall_ column not named here keeps its own name (a newer ncu's reason is shown, not refused).
REASON = {"long_sb": "long_scoreboard", "short_sb": "short_scoreboard", "mio": "mio_throttle", "lg": "lg_throttle",
          "math": "math_pipe_throttle", "tex": "tex_throttle", "barrier": "barrier", "membar": "membar",
          "wait": "wait", "sleep": "sleeping", "sleeping": "sleeping", "dispatch": "dispatch_stall",
          "no_inst": "no_instruction", "not_selected": "not_selected", "selected": "selected", "misc": "misc",
          "drain": "drain", "imc": "imc_miss", "branch_resolving": "branch_resolving",
          "warpgroup_arrive": "warpgroup_arrive"}
METRIC_COLUMN = re.compile(r"smsp__pcsamp_warps_issue_stalled_(\w+)")  # the per-reason column under its metric name
NAME_ROWS = ("Kernel Name", "Function Name")  # the row before each kernel's header (ncu versions differ)
SPLIT = 6  # reasons given a column of their own in (a) and (b): the kernel's largest; the rest is 'other'
PER_REASON = 5  # instructions per reason in (c)
PREDICATE = re.compile(r"^@!?U?P[T0-7]\s+")


class SourceCsvError(ValueError):
    pass


def number(text, where):
    t = text.strip().replace(",", "")
    if t in ("", "-", "n/a", "N/A"):
        return 0.0
    try:
        return float(t)
    except ValueError as e:
        raise SourceCsvError(f"{where}: not a number: {text!r}") from e


def opcode(sass):
    """(full opcode, group): 'MUFU.EX2 R1, R2' -> ('MUFU.EX2', 'MUFU.EX2'), '@P0 LDS.128 ...' -> ('LDS.128', 'LDS')."""
    body = PREDICATE.sub("", sass.strip())
    full = body.split()[0].rstrip(";") if body else "?"
    parts = full.split(".")
    return full, ".".join(parts[:2]) if parts[0] == "MUFU" else parts[0]


def read(path):
    """(kernel name or None, reasons [name], rows [dict(off, op, group, text, all, executed, by={reason: samples})]):
    the instructions of the one kernel in an ncu source-page CSV, offsets from its first address."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    names = [r[1] for r in rows if len(r) >= 2 and r[0] in NAME_ROWS]
    if len(set(names)) > 1:
        raise SourceCsvError(f"{path}: {len(set(names))} kernels ({names[0][:60]!r}, ...): profile one launch of one "
                             "kernel (ncu_source.sh: -k regex, --launch-count 1)")
    head = next((i for i, r in enumerate(rows) if r and r[0] == ADDRESS), None)
    if head is None:
        raise SourceCsvError(f"{path}: no header row starting with {ADDRESS!r} (is it ncu --page source --csv "
                             "--print-source sass output?)")
    cols = rows[head]
    total = ALL if ALL in cols or ALL_OTHER not in cols else ALL_OTHER
    for c in (SOURCE, total):
        if c not in cols:
            raise SourceCsvError(f"{path}: no column {c!r} in the header (was the SourceCounters section collected?)")
    stall = {}
    for j, c in enumerate(cols):  # "stall_mio (Not Issued)", "..._mio_throttle_not_issued": the not-issued subset
        m = METRIC_COLUMN.fullmatch(c)
        if c.startswith("stall_") and "(" not in c:
            stall[j] = REASON.get(c[len("stall_"):], c[len("stall_"):])
        elif m and not c.endswith("_not_issued"):
            stall[j] = m.group(1)
    if not stall:
        raise SourceCsvError(f"{path}: no stall_* column in the header (per-reason samples; was the SourceCounters "
                             "section collected?)")
    ja, js, jall = cols.index(ADDRESS), cols.index(SOURCE), cols.index(total)
    jex = cols.index(EXECUTED) if EXECUTED in cols else None
    out = []
    for n, r in enumerate(rows[head + 1:], start=head + 2):
        if not r or not r[ja].strip():
            continue  # a blank line, or a units row
        if r[0] == ADDRESS or r[0] in NAME_ROWS:
            continue  # the same kernel's header again
        if len(r) < len(cols):
            raise SourceCsvError(f"{path}:{n}: {len(r)} cells for {len(cols)} columns")
        try:
            addr = int(r[ja].strip(), 16)
        except ValueError as e:
            raise SourceCsvError(f"{path}:{n} {ADDRESS}: not an address: {r[ja]!r}") from e
        full, group = opcode(r[js])
        out.append(dict(addr=addr, op=full, group=group, text=r[js].strip(),
                        all=number(r[jall], f"{path}:{n} {total}"),
                        executed=None if jex is None else number(r[jex], f"{path}:{n} {EXECUTED}"),
                        by={name: number(r[j], f"{path}:{n} {cols[j]}") for j, name in stall.items()}))
    if not out:
        raise SourceCsvError(f"{path}: no instruction rows under the header")
    base = min(x["addr"] for x in out)
    for x in out:
        x["off"] = x["addr"] - base
    return (names[0] if names else None), sorted(set(stall.values()), key=list(stall.values()).index), out


def source_lines(sass_path, rows):
    """({offset: 'file:line'}, note, function name) from nvdisasm -g text: the one function whose opcodes at the
    CSV's offsets are the CSV's; ({}, why, None) when none is, or several with different lines."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sass_mix
    with open(sass_path) as fh:
        funcs, _ = sass_mix.parse(fh)
    want = {x["off"]: x["op"].split(".")[0] for x in rows}
    maps = []
    for name, code in funcs.items():
        if not code:
            continue
        base = code[0][0]
        at = {addr - base: (op, src) for addr, op, _, src in code}
        if all(off in at and at[off][0] == op for off, op in want.items()):
            maps.append((name, {off: at[off][1] for off in want}))
    if not maps:
        return {}, f"no function in {os.path.basename(sass_path)} has the CSV's opcodes at its offsets", None
    if any(m != maps[0][1] for _, m in maps[1:]):
        return {}, (f"{len(maps)} functions in {os.path.basename(sass_path)} match the CSV's code with different "
                    "lines"), None
    name, m = maps[0]
    if not any(m.values()):
        return {}, f"{name} has no line info in {os.path.basename(sass_path)} (built without -lineinfo?)", name
    return m, f"lines from {name} in {os.path.basename(sass_path)}", name


def function_text(sass_path, name):
    """The lines of one function of nvdisasm text, from its `.text.NAME:` line to the next function's."""
    out, inside = [], False
    with open(sass_path) as fh:
        for line in fh:
            if line.startswith(".text."):
                inside = line.strip() == f".text.{name}:"
            if inside:
                out.append(line)
    return "".join(out)


def pct(x, total):
    return f"{100 * x / total:.1f}" if total else "-"


def tables(path, top=25, reasons=("mio_throttle", "long_scoreboard", "short_scoreboard"), sass=None, sass_out=None):
    """The Markdown of (a), (b), (c); with sass_out, the matched function's nvdisasm text is written there."""
    kernel, have, rows = read(path)
    missing = [r for r in reasons if r not in have]
    if missing:
        raise SourceCsvError(f"{path}: no stall column for reason {missing[0]!r} (columns give: {', '.join(have)})")
    lines, note, function = ({}, "no --sass: no source lines", None) if sass is None else source_lines(sass, rows)
    if sass_out and function:
        with open(sass_out, "w") as fh:
            fh.write(function_text(sass, function))
    for x in rows:
        x["src"] = lines.get(x["off"]) or "-"
    total = sum(x["all"] for x in rows)
    by_reason = {r: sum(x["by"].get(r, 0) for x in rows) for r in have}
    split = [r for r in sorted(have, key=lambda r: -by_reason[r]) if by_reason[r] > 0][:SPLIT]
    executed = sum(x["executed"] or 0 for x in rows) if any(x["executed"] is not None for x in rows) else None
    out = [f"{os.path.basename(path)}: `{kernel or '?'}`, {len(rows)} instructions, {total:.0f} stall samples "
           f"(the reasons' columns sum to {sum(by_reason.values()):.0f})"
           + (f", {executed:.0f} warp instructions executed" if executed is not None else "") + f"; {note}", ""]
    out.append("Samples by reason: " + ", ".join(f"{r} {by_reason[r]:.0f} ({pct(by_reason[r], total)}%)"
                                                  for r in sorted(have, key=lambda r: -by_reason[r])
                                                  if by_reason[r] > 0) + "\n")

    def split_cells(by):
        other = sum(v for r, v in by.items() if r not in split)
        return [f"{by.get(r, 0):.0f}" for r in split] + [f"{other:.0f}"]

    # (a)
    out.append(f"(a) The {top} instructions with the most stall samples (offset as nvdisasm prints it):\n")
    out.append("| offset | instruction | source | samples | % of kernel | " + " | ".join(split) + " | other |"
               + (" executed |" if executed is not None else ""))
    out.append("|" + "---|" * (6 + len(split) + (executed is not None)))
    for x in sorted(rows, key=lambda x: (-x["all"], x["off"]))[:top]:
        out.append(f"| {x['off']:04x} | `{x['text'][:70]}` | {x['src']} | {x['all']:.0f} | {pct(x['all'], total)} | "
                   + " | ".join(split_cells(x["by"])) + " |"
                   + (f" {x['executed']:.0f} |" if executed is not None else ""))

    # (b)
    def grouped(title, key, label, limit=None):
        g = defaultdict(lambda: dict(n=0, all=0.0, by=defaultdict(float)))
        for x in rows:
            e = g[key(x)]
            e["n"] += 1
            e["all"] += x["all"]
            for r, v in x["by"].items():
                e["by"][r] += v
        keys = sorted(g, key=lambda k: (-g[k]["all"], k))
        keys = [k for k in keys if g[k]["all"] > 0][:limit]
        out.append(f"\n{title}\n")
        out.append(f"| {label} | instructions | samples | % of kernel | " + " | ".join(split) + " | other |")
        out.append("|" + "---|" * (5 + len(split)))
        for k in keys:
            e = g[k]
            out.append(f"| {k} | {e['n']} | {e['all']:.0f} | {pct(e['all'], total)} | "
                       + " | ".join(split_cells(e["by"])) + " |")

    grouped("(b) Stall samples by opcode (MUFU by function, the rest by its name before the first '.'):",
            lambda x: x["group"], "opcode")
    if lines:
        grouped(f"(b) Stall samples by source line (the {top} largest):", lambda x: x["src"], "source", top)

    # (c)
    for r in reasons:
        tot = by_reason[r]
        out.append(f"\n(c) {r}: {tot:.0f} samples ({pct(tot, total)}% of the kernel's); its {PER_REASON} largest "
                   "instructions:\n")
        out.append(f"| offset | instruction | source | {r} | % of {r} | all samples |")
        out.append("|---|---|---|---|---|---|")
        for x in sorted(rows, key=lambda x: (-x["by"].get(r, 0), x["off"]))[:PER_REASON]:
            if x["by"].get(r, 0) <= 0:
                break
            out.append(f"| {x['off']:04x} | `{x['text'][:70]}` | {x['src']} | {x['by'][r]:.0f} | "
                       f"{pct(x['by'][r], tot)} | {x['all']:.0f} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25, help="instructions in (a) and source lines in (b)")
    ap.add_argument("--reasons", default="mio_throttle,long_scoreboard,short_scoreboard",
                    help="reasons of (c), as ncu's metrics name them (long_scoreboard, mio_throttle, barrier, ...)")
    ap.add_argument("--sass", default=None, help="nvdisasm -g -c text of the kernel's cubins: source lines")
    ap.add_argument("--sass-out", default=None,
                    help="write the matched function's part of --sass here (to keep it beside the CSV)")
    a = ap.parse_args(argv)
    if a.top < 1:
        print(f"ncu_source_table.py: --top {a.top}: use 1 or more", file=sys.stderr)
        return 2
    try:
        print(tables(a.csv, a.top, [r for r in a.reasons.split(",") if r], a.sass, a.sass_out), end="")
    except (OSError, SourceCsvError, UnicodeDecodeError) as e:
        print(f"ncu_source_table.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
