#!/usr/bin/env python3
"""What a kernel's chunk loop issues, from its SASS (no GPU): the static instruction mix of one chunk iteration per
warp, and the time the issue slots alone would need for it beside the measured time per chunk. Made to tell whether
the sm90 kernels (bench/glr/sm90_bwd_notes.md, "Instruction mix per chunk") are issue-bound (too many non-MMA
instructions a chunk) or wait on something else (latency, barriers: ncu's stall table says which).

    python3 bench/glr/sass_mix.py [--clock GHZ] [--sms N] [--lines N] SASS [KERNEL ...]     Markdown on stdout

SASS: `cuobjdump -sass OBJ` text, or `nvdisasm -g -c CUBIN` text (its `//## File` comments then attribute the
loop's instructions to source lines); '-' reads stdin. KERNEL: PATTERN or PATTERN=MS,THREADS,PER_SM,GRID,CHUNKS, the
pattern a piece of the demangled name starting at a name boundary ("h_kernel<64, 128, true, true>" does not match
dh_kernel), the rest the measured kernel time (ms), threads a block, resident blocks an SM, blocks in the grid and
chunks a block walks. None given: the five kernels of one warm forward+backward at B8 T4096 H16 (DEFAULT_KERNELS).

The chunk loop is the largest backward-branch span holding a tensor instruction (HGMMA or HMMA: h_kernel and
wy_kernel use mma.sync); a kernel whose blocks walk one chunk (CHUNKS 1), or with no such loop, is counted whole, the
code after its last unconditional EXIT (out-of-line fallbacks) left out. Static counts: both sides of every branch count (warp-dependent paths, predicated-off work
included), an inner loop's body counts once (its trip count is not read here), and latency is not seen at all.
"""
import argparse
import math
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict

# Five kernels of one warm forward+backward at B8 T4096 H16 K = V = 128, bf16, on an H100 (2026-12-07, both prefetch
# schedules on: results/glr/sm90/h100-2026-12-07-hprefetch-ab/both.md). Threads, blocks an SM and grids from the
# launchers: the chunk kernels (chunk_wgmma, wy) one block per (chunk, head) = 64 x 128 = 8192 blocks; the state passes
# one block per (64-column slice, head) = 2 x 128 = 256 blocks, 64 chunks each. Blocks an SM: chunk_wgmma
# __launch_bounds__(256, 1) at ~215 KB shared; dh_wgmma, state_t (prefetch), h_kernel (prefetch) two an SM (their
# static_asserts on shared memory; ncu's warps active ~12% = 8 of 64 warps); wy 8 (__launch_bounds__(128, 8); ncu's
# warps active 47%).
DEFAULT_KERNELS = [
    "chunk_wgmma_kernel<128, true>=0.934,256,1,8192,1",
    "dh_wgmma_kernel<64, 128, true, false, false>=0.786,128,2,256,64",
    "state_t_wgmma_kernel<true, 128, false, false, true>=0.431,128,2,256,64",
    "h_kernel<64, 128, true, true>=0.354,128,2,256,64",
    "wy_kernel<3, true, 128>=0.120,128,8,8192,1",
]

