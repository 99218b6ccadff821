"""ncu_source_table.py on Nsight Compute source-page CSV written here by hand, no GPU: the layout as parsers of ncu
2025's `--page source --csv --print-source sass` output read it (a "Kernel Name" row, a header row starting with
"Address", one row per SASS instruction; per-reason stall_* columns and their "(Not Issued)" subsets; no units row),
not yet checked against this project's own ncu output (bench/glr/sm90_bwd_notes.md, last section). Asserts the
three tables' numbers, the source lines from nvdisasm text, and the one-line errors with exit status 2."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_source_table as nst  # noqa: E402

KERNEL = "void gdn_bwd::dh_wgmma_kernel<64, 128, 1, 0, 0>(gdn_bwd::DhWgArgs)"  # as ncu 2025 demangles it (bools 1/0)
HEAD = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
        "Instructions Executed", "stall_long_sb", "stall_mio", "stall_short_sb", "stall_barrier", "stall_wait",
        "stall_selected", "stall_mio (Not Issued)"]
BASE = 0x7F3A12340000
# (offset, SASS, all samples, executed, long_sb, mio, short_sb, barrier, wait, selected); the Not-issued columns
# are filled with junk the tables must ignore
CODE = [
    (0x00, "MOV R1, c[0x0][0x28] ;", 0, 256, 0, 0, 0, 0, 0, 0),
    (0x10, "LDS.128 R4, [R2] ;", 40, 8192, 0, 30, 0, 0, 5, 5),
    (0x20, "MUFU.EX2 R8, R4 ;", 100, 16384, 0, 70, 20, 0, 5, 5),
    (0x30, "@!P0 MUFU.EX2 R9, R5 ;", 60, 16384, 0, 50, 0, 0, 5, 5),
    (0x40, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;", 30, 4096, 0, 10, 0, 0, 10, 10),
    (0x50, "DEPBAR.LE SB0, 0x0 ;", 200, 4096, 180, 0, 0, 0, 20, 0),
    (0x60, "STS [R3], R8 ;", 50, 8192, 0, 40, 0, 0, 5, 5),
    (0x70, "BAR.SYNC.DEFER_BLOCKING 0x0 ;", 20, 4096, 0, 0, 0, 20, 0, 0),
    (0x80, "FFMA R10, R8, R9, R10 ;", 0, 8192, 0, 0, 0, 0, 0, 0),
]
TOTAL = 500


def write(tmp_path, code=CODE, head=HEAD, name="dh_wgmma.csv", kernel=KERNEL, extra=()):
    rows = [["Kernel Name", kernel], head] if kernel else [head]
    for off, sass, a, ex, ls, mio, ss, bar, wt, sel in code:
        not_issued = str(a - sel) if isinstance(a, int) else "0"
        rows.append([f"0x{BASE + off:x}", sass, str(a), not_issued, f"{ex:,}", str(ls), str(mio), str(ss), str(bar),
                     str(wt), str(sel), "999"])
    rows += list(extra)
    p = tmp_path / name
    p.write_text("\n".join(",".join('"' + c.replace('"', '""') + '"' for c in r[:len(head)]) for r in rows) + "\n")
    return str(p)


def body(md, start, stop=None):
    part = md.split(start, 1)[1]
    if stop:
        part = part.split(stop, 1)[0]
    return [ln for ln in part.splitlines() if ln.startswith("| ") and not ln.startswith("| offset")
            and not ln.startswith("| opcode") and not ln.startswith("| source")]


def test_reads_offsets_opcodes_and_reasons(tmp_path):
    kernel, reasons, rows = nst.read(write(tmp_path))
    assert kernel == KERNEL
    assert reasons == ["long_scoreboard", "mio_throttle", "short_scoreboard", "barrier", "wait", "selected"]
    assert [x["off"] for x in rows] == [off for off, *_ in CODE]
    assert rows[3]["op"] == "MUFU.EX2" and rows[3]["group"] == "MUFU.EX2"  # the predicate is not the opcode
    assert rows[1]["op"] == "LDS.128" and rows[1]["group"] == "LDS"
    assert rows[2]["executed"] == 16384  # "16,384" as ncu may print it
    assert rows[5]["by"]["long_scoreboard"] == 180 and "mio_throttle (Not Issued)" not in rows[5]["by"]


def test_tables_give_top_instructions_opcodes_and_reasons(tmp_path):
    md = nst.tables(write(tmp_path), top=3)
    assert f"9 instructions, {TOTAL} stall samples (the reasons' columns sum to {TOTAL})" in md
    assert "Samples by reason: mio_throttle 200 (40.0%), long_scoreboard 180 (36.0%), wait 50 (10.0%)" in md
    # (a): split columns are the kernel's largest reasons: mio 200, long_sb 180, wait 50, selected 30, short_sb 20,
    # barrier 20 (a tie: in the CSV's column order; six, so 'other' is 0 here)
    assert "| mio_throttle | long_scoreboard | wait | selected | short_scoreboard | barrier | other | executed |" in md
    a = body(md, "(a)", "(b)")
    assert a == ["| 0050 | `DEPBAR.LE SB0, 0x0 ;` | - | 200 | 40.0 | 0 | 180 | 20 | 0 | 0 | 0 | 0 | 4096 |",
                 "| 0020 | `MUFU.EX2 R8, R4 ;` | - | 100 | 20.0 | 70 | 0 | 5 | 5 | 20 | 0 | 0 | 16384 |",
                 "| 0030 | `@!P0 MUFU.EX2 R9, R5 ;` | - | 60 | 12.0 | 50 | 0 | 5 | 5 | 0 | 0 | 0 | 16384 |"], a
    b = body(md, "(b) Stall samples by opcode", "(c)")
    assert b[0] == "| DEPBAR | 1 | 200 | 40.0 | 0 | 180 | 20 | 0 | 0 | 0 | 0 |"
    assert b[1] == "| MUFU.EX2 | 2 | 160 | 32.0 | 120 | 0 | 10 | 10 | 20 | 0 | 0 |"
    assert [ln.split(" | ")[0] for ln in b] == ["| DEPBAR", "| MUFU.EX2", "| STS", "| LDS", "| HGMMA", "| BAR"]
    assert "by source line" not in md  # no --sass, no lines
    c = body(md, "(c) mio_throttle", "(c) long_scoreboard")
    assert "(c) mio_throttle: 200 samples (40.0% of the kernel's)" in md
    assert c == ["| 0020 | `MUFU.EX2 R8, R4 ;` | - | 70 | 35.0 | 100 |",
                 "| 0030 | `@!P0 MUFU.EX2 R9, R5 ;` | - | 50 | 25.0 | 60 |",
                 "| 0060 | `STS [R3], R8 ;` | - | 40 | 20.0 | 50 |",
                 "| 0010 | `LDS.128 R4, [R2] ;` | - | 30 | 15.0 | 40 |",
                 "| 0040 | `HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;` | - | 10 | 5.0 | 30 |"], c
    assert body(md, "(c) long_scoreboard", "(c) short_scoreboard") == [
        "| 0050 | `DEPBAR.LE SB0, 0x0 ;` | - | 180 | 100.0 | 200 |"]
    assert body(md, "(c) short_scoreboard") == ["| 0020 | `MUFU.EX2 R8, R4 ;` | - | 20 | 100.0 | 100 |"]


def test_other_headings_of_the_same_columns(tmp_path):
    # "# Samples" for the total and the per-reason columns under their metric names, as other ncu exports head them
    head = ["Address", "Source", "# Samples", "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed"] + [
        f"smsp__pcsamp_warps_issue_stalled_{r}" for r in ("long_scoreboard", "mio_throttle", "short_scoreboard",
                                                          "barrier", "wait", "selected")] + [
        "smsp__pcsamp_warps_issue_stalled_mio_throttle_not_issued"]
    md = nst.tables(write(tmp_path, head=head, name="named.csv"))
    assert f"9 instructions, {TOTAL} stall samples (the reasons' columns sum to {TOTAL})" in md
    assert "Samples by reason: mio_throttle 200 (40.0%), long_scoreboard 180 (36.0%), wait 50 (10.0%)" in md


def nvdisasm_text(code, lines, name="_Z15dh_wgmma_kernelILi64ELi128ELb1ELb0ELb0EEv8DhParams"):
    out = [f".text.{name}:"]
    for (off, sass, *_), (f, ln) in zip(code, lines):
        out.append(f'        //## File "/repo/glr/cuda/sm90/{f}", line {ln}')
        out.append(f"        /*{off:04x}*/                   {sass}")
    return out


def test_source_lines_come_from_the_function_with_the_same_code(tmp_path):
    lines = [("gdn_bwd_mma.cuh", 10), ("gdn_bwd_mma.cuh", 20), ("gdn_bwd_mma.cuh", 30), ("gdn_bwd_mma.cuh", 30),
             ("wgmma.cuh", 5), ("gdn_bwd_mma.cuh", 40), ("gdn_bwd_mma.cuh", 50), ("gdn_bwd_mma.cuh", 60),
             ("gdn_bwd_mma.cuh", 70)]
    other = [(off, "NOP ;", *rest) for off, _, *rest in CODE]  # another kernel: other code, other lines
    text = nvdisasm_text(other, [("x.cu", 1)] * len(CODE), "_Z5otherv") + nvdisasm_text(CODE, lines)
    sass = tmp_path / "glr.sass"
    sass.write_text("\n".join(text) + "\n")
    kept = tmp_path / "kept.sass"
    md = nst.tables(write(tmp_path), top=3, sass=str(sass), sass_out=str(kept))
    assert "lines from _Z15dh_wgmma_kernel" in md
    kept = kept.read_text().splitlines()  # the matched function alone, to read beside the CSV
    assert kept[0].startswith(".text._Z15dh_wgmma_kernel") and len(kept) == 1 + 2 * len(CODE) and "NOP" not in kept[2]
    assert "| 0020 | `MUFU.EX2 R8, R4 ;` | gdn_bwd_mma.cuh:30 | 100 |" in md
    src = body(md, "by source line", "(c)")
    assert src[0] == "| gdn_bwd_mma.cuh:40 | 1 | 200 | 40.0 | 0 | 180 | 20 | 0 | 0 | 0 | 0 |"
    assert src[1] == "| gdn_bwd_mma.cuh:30 | 2 | 160 | 32.0 | 120 | 0 | 10 | 10 | 20 | 0 | 0 |"
    assert len(src) == 3  # --top 3 lines
    # SASS text of other code only: no lines, and the table says why
    sass.write_text("\n".join(nvdisasm_text(other, [("x.cu", 1)] * len(CODE), "_Z5otherv")) + "\n")
    md = nst.tables(write(tmp_path), sass=str(sass))
    assert "no function in glr.sass has the CSV's opcodes at its offsets" in md and "by source line" not in md


@pytest.mark.parametrize("head,want", [
    ([c for c in HEAD if c != "Warp Stall Sampling (All Samples)"], "no column 'Warp Stall Sampling (All Samples)'"),
    ([c for c in HEAD if c != "Source"], "no column 'Source'"),
])
def test_a_missing_column_is_named_and_exits_2(tmp_path, capsys, head, want):
    p = tmp_path / "bad.csv"
    p.write_text("\n".join([",".join(head), ",".join(["0x10"] + ["1"] * (len(head) - 1))]) + "\n")
    assert nst.main([str(p)]) == 2
    err = capsys.readouterr().err
    assert want in err and err.count("\n") == 1, err


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    cases = []
    p = tmp_path / "raw.csv"  # a raw-page CSV (ncu_kernels.sh's), not the source page
    p.write_text('"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n"0","k","1"\n')
    cases.append(([str(p)], "no header row starting with 'Address'"))
    nostall = [c for c in HEAD if not c.startswith("stall_")]
    p = tmp_path / "nostall.csv"
    p.write_text(",".join(nostall) + "\n" + ",".join(["0x10", "NOP ;", "1", "1", "1"]) + "\n")
    cases.append(([str(p)], "no stall_* column"))
    cases.append(([write(tmp_path), "--reasons", "mio_throttle,tex_throttle"],
                  "no stall column for reason 'tex_throttle'"))
    bad = list(CODE)
    bad[2] = (0x20, "MUFU.EX2 R8, R4 ;", "many", 1, 0, 0, 0, 0, 0, 0)
    cases.append(([write(tmp_path, bad, name="nan.csv")], "nan.csv:5 Warp Stall Sampling (All Samples): not a number"))
    p = tmp_path / "two.csv"
    p.write_text(open(write(tmp_path)).read() + '"Kernel Name","void other()"\n')
    cases.append(([str(p)], "2 kernels"))
    cases.append(([str(tmp_path / "absent.csv")], "No such file"))
    cases.append(([write(tmp_path), "--top", "0"], "--top 0"))
    for argv, want in cases:
        assert nst.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert want in err and err.count("\n") == 1, (argv, err)
