"""The bounds gate's compute-sanitizer pass in the audit (`--sanitizer`, kernelbench/sanitizer.py), without a GPU:
numpy rows end to end through `python -m kgate audit`, with a fake compute-sanitizer (KGATE_COMPUTE_SANITIZER)
that writes a canned log in compute-sanitizer's format (the C++ parser's test log, tests/gpu/sanitizer_logs)
and then runs the worker it was given, or hangs. The engine's parser, lookup and verdict come through kgate._core."""
import json
import os
import sys
import time

import pytest

from conftest import control_rows, read_jsonl, run_cli, write_corpus

from kgate import _core

FAST = ["--fw", "numpy", "--call-timeout", "10", "--jobs", "2", "--seed", "1234", "--gates", "oracle,bounds"]

# The tool's logs in tests/gpu/sanitizer_logs, which the C++ parser's tests read too (its README says where each
# came from): memcheck.log, a write one element past a buffer, then the launch failure it causes (an API error: a
# consequence, not an access); memcheck_timed_out.log, the whole memcheck log of a correct row on the first GPU
# run (2026-12-06, H100), where the tool gave up waiting for the worker to initialise CUDA; and
# racecheck_child_process.log, the whole racecheck log of correct_linear on the same day's sanitizer-check run,
# whose hint about the tool's own coverage the parser of the time took for an access (a FAIL).
LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "sanitizer_logs")
MEMCHECK_LOG = open(os.path.join(LOGS, "memcheck.log")).read()
TIMED_OUT_LOG = open(os.path.join(LOGS, "memcheck_timed_out.log")).read()
CHILD_PROCESS_LOG = open(os.path.join(LOGS, "racecheck_child_process.log")).read()
# the program killed by SIGKILL after its CUDA work (scripts/sanitizer-probe, 2026-12-07, H100): the tool still
# writes a summary of 0 errors
KILLED_LOG = open(os.path.join(LOGS, "memcheck_program_killed.log")).read()
CLEAN_LOG = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"

# The fake tool: `--tool T --log-file F [--opt V ...] COMMAND...`, written as compute-sanitizer writes: its banner
# when it starts, then the worker runs as its child, then the records and the summary line when the worker has
# ended. memcheck: the report above; racecheck: a clean log; synccheck: hangs and never starts the worker.
# mode "timed_out": the banner and the messages of a tool that gave up attaching (TIMED_OUT_LOG), then the
# worker runs, and no summary; mode "child_process": likewise, with CHILD_PROCESS_LOG. Its first log line (before
# any record, which the parser skips) says what it was given, for the test to read back from the record's output.
FAKE = f"""#!{sys.executable}
import os, sys, time
MODE = "@MODE@"
args, opts = sys.argv[1:], {{}}
while args and args[0].startswith("--"):
    opts[args[0]] = args[1]
    args = args[2:]
tool = opts["--tool"]
if tool == "synccheck":
    time.sleep(3600)
def log(text):
    with open(opts["--log-file"], "a") as f:
        f.write(text)
log("fake tool: " + " ".join(f"{{k}} {{v}}" for k, v in opts.items())
    + " caching=" + os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "-") + "\\n")
HEAD = {{"timed_out": {TIMED_OUT_LOG!r}, "child_process": {CHILD_PROCESS_LOG!r}}}
log(HEAD.get(MODE, "========= COMPUTE-SANITIZER\\n"))
pid = os.fork()
if pid == 0:
    os.execv(args[0], args)
os.close(int(args[-1]))  # the worker's end of its socket is the worker's alone: it must close when the worker dies
_, status = os.waitpid(pid, 0)
if MODE not in HEAD:
    body = {MEMCHECK_LOG!r} if tool == "memcheck" else {CLEAN_LOG!r}
    log(body.split("\\n", 1)[1])  # the records and the summary, below the banner
rc = os.waitstatus_to_exitcode(status)
os._exit(rc if rc >= 0 else 128 - rc)
"""


def fake_tool(tmp_path, mode="report"):
    path = tmp_path / f"compute-sanitizer-{mode}"
    path.write_text(FAKE.replace("@MODE@", mode))
    path.chmod(0o755)  # kgate-isolate makes the program it starts reachable to the worker's uid
    return str(path)


def gate(rec, name):
    return next((g for g in rec["gates"] if g["gate"] == name), None)


def test_the_tools_are_the_engines_and_a_bad_name_is_one_line_and_exit_2(workdir):
    assert _core.sanitizer_tools() == ["memcheck", "racecheck", "initcheck", "synccheck"]
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--sanitizer", "memcheck,leakcheck")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "leakcheck" in r.stderr and "memcheck, racecheck, initcheck, synccheck" in r.stderr
    assert not (workdir / "out.jsonl").exists()