TENSOR = {"HGMMA", "HMMA"}
# class -> opcodes (the part before the first '.'); the order is the table's
CLASSES = [
    ("HGMMA/HMMA", TENSOR),
    ("wgmma arrive/wait", {"WARPGROUP"}),
    ("LDSM", {"LDSM"}),
    ("LDS", {"LDS"}),
    ("STS", {"STS"}),
    ("LDG", {"LDG"}),
    ("STG/atomics", {"STG", "ATOMG", "RED", "ATOM", "ATOMS"}),
    ("LDGSTS (cp.async)", {"LDGSTS"}),
    ("cp.async waits", {"LDGDEPBAR", "DEPBAR"}),
    ("barriers/fences", {"BAR", "SYNCS", "FENCE", "MEMBAR", "ERRBAR", "CGAERRBAR", "CCTL"}),
    ("MUFU", {"MUFU"}),
    ("FP32 (FFMA/FMUL/FADD...)", {"FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "FCHK", "FSWZADD", "HFMA2", "HADD2",
                                  "HMUL2", "HSETP2", "HMNMX2"}),
    ("conversions", {"F2F", "F2FP", "I2F", "I2FP", "F2I", "F2IP", "FRND", "I2I", "I2IP"}),
    ("SHFL", {"SHFL"}),
    ("int/address/predicate", {"IMAD", "IADD3", "IADD", "LEA", "LOP3", "ISETP", "SEL", "MOV", "SHF", "PRMT", "VIADD",
                               "IABS", "IMNMX", "VIMNMX", "VIADDMNMX", "PLOP3", "P2R", "R2P", "S2R", "CS2R", "LDC",
                               "POPC", "FLO", "BREV", "BMSK", "SGXT", "IDP", "IMUL", "VOTE"}),
    ("uniform int (U*, R2UR)", set()),  # by prefix: every U... opcode, and R2UR, S2UR
    ("branch/control", {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "YIELD", "BREAK",
                        "BPT", "ELECT", "ENDCOLLECTIVE", "KILL", "NANOSLEEP"}),
    ("other", set()),
]
UNIFORM_NOT_U = {"R2UR", "S2UR"}
UNIFORM_EXCEPT = {"UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF"}  # TMA: 'other', not arithmetic
OPCLASS = {op: name for name, ops in CLASSES for op in ops}

FUNC_CUOBJDUMP = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
FUNC_NVDISASM = re.compile(r"^\.text\.(\S+):\s*$")
LABEL = re.compile(r"^(\.L_\w+):\s*$")
INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;")
LINEINFO = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
TARGET = re.compile(r"`\((\.L_\w+)\)|\b0x([0-9a-fA-F]+)\b")


class SassError(ValueError):
    pass


def opclass(op):
    if op in OPCLASS:
        return OPCLASS[op]
    if (op.startswith("U") and op not in UNIFORM_EXCEPT) or op in UNIFORM_NOT_U:
        return "uniform int (U*, R2UR)"
    return "other"


def parse(lines):
    """{mangled name: [(address, opcode, text with its predicate, source or None)]} and each function's label
    addresses."""
    funcs, labels = {}, {}
    name, pending, src = None, [], None
    for line in lines:
        m = FUNC_CUOBJDUMP.match(line) or FUNC_NVDISASM.match(line)
        if m:
            # A name seen before is another object's copy of the same kernel (forward.cu.o and backward.cu.o both
            # hold state_t_wgmma_kernel<true, 128, false, false, true>): only the first is read. Appending the
            # second to it counted both copies' instructions in one span (the 2026-12-07 state_t row, 2x).
            name, pending, src = (None if m.group(1) in funcs else m.group(1)), [], None
            if name is not None:
                funcs[name], labels[name] = [], {}
            continue
        if name is None:
            continue
        m = LINEINFO.match(line)
        if m:
            src = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
            continue
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = INSTR.match(line)
        if not m:
            continue
        addr, text = int(m.group(1), 16), m.group(2).strip()
        body = re.sub(r"^@!?U?P[T0-7]\s+", "", text)
        op = body.split()[0].split(".")[0] if body else ""
        for lab in pending:
            labels[name][lab] = addr
        pending = []
        funcs[name].append((addr, op, text, src))
    return funcs, labels


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if tool is None:
        raise SassError("no c++filt (binutils) or cu++filt on PATH to demangle the kernel names")
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def find_kernel(funcs, pretty, pattern):
    rx = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(pattern))
    hits = sorted({pretty[n] for n in funcs if rx.search(pretty[n])})
    if not hits:
        raise SassError(f"no kernel in the SASS matches {pattern!r}")
    if len(hits) > 1:
        raise SassError(f"{pattern!r} matches {len(hits)} kernels ({hits[0]!r}, {hits[1]!r}, ...): say more of the name")
    return next(n for n in funcs if pretty[n] == hits[0])


