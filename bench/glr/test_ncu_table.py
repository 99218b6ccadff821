"""ncu_table.py on Nsight Compute raw CSV written here by hand in its layout (header row, units row, one row per
launch), no GPU: values, units, per-kernel aggregation, the bandwidth column and the errors."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_table  # noqa: E402

HEAD = ['"ID"', '"Process ID"', '"Kernel Name"', '"Block Size"', '"Grid Size"', '"gpu__time_duration.sum"',
        '"dram__bytes_read.sum"', '"dram__bytes_write.sum"', '"sm__throughput.avg.pct_of_peak_sustained_elapsed"',
        '"launch__registers_per_thread"']
UNITS = ['""', '""', '""', '""', '""', '"nsecond"', '"byte"', '"byte"', '"%"', '"register/thread"']


def write(tmp_path, rows, units=UNITS, name="B8.glr.csv"):
    p = tmp_path / name
    lines = ["==PROF== Connected to process 123", ",".join(HEAD), ",".join(units)]
    lines += [",".join(f'"{c}"' for c in r) for r in rows]
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_reads_values_in_base_units_and_skips_ncu_lines(tmp_path):
    p = write(tmp_path, [["0", "1", "void ns::k<64>(ns::Args)", "(128,1,1)", "(2,256,1)", "1,000,000",
                          "2000000000", "1000000000", "50.5", "200"]])
    (name, v), = ncu_table.read(p)
    assert name == "void ns::k<64>(ns::Args)"
    assert v["gpu__time_duration.sum"] == 1e6 and v["dram__bytes_read.sum"] == 2e9
    assert v["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == 50.5


def test_scaled_units_are_converted(tmp_path):
    units = list(UNITS)
    units[5], units[6], units[7] = '"usecond"', '"Gbyte"', '"Mbyte"'
    p = write(tmp_path, [["0", "1", "k", "(1,1,1)", "(1,1,1)", "2", "1.5", "3", "1", "32"]], units)
    (_, v), = ncu_table.read(p)
    assert v["gpu__time_duration.sum"] == 2000 and v["dram__bytes_read.sum"] == 1.5e9
    assert v["dram__bytes_write.sum"] == 3e6


def test_short_time_units_as_this_ncu_writes_them(tmp_path):
    # the H100's ncu of 2026-12-05 wrote "ns" (not "nsecond") for gpu__time_duration.sum
    for unit, ns in (("ns", 118208), ("us", 118208e3), ("ms", 118208e6)):
        units = list(UNITS)
        units[5] = f'"{unit}"'
        p = write(tmp_path, [["0", "1", "k", "(1,1,1)", "(1,1,1)", "118,208", "1", "1", "1", "32"]], units,
                  name=f"B8.{unit}.csv")
        (_, v), = ncu_table.read(p)
        assert v["gpu__time_duration.sum"] == ns


def test_table_sums_launches_of_one_kernel_and_gives_bandwidth(tmp_path):
    # two launches of a, 1 ms each, 2 GB read + 1 GB written each: 6 GB in 2 ms = 3 TB/s; b alone, smaller
    rows = [["0", "1", "void glr::a<1>(glr::P)", "(128,1,1)", "(1,1,1)", "1000000", "2000000000", "1000000000", "40",
             "200"],
            ["1", "1", "void glr::b(glr::P)", "(256,1,1)", "(1,1,1)", "500000", "100000000", "0", "90", "100"],
            ["2", "1", "void glr::a<1>(glr::P)", "(128,1,1)", "(1,1,1)", "1000000", "2000000000", "1000000000", "60",
             "200"]]
    md = ncu_table.table(write(tmp_path, rows), copy_tbs=3.0)
    body = [ln for ln in md.splitlines() if ln.startswith("| `")]
    assert body[0].startswith("| `a<1>` | 2 | 2000.0 | 4000.0 | 2000.0 | 3.00 | 100 |")
    assert "| 50.0 |" in body[0]  # SM % weighted by duration: (40 + 60) / 2
    assert body[1].startswith("| `b` | 1 | 500.0 |")
    assert body[2].startswith("| `all kernels` | 3 | 2500.0 |")
    assert "3 launches, 2.500 ms of kernels, DRAM 6.10 GB" in md


def test_not_ncu_output_is_a_usage_error(tmp_path, capsys):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    assert ncu_table.main([str(p)]) == 2
    assert "no header row with 'Kernel Name'" in capsys.readouterr().err


def test_a_bad_number_names_file_line_and_metric(tmp_path, capsys):
    p = write(tmp_path, [["0", "1", "k", "(1,1,1)", "(1,1,1)", "fast", "1", "1", "1", "1"]])
    assert ncu_table.main([p]) == 2
    err = capsys.readouterr().err
    assert "B8.glr.csv:4 gpu__time_duration.sum: not a number: 'fast'" in err


def test_a_nonpositive_ceiling_is_refused(tmp_path, capsys):
    p = write(tmp_path, [["0", "1", "k", "(1,1,1)", "(1,1,1)", "1", "1", "1", "1", "1"]])
    assert ncu_table.main(["--copy-tbs", "0", p]) == 2


@pytest.mark.parametrize("name,want", [("void a::b::k<64, true>(a::Args)", "k<64, true>"),
                                       ("glr::cuda::x(glr::A)", "x")])
def test_short_names(name, want):
    assert ncu_table.short(name) == want


def test_stall_reasons_give_each_kernels_largest_waits(tmp_path):
    # two launches of a (1 ms and 3 ms): long_scoreboard 2 and 4 -> 3.5 weighted by duration, barrier 1 and 1;
    # b has no stall counters recorded and gets no row
    ls = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
    bar = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
    wt = "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
    head = HEAD + [f'"{ls}"', f'"{bar}"', f'"{wt}"', f'"{ncu_table.ISSUE_ACTIVE}"']
    units = UNITS + ['"inst"', '"inst"', '""', '"%"']  # the unit ncu on the H100 of 2026-12-07 wrote for the ratios
    p = tmp_path / "B8.glr.csv"
    rows = [["0", "1", "void glr::a(glr::P)", "(1,1,1)", "(1,1,1)", "1000000", "1", "1", "1", "1", "2", "1", "0.5", "10"],
            ["1", "1", "void glr::b(glr::P)", "(1,1,1)", "(1,1,1)", "500000", "1", "1", "1", "1", "", "", "", ""],
            ["2", "1", "void glr::a(glr::P)", "(1,1,1)", "(1,1,1)", "3000000", "1", "1", "1", "1", "4", "1", "0.5", "30"]]
    p.write_text("\n".join([",".join(head), ",".join(units)] + [",".join(f'"{c}"' for c in r) for r in rows]) + "\n")
    md = ncu_table.table(str(p))
    assert "Where the warps wait" in md
    waits = [ln for ln in md.split("Where the warps wait")[1].splitlines() if ln.startswith("| `")]
    assert waits == ["| `a` | 25.0 | 5.00 | long_scoreboard 3.50 (70%), barrier 1.00 (20%), wait 0.50 (10%) |"], waits
    # a CSV without stall counters: no such table
    assert "Where the warps wait" not in ncu_table.table(write(tmp_path, [["0", "1", "k", "(1,1,1)", "(1,1,1)", "1",
                                                                          "1", "1", "1", "1"]], name="plain.csv"))
