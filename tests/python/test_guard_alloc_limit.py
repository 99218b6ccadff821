"""The guard allocator's limit on freed memory (kernelbench/guard_alloc: KGATE_GUARD_FREED_LIMIT), on the CPU: the
allocator built against a stand-in CUDA runtime over host memory (fake_cudart.cpp, with counters), so neither a
GPU nor torch is needed, only a C++ compiler and the CUDA headers. Freed blocks used to wait for the next check
whatever they held, and one worker's quarantine took every free byte of a shared H200."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "python" / "kgate" / "kernelbench" / "guard_alloc" / "guard_alloc.cpp"
INCLUDE = next((p for p in (os.environ.get("CUDA_HOME", "") + "/include", "/usr/local/cuda/include")
                if p and os.path.exists(os.path.join(p, "cuda_runtime_api.h"))), None)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or INCLUDE is None,
                                reason="needs g++ and the CUDA headers")


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard")
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", f"-I{INCLUDE}", str(HERE / "fake_cudart.cpp"), "-o",
                    str(d / "libfakecudart.so")], check=True)
    subprocess.run(["g++", "-std=c++20", "-shared", "-fPIC", f"-I{INCLUDE}", str(SRC), f"-L{d}", "-lfakecudart",
                    f"-Wl,-rpath,{d}", "-o", str(d / "libguard.so")], check=True)
    return d


SCRIPT = textwrap.dedent("""
    import ctypes, json, sys
    d, capturing, overrun = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rt = ctypes.CDLL(d + "/libfakecudart.so", mode=ctypes.RTLD_GLOBAL)
    g = ctypes.CDLL(d + "/libguard.so")
    g.kgate_guard_malloc.restype = ctypes.c_void_p
    g.kgate_guard_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    g.kgate_guard_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    g.kgate_guard_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    val = lambda name: ctypes.c_long.in_dll(rt, name).value
    ctypes.c_int.in_dll(rt, "fake_capturing").value = capturing
    n = 256 << 10
    held = []
    for i in range(8):
        p = g.kgate_guard_malloc(n, 0, None)
        if i == 0 and overrun:
            ctypes.memset(p + n, 0x5A, 4)  # a write past the end of the first block, found once it is freed
        g.kgate_guard_free(p, n, 0, None)
        held.append(val("fake_live_bytes"))
    syncs = val("fake_syncs")
    buf = ctypes.create_string_buffer(4096)
    lines = g.kgate_guard_check(buf, len(buf))
    print(json.dumps({"held": held, "syncs": syncs, "violations": lines, "text": buf.value.decode(),
                      "after_check": val("fake_live_bytes")}))
""")


def _run(libs, limit, capturing=0, overrun=0):
    import json
    env = dict(os.environ)
    if limit is None:
        env.pop("KGATE_GUARD_FREED_LIMIT", None)
    else:
        env["KGATE_GUARD_FREED_LIMIT"] = str(limit)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(libs), str(capturing), str(overrun)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


BLOCK = 512 + (256 << 10) + 512  # a block of 256 KiB with its guards


def test_freed_memory_is_released_once_it_passes_the_limit(libs):
    r = _run(libs, 1 << 20)
    # Four freed blocks pass 1 MiB: checked and released (one synchronization each time), never more held.
    assert max(r["held"]) <= (1 << 20) + BLOCK, r
    assert r["held"][3] == 0 and r["held"][7] == 0 and r["syncs"] == 2, r
    assert r["violations"] == 0 and r["after_check"] == 0, r


def test_without_a_limit_freed_memory_waits_for_the_check_as_before(libs):
    for limit in (0, None):  # off, and the default (2 GiB) that these few blocks never reach
        r = _run(libs, limit)
        assert r["held"] == [BLOCK * (i + 1) for i in range(8)] and r["syncs"] == 0, r
        assert r["after_check"] == 0, r


def test_nothing_is_released_early_while_the_stream_is_being_captured(libs):
    r = _run(libs, 1 << 20, capturing=1)
    assert r["syncs"] == 0 and r["held"][-1] == 8 * BLOCK, r


def test_a_write_past_a_block_released_early_is_still_reported_at_the_check(libs):
    r = _run(libs, 1 << 20, overrun=1)
    assert r["held"][3] == 0, r  # the block with the overrun was released early ...
    assert r["violations"] == 1 and "candidate allocation #1" in r["text"], r  # ... and reported at the check
