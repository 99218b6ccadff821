"""sass_mix.py on SASS written here by hand in cuobjdump -sass's layout (two functions: one with a chunk loop of HGMMA
holding an inner loop and followed by an out-of-line collective block, one without a loop), no GPU: the loop found,
the class counts, the issue-bound arithmetic and the errors."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_mix  # noqa: E402

# _ZN2ns6loopedILi64EEEvi = void ns::looped<64>(int), _ZN2ns4flatEv = void ns::flat()
LOOPED = [
    "LDC R1, c[0x0][0x28]",            # 0x00
    "S2R R0, SR_TID.X",                # 0x10
    "IMAD.MOV.U32 R2, RZ, RZ, RZ",     # 0x20  chunk loop from here
    "LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64]",  # 0x30
    "LDGDEPBAR",                       # 0x40
    "DEPBAR.LE SB0, 0x0",              # 0x50
    "BAR.SYNC.DEFER_BLOCKING 0x0",     # 0x60
    "WARPGROUP.ARRIVE",                # 0x70
    "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT",  # 0x80
    "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR12], R24, gsb0",  # 0x90
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",   # 0xa0
    "MUFU.EX2 R5, R5",                 # 0xb0  inner loop 0xb0..0xf0
    "FFMA R6, R5, R7, R6",             # 0xc0
    "F2FP.BF16.F32.PACK_AB R8, R6, R6",  # 0xd0
    "ISETP.NE.AND P0, PT, R9, RZ, PT",  # 0xe0
    "@P0 BRA 0xb0",                    # 0xf0
    "STS [R10], R8",                   # 0x100
    "IADD3 R2, R2, 0x1, RZ",           # 0x110
    "@P1 BRA 0x20",                    # 0x120 chunk loop to here
    "EXIT",                            # 0x130
    "WARPSYNC.COLLECTIVE R18, 0x160",  # 0x140 out-of-line: a branch back that is no loop
    "ENDCOLLECTIVE",                   # 0x150
    "BRA 0x100",                       # 0x160
    "BRA 0x170",                       # 0x170 the trap
    "NOP",                             # 0x180
]
FLAT = ["S2R R0, SR_TID.X", "LDG.E R2, desc[UR4][R4.64]", "FMUL R2, R2, R2", "STG.E desc[UR4][R4.64], R2", "EXIT",
        "BRA 0x50"]


def function(name, code):
    lines = [f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"']
    for i, ins in enumerate(code):
        lines.append(f"        /*{16 * i:04x}*/                   {ins} ;{' ' * 20}/* 0x000fc00000000000 */")
        lines.append(f"{' ' * 102}/* 0x000fe20000000800 */")
    return lines + ["\t\t.........."]


@pytest.fixture
def sass(tmp_path):
    p = tmp_path / "k.sass"
    text = ["", "Fatbin elf code:", "================", "arch = sm_90a", "", "\tcode for sm_90a", "\t.target\tsm_90a", ""]
    text += function("_ZN2ns6loopedILi64EEEvi", LOOPED) + [""] + function("_ZN2ns4flatEv", FLAT)
    p.write_text("\n".join(text) + "\n")
    return str(p)


def run(capsys, *argv):
    rc = sass_mix.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_chunk_loop_inner_loop_and_classes(sass, capsys):
    rc, out, err = run(capsys, sass, "looped<64>")
    assert rc == 0, err
    assert "chunk loop (the largest backward branch holding HGMMA/HMMA): 0x20..0x120, **17 instructions" in out
    assert "inner loop 0xb0..0xf0: 5 instructions (0 HGMMA/HMMA), counted once (trip count not read statically)" in out
    assert "3 out-of-line instructions after the last EXIT" in out  # the trap and NOP padding are not counted
    for row in ("| HGMMA/HMMA | 2 | 11.8% |", "| wgmma arrive/wait | 2 |", "| LDGSTS (cp.async) | 1 |",
                "| cp.async waits | 2 |", "| barriers/fences | 1 |", "| MUFU | 1 |", "| FP32 (FFMA/FMUL/FADD...) | 1 |",
                "| conversions | 1 |", "| STS | 1 |", "| int/address/predicate | 3 |", "| branch/control | 2 |"):
        assert row in out
    assert "issue bound" not in out  # no measured time given


def test_issue_bound_against_measured(sass, capsys):
    # 17 instructions x (4 warps x 2 blocks / 4) = 34 cycles = 0.017 us at 2 GHz; 0.064 ms over 1 round of 64 chunks
    rc, out, _ = run(capsys, "--clock", "2", "--sms", "132", sass, "looped<64>=0.064,128,2,256,64")
    assert rc == 0
    assert "= 34 cycles = **0.02 us** at 2 GHz" in out and "= **1.00 us** a chunk" in out and "**2%**" in out


def test_function_without_loop_counted_whole(sass, capsys):
    rc, out, _ = run(capsys, sass, "flat()=0.001,128,1,132,1")
    assert rc == 0
    assert "whole function" in out and "**5 instructions per warp per chunk**" in out  # the trap branch left out
    assert "| LDG | 1 |" in out and "| STG/atomics | 1 |" in out


def test_pattern_starts_at_a_name_boundary(sass, capsys):
    rc, _, err = run(capsys, sass, "ooped<64>")
    assert rc == 2 and err.count("\n") == 1 and "no kernel in the SASS matches 'ooped<64>'" in err


def test_missing_kernel_is_one_line_and_exit_2(sass, capsys):
    rc, out, err = run(capsys, sass, "h_kernel<64, 128, true, true>")
    assert rc == 2 and out == ""
    assert err == "sass_mix.py: no kernel in the SASS matches 'h_kernel<64, 128, true, true>'\n"


def test_bad_inputs(tmp_path, sass, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing here\n")
    for argv, says in (([str(empty), "flat"], "no functions with instructions"),
                       ([str(tmp_path / "absent.sass"), "flat"], "absent.sass"),
                       ([sass, "flat=1,100,1,1,1"], "threads a multiple of 32"),
                       ([sass, "flat=x,128,1,1,1"], "want PATTERN=MS,THREADS,PER_SM,GRID,CHUNKS"),
                       (["--clock", "0", sass, "flat"], "--clock and --sms must be positive")):
        rc, _, err = run(capsys, *argv)
        assert rc == 2 and err.count("\n") == 1 and says in err, (argv, err)


def test_a_second_copy_of_a_kernel_is_not_added(tmp_path, capsys):
    # forward.cu.o and backward.cu.o disassembled into one file both hold some kernels: the loop counted once
    p = tmp_path / "two.sass"
    copy = function("_ZN2ns6loopedILi64EEEvi", LOOPED)
    p.write_text("\n".join(copy + [""] + copy) + "\n")
    rc, out, err = run(capsys, str(p), "looped<64>")
    assert rc == 0, err
    assert "0x20..0x120, **17 instructions" in out and "| HGMMA/HMMA | 2 | 11.8% |" in out