def test_reported_write_fails_the_row_clean_log_passes_hung_tool_errors_and_the_audit_goes_on(workdir, monkeypatch):
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", fake_tool(workdir))
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale", "correct_softmax", "crashes"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--sanitizer", "memcheck,racecheck,synccheck",
                "--sanitizer-timeout", "8")
    assert r.returncode == 0, r.stderr
    recs = read_jsonl(workdir / "out.jsonl")
    assert len(recs) == 3 and all(x["status"] == "ok" for x in recs), [x.get("message") for x in recs]
    # a candidate that crashes under the tool costs that pass's verdict, never the run: a crash with no record
    # of the tool's is no evidence against it (its own run judged the crash)
    crashed = next(x for x in recs if x["task"] == 3)
    assert gate(crashed, "bounds")["verdict"] == "CRASH"
    race = gate(crashed, "bounds/racecheck")
    assert race["verdict"] == "ERROR" and "ended CRASH with no report of the tool's" in race["summary"], race
    recs = [x for x in recs if x is not crashed]
    for rec in recs:
        assert gate(rec, "bounds")["verdict"] == "PASS"  # the row's own run: the candidate is correct
        mem = gate(rec, "bounds/memcheck")
        assert mem["verdict"] == "FAIL", mem
        assert mem["evidence"]["got"] == "Invalid __global__ write of size 4 bytes"
        assert "add_kernel(cctl::Vec<const float>" in mem["evidence"]["detail"]
        assert "1 finding(s) in all" in mem["evidence"]["detail"]  # the API error is no access
        # memcheck with every guard off: torch's caching allocator too; the worker's log named per start
        assert "--tool memcheck" in mem["output"] and "caching=1" in mem["output"], mem["output"]
        # the tool waits for the worker's CUDA as long as the pass waits for any request (not its default 10 s)
        assert "--launch-timeout 8 " in mem["output"], mem["output"]
        assert "kgate-tool-log.0.log" in mem["output"]
        race = gate(rec, "bounds/racecheck")
        assert race["verdict"] == "PASS" and "reported nothing" in race["summary"], race
        assert "caching=-" in race["output"]
        sync = gate(rec, "bounds/synccheck")
        assert sync["verdict"] == "ERROR", sync
        assert "could not run under compute-sanitizer --tool synccheck" in sync["summary"]
        assert "within 8 s" in sync["summary"], sync["summary"]
        assert sync["seconds"] < 60, sync["seconds"]
        # the engine's classification of the merged gates: a memcheck FAIL is the bounds gate's, tolerance-free
        assert rec["classification"] == "broken", rec
        assert any(b.startswith("bounds/memcheck: FAIL of a tolerance-free gate") for b in rec["broken_reasons"])
        assert rec["sanitizer_pass"] == {"tools": ["memcheck", "racecheck", "synccheck"],
                                         "classification_before": "clean"}
    rep = run_cli("report", "out.jsonl", cwd=workdir)
    assert rep.returncode == 0, rep.stderr
    line = next(l for l in rep.stdout.splitlines() if l.startswith("bounds/memcheck"))
    assert line.split()[1:4] == ["3", "0", "3"], line  # its own findings, PASS, FAIL
    assert "ran again under compute-sanitizer" in rep.stdout and ": 3 of 3 (broken 3)" in rep.stdout, rep.stdout


def test_a_missing_tool_is_a_skip_that_says_where_it_looked_and_leaves_the_class(workdir, monkeypatch):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", str(workdir / "no-such-sanitizer"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--sanitizer", "memcheck")
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    g = gate(rec, "bounds/memcheck")
    if g["verdict"] != "SKIP" and os.path.exists("/usr/local/cuda/bin/compute-sanitizer"):
        pytest.skip("compute-sanitizer is installed here")
    assert g["verdict"] == "SKIP", g
    assert "not installed" in g["summary"] and str(workdir / "no-such-sanitizer") in g["summary"], g["summary"]
    assert rec["classification"] == "clean" and "classification_before" not in rec["sanitizer_pass"]