def target(op, text, labels):
    """A branch's target address, None for anything else."""
    m = TARGET.search(text) if op in ("BRA", "JMP") else None
    if not m:
        return None
    return labels.get(m.group(1)) if m.group(1) else int(m.group(2), 16)


def backward_branches(code, labels):
    """[(start, end)] address spans closed by a branch back to start (a self-branch, the trap after EXIT, excluded)."""
    spans = []
    for addr, op, text, _ in code:
        tgt = target(op, text, labels)
        if tgt is not None and tgt < addr:
            spans.append((tgt, addr))
    return spans


def analyse(code, labels, whole):
    """The chunk loop, or (whole: a block of one chunk, or no loop holds the tensor instructions) the function up to
    its last unconditional EXIT; and the loops inside. What follows that EXIT is out-of-line code (the warp-collective
    fallbacks ptxas emits for a shuffle in divergent code, slow paths), reached only off the common path: its branches
    back into the body are not loops, and it is left out of the counts."""
    exits = [i for i, c in enumerate(code) if c[2] == "EXIT"]
    end = exits[-1] + 1 if exits else len(code)
    tail = [c for c in code[end:] if c[1] != "NOP" and target(c[1], c[2], labels) != c[0]]
    code = code[:end]
    spans = backward_branches(code, labels)
    tensor_at = [a for a, op, _, _ in code if op in TENSOR]
    loops = [s for s in spans if any(s[0] <= a <= s[1] for a in tensor_at)]
    if loops and not whole:
        lo, hi = max(loops, key=lambda s: s[1] - s[0])
    else:
        whole = True
        lo, hi = code[0][0], code[-1][0]
    body = [c for c in code if lo <= c[0] <= hi]
    inner = sorted({s for s in spans if lo <= s[0] and s[1] <= hi and s != (lo, hi)})
    return {"lo": lo, "hi": hi, "whole": whole, "body": body, "inner": inner, "tail": len(tail)}


def spec(text):
    """PATTERN[=MS,THREADS,PER_SM,GRID,CHUNKS] -> (pattern, dict or None)."""
    if "=" not in text:
        return text, None
    pattern, rest = text.rsplit("=", 1)
    parts = rest.split(",")
    try:
        ms, threads, per_sm, grid, chunks = float(parts[0]), *(int(p) for p in parts[1:])
    except (ValueError, TypeError) as e:
        raise SassError(f"{text!r}: want PATTERN=MS,THREADS,PER_SM,GRID,CHUNKS (ms a number, the rest integers)") from e
    if min(ms, threads, per_sm, grid, chunks) <= 0 or threads % 32:
        raise SassError(f"{text!r}: every number positive, threads a multiple of 32")
    return pattern, {"ms": ms, "threads": threads, "per_sm": per_sm, "grid": grid, "chunks": chunks}


def report(name, res, meas, clock, sms, nlines):
    body = res["body"]
    n = len(body)
    cls = Counter(opclass(op) for _, op, _, _ in body)
    out = [f"### `{name}`", ""]
    where = "whole function (one chunk a block, or no loop holds HGMMA/HMMA)" if res["whole"] else \
        "chunk loop (the largest backward branch holding HGMMA/HMMA)"
    out.append(f"- {where}: 0x{res['lo']:x}..0x{res['hi']:x}, **{n} instructions per warp per chunk** (static)")
    if res["tail"]:
        out.append(f"- {res['tail']} out-of-line instructions after the last EXIT (warp-collective fallbacks, slow "
                   f"paths) not counted")
    for lo, hi in res["inner"]:
        k = sum(1 for c in body if lo <= c[0] <= hi)
        mma = sum(1 for c in body if lo <= c[0] <= hi and c[1] in TENSOR)
        top = Counter(c[3] for c in body if lo <= c[0] <= hi and c[3]).most_common(2)
        at = " (most from " + ", ".join(f"{s} {k}" for s, k in top) + ")" if top else ""
        out.append(f"- inner loop 0x{lo:x}..0x{hi:x}: {k} instructions ({mma} HGMMA/HMMA){at}, counted once (trip "
                   f"count not read statically)")
    if meas:
        wps = meas["threads"] // 32 * meas["per_sm"] / 4
        cyc = n * wps
        rounds = math.ceil(meas["grid"] / sms) / meas["per_sm"]
        per_chunk = meas["ms"] * 1e3 / (rounds * meas["chunks"])
        est = cyc / (clock * 1e3)
        out.append(f"- issue bound: {n} x {wps:g} warps a scheduler ({meas['threads'] // 32} warps x {meas['per_sm']} "
                   f"blocks / 4) = {cyc:,.0f} cycles = **{est:.2f} us** at {clock:g} GHz, one instruction a cycle")
        out.append(f"- measured: {meas['ms']:g} ms / ({rounds:g} block rounds (ceil({meas['grid']} blocks / {sms} SMs) / "
                   f"{meas['per_sm']} at once) x {meas['chunks']} chunks) = **{per_chunk:.2f} us** a chunk; issue "
                   f"bound / measured = **{est / per_chunk:.0%}**")
    out += ["", "| class | count | share |", "|---|---|---|"]
    for c, _ in CLASSES:
        if cls[c]:
            out.append(f"| {c} | {cls[c]} | {cls[c] / n:.1%} |")
    ops = Counter(op for _, op, _, _ in body)
    out += ["", "Largest opcodes: " + ", ".join(f"{op} {k}" for op, k in ops.most_common(12))]
    srcs = defaultdict(Counter)
    for _, op, _, s in body:
        if s and op not in TENSOR:
            srcs[s][opclass(op)] += 1
    if srcs and nlines:
        out += ["", "Source lines with the most non-MMA instructions in the span (innermost line of each):", "",
                "| line | instructions | largest classes |", "|---|---|---|"]
        for s, c in sorted(srcs.items(), key=lambda kv: -sum(kv[1].values()))[:nlines]:
            out.append(f"| {s} | {sum(c.values())} | " + ", ".join(f"{k} {v}" for k, v in c.most_common(3)) + " |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sass", help="cuobjdump -sass or nvdisasm -g text; '-' for stdin")
    ap.add_argument("kernels", nargs="*", help="PATTERN or PATTERN=MS,THREADS,PER_SM,GRID,CHUNKS")
    ap.add_argument("--clock", type=float, default=1.98, help="SM clock in GHz (default 1.98, an H100 SXM's boost)")
    ap.add_argument("--sms", type=int, default=132, help="SMs on the device (default 132, an H100 SXM)")
    ap.add_argument("--lines", type=int, default=8, help="source lines to list when the SASS has line info")
    args = ap.parse_args(argv)
    try:
        if args.clock <= 0 or args.sms <= 0:
            raise SassError("--clock and --sms must be positive")
        specs = [spec(k) for k in (args.kernels or DEFAULT_KERNELS)]
        try:
            fh = sys.stdin if args.sass == "-" else open(args.sass)
        except OSError as e:
            raise SassError(f"{args.sass}: {e.strerror}") from e
        with fh:
            funcs, labels = parse(fh)
        funcs = {k: v for k, v in funcs.items() if v}
        if not funcs:
            raise SassError(f"{args.sass}: no functions with instructions (is it cuobjdump -sass output?)")
        pretty = demangle(list(funcs))
        parts = []
        for pattern, meas in specs:
            name = find_kernel(funcs, pretty, pattern)
            whole = meas is not None and meas["chunks"] == 1  # a block of one chunk has no chunk loop
            parts.append(report(pretty[name], analyse(funcs[name], labels[name], whole), meas, args.clock, args.sms,
                                args.lines))
    except SassError as e:
        print(f"sass_mix.py: {e}", file=sys.stderr)
        return 2
    print("\n".join(parts), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