def test_without_the_option_there_is_no_pass(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    assert [g["gate"] for g in rec["gates"] if "/" in g["gate"]] == [] and "sanitizer_pass" not in rec


# ---- the pass itself (kernelbench/sanitizer.py) with a stand-in for rowjob._verify_once --------------------

def _row(bounds_seconds=1.0):
    return {"status": "ok", "classification": "clean", "phases": {"start": 1.0, "build": 0.5},
            "gates": [{"gate": "bounds", "verdict": "PASS", "seconds": bounds_seconds, "cases": 4}]}


def test_memcheck_runs_with_every_guard_off_and_the_other_tools_keep_them(monkeypatch):
    from kgate.kernelbench import sanitizer
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")
    seen = []

    def verify_once(spec, fw_name, library, tool=None):
        seen.append((spec["gates"], library, tool))
        return {"status": "ok", "gates": [{"gate": "bounds", "verdict": "PASS", "cases": 4}],
                "tool_logs": [("kgate-tool-log.0.log", CLEAN_LOG)]}

    for tool in ("memcheck", "racecheck"):
        g = sanitizer.run(_row(), {"seed": "1", "row_timeout": 600}, "numpy", "/lib/guard.so", tool, 0.0, verify_once)
        assert g["verdict"] == "PASS" and g["gate"] == f"bounds/{tool}", g
    (gates_m, lib_m, m), (gates_r, lib_r, r) = seen
    assert gates_m == gates_r == ["bounds"]
    assert lib_m is None and m["guard_bytes"] == 0 and m["env"] == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    assert lib_r == "/lib/guard.so" and r["guard_bytes"] is None and r["env"] == {}
    assert m["launch_prefix"][:3] == ["/bin/true", "--tool", "memcheck"] and "{log}" in m["launch_prefix"]


def test_a_pass_that_would_overrun_the_row_is_skipped_with_the_reason(monkeypatch):
    from kgate.kernelbench import sanitizer
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")

    def verify_once(*a, **k):
        raise AssertionError("the pass must not run")

    rec = _row(bounds_seconds=20.0)
    g = sanitizer.run(rec, {"seed": "1", "row_timeout": 240}, "numpy", None, "memcheck", 30.0, verify_once)
    assert g["verdict"] == "SKIP" and g["summary"].startswith("compute-sanitizer memcheck was not run: the row had "
                                                              "taken 30 s of its 240 s"), g
    assert rec["gates"][-1] is g


def test_the_engine_judges_a_sanitizer_record_as_the_bounds_gate():
    fail = {"gate": "bounds/memcheck", "verdict": "FAIL", "finding": "sanitizer"}
    c = _core.classify([{"gate": "oracle", "verdict": "PASS"}, fail])
    assert c["classification"] == "broken" and c["exit_code"] == 1, c
    # a crash or hang under the tool with no record of the tool's is no evidence: ERROR, not CRASH
    crash = json.loads(_core.sanitizer_result("memcheck", [("a.log", CLEAN_LOG)],
                                              {"gate": "bounds", "verdict": "CRASH", "summary": "SIGSEGV"}, 1))
    assert crash["verdict"] == "ERROR" and "SIGSEGV" in crash["summary"], crash
    # the guards' own finding under a tool that keeps them stands
    guard = json.loads(_core.sanitizer_result("racecheck", [], {"gate": "bounds", "verdict": "FAIL",
                                                                "summary": "guard", "finding": "guard"}, 1))
    assert guard["verdict"] == "FAIL" and guard["finding"] == "guard"
    # the tool always writes its banner: no log at all is a pass that did not run
    none = json.loads(_core.sanitizer_result("memcheck", [], {"gate": "bounds", "verdict": "PASS", "cases": 3}, 1))
    assert none["verdict"] == "ERROR" and "wrote no log" in none["summary"], none
    found = _core.parse_sanitizer_log("memcheck", MEMCHECK_LOG)
    assert [f["api_error"] for f in found] == [False, True] and found[0]["size"] == 4


# ---- the first GPU run's failures (2026-12-06, H100), without a GPU -------------------------------------------

def test_a_tool_that_did_not_attach_is_an_error_not_a_finding(workdir, monkeypatch):
    # The tool's own messages (it timed out waiting for the worker, which then ran uninstrumented) were parsed as
    # two access findings: a FAIL that made a correct row broken. Now an ERROR naming the tool's words.
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", fake_tool(workdir, "timed_out"))
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--sanitizer", "memcheck", "--sanitizer-timeout", "20")
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    assert rec["status"] == "ok" and gate(rec, "bounds")["verdict"] == "PASS", rec
    mem = gate(rec, "bounds/memcheck")
    assert mem["verdict"] == "ERROR", mem
    assert mem["summary"].startswith("compute-sanitizer memcheck did not instrument the worker"), mem["summary"]
    assert ": Error: No attachable process found. compute-sanitizer timed-out. | Default timeout" in mem["summary"]
    assert not mem.get("evidence") and "Awaiting target completion" in mem["output"]
    assert [f["tool_error"] for f in _core.parse_sanitizer_log("memcheck", TIMED_OUT_LOG)] == [True, True]
    # not broken: the pass could not judge, and the engine says so (a counted gate ended ERROR: incomplete)
    assert rec["classification"] == "incomplete" and rec["broken_reasons"] == [], rec
    assert rec["sanitizer_pass"] == {"tools": ["memcheck"], "classification_before": "clean"}


def test_the_tools_hint_about_its_own_coverage_is_an_error_not_a_finding(workdir, monkeypatch):
    # correct_linear under racecheck on the 2026-12-06 H100 sanitizer-check run: the tool's hint ("Tracking
    # kernels launched by child processes requires ...") was parsed as an access, FAIL, the correct row broken.
    # A line is a finding now only in the shape of a report; any other is the pass's ERROR.
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", fake_tool(workdir, "child_process"))
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--sanitizer", "racecheck", "--sanitizer-timeout", "20")
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    assert rec["status"] == "ok" and gate(rec, "bounds")["verdict"] == "PASS", rec
    race = gate(rec, "bounds/racecheck")
    assert race["verdict"] == "ERROR", race
    assert race["summary"].startswith("compute-sanitizer racecheck did not instrument the worker"), race["summary"]
    assert "Tracking kernels launched by child processes requires" in race["summary"], race["summary"]
    assert not race.get("evidence") and not race.get("finding"), race
    found = _core.parse_sanitizer_log("racecheck", CHILD_PROCESS_LOG)
    assert [(f["tool_error"], f["api_error"]) for f in found] == [(True, False), (True, False)], found
    # not broken: the pass could not judge (a counted gate ended ERROR: incomplete)
    assert rec["classification"] == "incomplete" and rec["broken_reasons"] == [], rec
    assert rec["sanitizer_pass"] == {"tools": ["racecheck"], "classification_before": "clean"}


def _worker_did_not_answer_build(*a, **k):
    from kgate.kernelbench.client import WorkerDied
    raise WorkerDied("timeout", "no answer to build within 180 s", "", request="build", limit=180.0)


def _audited_row():
    return {"type": "row", "key": "k", "status": "ok", "classification": "clean", "broken_reasons": [],
            "phases": {"start": 1.0, "build": 0.5}, "guard_allocator": "off: caching allocator",
            "gates": [{"gate": "oracle", "verdict": "PASS"},
                      {"gate": "bounds", "verdict": "PASS", "seconds": 0.1, "cases": 4},
                      {"gate": "coverage", "verdict": "PASS", "seconds": 0.1}]}


def test_a_second_run_that_raises_is_the_pass_error_and_the_row_stays_ok(monkeypatch):
    # correct_linear: under memcheck the worker did not answer its build request; client.WorkerDied went up
    # through sanitizer.run and the row driver died (status driver_crash, 13 gates' verdicts lost).
    from kgate.kernelbench import rowjob
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")
    monkeypatch.setattr(rowjob, "_verify_once", _worker_did_not_answer_build)
    emitted = []
    monkeypatch.setattr(rowjob, "emit", emitted.append)
    rec = _audited_row()
    rowjob._sanitizer_passes(rec, {"key": "k", "seed": "1", "row_timeout": 600, "sanitizer": ["memcheck", "racecheck"],
                                   "sanitizer_timeout": 180}, "numpy", None, time.monotonic())
    assert rec["status"] == "ok"
    for tool in ("memcheck", "racecheck"):
        g = gate(rec, f"bounds/{tool}")
        assert g["verdict"] == "ERROR", g
        assert g["summary"] == f"the worker under compute-sanitizer {tool} did not answer its build request within 180 s"
    assert rec["classification"] != "broken" and rec["broken_reasons"] == []
    assert [e["type"] for e in emitted] == ["gate_start", "gate", "gate_start", "gate"]


def test_anything_else_a_pass_raises_is_its_error_too(monkeypatch):
    from kgate.kernelbench import sanitizer
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")

    def verify_once(*a, **k):
        raise OSError("no space left on device")

    rec = _row()
    g = sanitizer.run(rec, {"seed": "1", "row_timeout": 600}, "numpy", None, "memcheck", 0.0, verify_once)
    assert g["verdict"] == "ERROR" and "OSError: no space left on device" in g["summary"], g
    assert rec["gates"][-1] is g and rec["status"] == "ok"


def test_the_guard_allocators_second_pass_that_raises_leaves_the_row_as_it_was(monkeypatch):
    # the same hole in the guard allocator's second pass (also through _verify_once), closed by the same helper
    from kgate.kernelbench import rowjob
    monkeypatch.setattr(rowjob, "_verify_once", _worker_did_not_answer_build)
    rec = _audited_row()
    rowjob._guarded_pass(rec, {"key": "k", "seed": "1", "gates": ["oracle", "bounds", "coverage"]}, "numpy",
                         "/lib/guard.so")
    assert rec["status"] == "ok" and rec["classification"] == "clean"
    assert rec["guarded_pass"]["merged"] is False
    assert "the pass's worker did not answer its build request within 180 s" in rec["guarded_pass"]["why"], rec
    assert [g["verdict"] for g in rec["gates"]] == ["PASS", "PASS", "PASS"]


def test_the_pass_timeout_is_the_tools_launch_timeout_and_fits_the_row(monkeypatch):
    from kgate.kernelbench import sanitizer
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")
    seen = []

    def verify_once(spec, fw_name, library, tool=None):
        seen.append(tool)
        return {"status": "ok", "gates": [{"gate": "bounds", "verdict": "PASS", "cases": 4}],
                "tool_logs": [("kgate-tool-log.0.log", "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")]}

    g = sanitizer.run(_row(), {"seed": "1", "row_timeout": 600, "sanitizer_timeout": 180}, "numpy", None, "memcheck",
                      0.0, verify_once)
    assert g["verdict"] == "PASS", g
    prefix = seen[-1]["launch_prefix"]
    assert seen[-1]["timeout"] == 180 and prefix[prefix.index("--launch-timeout") + 1] == "180", seen[-1]
    # 100 s of a 200 s row taken: one hung request may take what is left (less 30 s), not the whole 180 s
    g = sanitizer.run(_row(), {"seed": "1", "row_timeout": 200, "sanitizer_timeout": 180}, "numpy", None, "memcheck",
                      100.0, verify_once)
    prefix = seen[-1]["launch_prefix"]
    assert seen[-1]["timeout"] == 70 and prefix[prefix.index("--launch-timeout") + 1] == "70", seen[-1]
    assert "70 s per request (what was left of the row's time limit)" in g["pass"], g["pass"]
    # a log without the tool's summary (it did not see the worker to its end) is no PASS
    g = sanitizer.run(_row(), {"seed": "1", "row_timeout": 600}, "numpy", None, "memcheck", 0.0,
                      lambda *a, **k: {**verify_once(*a, **k),
                                       "tool_logs": [("kgate-tool-log.0.log", "========= COMPUTE-SANITIZER\n")]})
    assert g["verdict"] == "ERROR" and "ends without its summary" in g["summary"], g


def test_an_access_reported_before_the_worker_died_stays_the_evidence(monkeypatch):
    # memcheck ends a kernel that writes out of bounds, and that may end the worker before the bounds gate's
    # record: the tool's report is the evidence however the run ended (a crash with no report stays ERROR)
    from kgate.kernelbench import sanitizer
    monkeypatch.setenv("KGATE_COMPUTE_SANITIZER", "/bin/true")

    def died(logs):
        return lambda *a, **k: {"status": "crash", "message": "the worker died during its build request (SIGSEGV)",
                                "gates": [], "tool_logs": logs}

    rec = _row()
    g = sanitizer.run(rec, {"seed": "1", "row_timeout": 600}, "numpy", None, "memcheck", 0.0,
                      died([["kgate-tool-log.0.log", MEMCHECK_LOG]]))
    assert g["verdict"] == "FAIL" and g["finding"] == "sanitizer", g
    assert "Invalid __global__ write" in g["summary"] and "ended crash" in g["summary"], g["summary"]
    rec = _row()
    g = sanitizer.run(rec, {"seed": "1", "row_timeout": 600}, "numpy", None, "memcheck", 0.0,
                      died([["kgate-tool-log.0.log", "========= COMPUTE-SANITIZER\n"]]))
    assert g["verdict"] == "ERROR" and "SIGSEGV" in g["summary"], g
    # A worker killed under the tool (its request's time limit) leaves a whole log, summary "0 errors" included:
    # the log alone would read clean, the run's end makes it ERROR, never PASS.
    for status in ("timeout", "crash"):
        g = sanitizer.run(_row(), {"seed": "1", "row_timeout": 600}, "numpy", None, "memcheck", 0.0,
                          lambda *a, **k: {"status": status, "message": "the worker was killed (SIGKILL)",
                                           "gates": [], "tool_logs": [["kgate-tool-log.0.log", KILLED_LOG]]})
        assert g["verdict"] == "ERROR" and f"{status}: the worker was killed" in g["summary"], g
