"""The audit driver with numpy candidates on the CPU: bad input becomes verdicts, crashes and hangs cost
one row, a killed run resumes without recomputing or losing anything, shards partition the corpus, and the
report renders from the results file alone."""
import json
import os
import signal
import subprocess
import sys
import time

from conftest import PKG_ROOT, control_rows, read_jsonl, run_cli, write_corpus
from kgate.results import open_records

from kgate.corpus import parse_shard, read_rows
import pytest

FAST = ["--fw", "numpy", "--call-timeout", "4", "--jobs", "2", "--seed", "1234"]


def test_bad_lines_become_verdicts_and_the_audit_goes_on(workdir):
    rows = control_rows(["correct_tanh_scale"])
    broken_import = dict(rows[0], task_id=50, custom_code="import numpy as np\nraise ImportError('no such kernel')\n")
    syntax = dict(rows[0], task_id=51, custom_code="class ModelNew(:\n")
    bad_task = dict(rows[0], task_id=52, ref_code="def get_inputs():\n    return []\n")
    failing_inputs = dict(rows[0], task_id=53, ref_code=rows[0]["ref_code"].replace(
        "def get_inputs():\n", "def get_inputs():\n    raise RuntimeError('boom')\n"))
    none = dict(rows[0], task_id=54, custom_code="None")
    corpus = write_corpus(workdir / "c.jsonl", rows + [broken_import, syntax, bad_task, failing_inputs, none],
                          extra_lines=["{not json", json.dumps({"level_id": 1, "task_id": 99})])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    recs = {x["key"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert len(recs) == 8
    by_task = {x.get("task"): x for x in recs.values()}
    assert by_task[1]["status"] == "ok" and by_task[1]["classification"] == "clean"
    assert by_task[50]["status"] == "import_error" and "no such kernel" in by_task[50]["message"]
    assert by_task[51]["status"] == "import_error" and "SyntaxError" in by_task[51]["message"]
    assert by_task[52]["status"] == "oracle_error" and "Model" in by_task[52]["message"]
    assert by_task[53]["status"] == "oracle_error" and "get_inputs" in by_task[53]["message"]
    assert by_task[54]["status"] == "no_candidate"
    bad = [x for x in recs.values() if x["status"] == "bad_row"]
    assert len(bad) == 2
    assert any("not JSON" in x["message"] for x in bad) and any("lacks field" in x["message"] for x in bad)


def test_crash_and_hang_cost_one_row_each(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["crashes", "hangs", "correct_softmax"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    recs = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    oracle = lambda rec: next(g for g in rec["gates"] if g["gate"] == "oracle")  # noqa: E731
    assert oracle(recs[1])["verdict"] == "CRASH" and "SIGSEGV" in oracle(recs[1])["summary"]
    assert oracle(recs[2])["verdict"] == "TIMEOUT"
    # A hang costs a few call timeouts (baseline's call, the engine's two, one step of each public harness
    # mode), never the init timeout (300 s) the public harness once waited per mode.
    harness = next(g for g in recs[2]["gates"] if g["gate"] == "public_harness")
    assert harness["summary"].count("timeout: no answer to harness after built within 8 s") == 2, harness
    assert recs[2]["row_seconds"] < 150, recs[2]["row_seconds"]
    assert recs[1]["classification"] != "clean" and recs[2]["classification"] != "clean"
    # a timeout is a status: a violation at most, never broken (a crash, a dead process, is broken)
    assert recs[2]["classification"] == "violation", recs[2].get("broken_reasons")
    assert recs[3]["status"] == "ok" and recs[3]["classification"] == "clean"


def test_resume_after_kill_recomputes_nothing_and_loses_nothing(workdir):
    names = ["correct_tanh_scale", "correct_softmax", "correct_linear", "nan_masked", "modifies_input",
             "hardcoded_batch", "caches_result", "nondeterministic"]
    corpus = write_corpus(workdir / "c.jsonl", control_rows(names))
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    p = subprocess.Popen([sys.executable, "-m", "kgate", "audit", corpus, "--results", "out.jsonl", *FAST,
                          "--quiet"], env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    out = workdir / "out.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # kill it once some rows, not all, are done
        if out.exists() and 2 <= len(read_jsonl(out)) < len(names):
            break
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    with open(out, "a") as f:
        f.write('{"key": "c/L1/T1", "partial')  # what a kill mid-write leaves behind
    before = {x["key"]: x for x in read_jsonl_tolerant(out)}
    assert 2 <= len(before) < len(names)
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    after = read_jsonl(out)
    keys = [x["key"] for x in after]
    assert len(keys) == len(set(keys)) == len(names)  # nothing lost, nothing duplicated
    for k, rec in before.items():  # nothing finished was recomputed: the very same record
        assert next(x for x in after if x["key"] == k) == rec
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert read_jsonl(out) == after  # a rerun on a finished file recomputes nothing
    assert "'cut_by_budget': 0" in r.stderr


def read_jsonl_tolerant(path):
    out = []
    with open_records(str(path), text=True) as f:
        lines = f.readlines()
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def test_shards_partition_the_corpus(workdir):
    names = ["correct_tanh_scale", "correct_softmax", "correct_linear", "nan_masked", "modifies_input"]
    corpus = write_corpus(workdir / "c.jsonl", control_rows(names))
    keys = [r.key for r in read_rows(corpus)]
    seen = []
    for i in range(3):
        r = run_cli("audit", corpus, "--results", f"s{i}.jsonl", "--shard", f"{i}/3", *FAST, "--gates", "oracle")
        assert r.returncode == 0, r.stderr
        seen.append({x["key"] for x in read_jsonl(workdir / f"s{i}.jsonl")})
    assert set.union(*seen) == set(keys)
    assert sum(len(s) for s in seen) == len(keys)
    assert parse_shard("2/3") == (2, 3)


def test_budget_stops_cleanly_and_the_next_call_finishes(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["hangs", "correct_softmax", "correct_linear"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", "--fw", "numpy", "--call-timeout", "30", "--jobs", "1",
                "--budget", "25")
    assert r.returncode == 0, r.stderr
    first = read_jsonl(workdir / "out.jsonl")
    assert all(x["task"] != 1 for x in first)  # the hanging row was cut by the budget: not recorded
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert {x["task"] for x in read_jsonl(workdir / "out.jsonl")} == {1, 2, 3}


def test_retry_replaces_only_the_named_statuses_and_keeps_the_old_record(workdir):
    rows = control_rows(["correct_softmax", "correct_linear"])
    # The limit leaves the two correct rows (1 to 3 s each on a loaded 2-core machine) room to finish.
    slow = dict(rows[0], task_id=3, custom_code="import time\ntime.sleep(12)\n" + rows[0]["custom_code"])
    corpus = write_corpus(workdir / "c.jsonl", rows + [slow])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--row-timeout", "8")
    assert r.returncode == 0, r.stderr
    first = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert first[1]["status"] == first[2]["status"] == "ok", (first[1].get("message"), first[2].get("message"))
    assert first[3]["status"] == "row_timeout"
    assert first[3]["classification"] == "row_timeout"  # nothing had failed when the time ran out
    assert "ran past its limit of 8 s" in first[3]["message"], first[3]["message"]
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", "oracle_error")
    assert r.returncode == 0, r.stderr  # nothing has that status: nothing reruns
    assert read_jsonl(workdir / "out.jsonl") == list(first.values())
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", "row_timeout", "--row-timeout", "120")
    assert r.returncode == 0, r.stderr
    after = read_jsonl(workdir / "out.jsonl")
    assert [x["task"] for x in after] == [x["task"] for x in first.values()]  # same rows, same order
    by_task = {x["task"]: x for x in after}
    assert by_task[3]["status"] == "ok" and by_task[3]["classification"] == "clean"
    assert by_task[3]["retry_of"]["status"] == "row_timeout"
    assert by_task[1] == first[1] and by_task[2] == first[2]  # the others untouched
    assert [_bare(x) for x in read_jsonl(workdir / "out.superseded.jsonl")] == [_bare(first[3])]
    bad = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", "row_timout")
    assert bad.returncode == 2 and "unknown row status 'row_timout'" in bad.stderr
    # A row named by its key runs again whatever its status (after a fix that concerns it).
    key = by_task[2]["key"]
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", key)
    assert r.returncode == 0, r.stderr
    again = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert again[2]["retry_of"]["status"] == "ok" and again[2]["status"] == "ok"
    assert again[1] == by_task[1] and again[3] == by_task[3]
    assert [_bare(x) for x in read_jsonl(workdir / "out.superseded.jsonl")] == [_bare(first[3]), _bare(by_task[2])]
    bad = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", "c/L9/T9")
    assert bad.returncode == 2 and "no row 'c/L9/T9'" in bad.stderr


def test_a_status_retry_runs_each_row_once_however_often_the_same_selection_resumes(workdir):
    # scripts/audit-gpu resumes a file over several calls with the same AUDIT_RETRY: a row that ends with the
    # named status again is not run again by the next call (it once was, each call, to the same end).
    rows = control_rows(["correct_softmax"])
    slow = dict(rows[0], task_id=3, custom_code="import time\ntime.sleep(12)\n" + rows[0]["custom_code"])
    corpus = write_corpus(workdir / "c.jsonl", [slow])
    limit = ["--row-timeout", "6"]
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *limit).returncode == 0
    (first,) = read_jsonl(workdir / "out.jsonl")
    assert first["status"] == "row_timeout" and "retry_selection" not in first, first
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *limit, "--retry", "row_timeout")
    assert r.returncode == 0, r.stderr
    (again,) = read_jsonl(workdir / "out.jsonl")
    assert again["status"] == "row_timeout" and again["retry_of"]["status"] == "row_timeout", again
    assert again["retry_selection"] == ["row_timeout"]
    for retry in ("row_timeout", "row_timeout,oracle_error"):  # resumed: the same selection, or one holding it
        r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *limit, "--retry", retry)
        assert r.returncode == 0, r.stderr
        assert read_jsonl(workdir / "out.jsonl") == [again], retry
    # named by its key it runs again, every time
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *limit, "--retry", first["key"])
    assert r.returncode == 0, r.stderr
    (third,) = read_jsonl(workdir / "out.jsonl")
    assert third["retry_of"]["status"] == "row_timeout" and third["written_at"] != again["written_at"], third
    assert len(read_jsonl(workdir / "out.superseded.jsonl")) == 2


def test_retry_finding_reruns_only_rows_a_gate_failed_with_that_finding(workdir):
    # A change to how the engine judges one finding (the nan and inf gates' non-finite values, issue 14) can
    # only be applied to committed rows by running them again: --retry-finding GATE:FINDING selects them.
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale", "nan_masked"]))
    gates = ["--gates", "nan"]
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *gates)
    assert r.returncode == 0, r.stderr
    first = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    nan = next(g for g in first[2]["gates"] if g["gate"] == "nan")
    assert nan["verdict"] == "FAIL" and nan["finding"] == "NaN masked", nan
    # Another gate's finding, or another finding of this gate: nothing reruns.
    for sel in ("inf:NaN masked", "nan:unexpected non-finite value"):
        r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *gates, "--retry-finding", sel)
        assert r.returncode == 0, r.stderr
        assert read_jsonl(workdir / "out.jsonl") == list(first.values()), sel
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *gates,
                "--retry-finding", "inf:unexpected non-finite value, nan:NaN masked")
    assert r.returncode == 0, r.stderr
    after = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert after[1] == first[1]  # the clean row untouched
    assert after[2]["retry_of"] == {"status": "ok", "message": (first[2].get("message") or "")[:300],
                                    "finding": "nan: NaN masked"}
    assert after[2]["finding_selection"] == ["inf: unexpected non-finite value", "nan: NaN masked"]
    assert [_bare(x) for x in read_jsonl(workdir / "out.superseded.jsonl")] == [_bare(first[2])]
    # The rerun failed the same way; resumed with the same selection (audit-gpu over several calls) it is
    # not run again.
    assert next(g for g in after[2]["gates"] if g["gate"] == "nan")["finding"] == "NaN masked"
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, *gates, "--retry-finding", "nan:NaN masked")
    assert r.returncode == 0, r.stderr
    assert {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")} == after
    for bad in ("nan", "nann:NaN masked", "nan:"):
        b = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry-finding", bad)
        assert b.returncode == 2 and "--retry-finding" in b.stderr, (bad, b.stderr)


def test_a_record_a_finding_selection_made_is_not_that_selections_to_run_again():
    # Resumed over several calls with one selection, each row runs once for it, whichever of the selection's
    # findings its rerun then fails with, and whatever else made the record under that selection.
    from kgate.audit import to_retry_for_finding
    both = [("nan", "X"), ("inf", "X")]
    fails_inf = {"status": "ok", "gates": [{"gate": "inf", "verdict": "FAIL", "finding": "X"},
                                           {"gate": "nan", "verdict": "PASS"}]}
    assert to_retry_for_finding(fails_inf, both)                                      # an old record: runs
    assert not to_retry_for_finding(fails_inf, [("nan", "X")])                        # not this finding
    rerun_for_nan = dict(fails_inf, retry_of={"status": "ok", "finding": "nan: X"})
    assert not to_retry_for_finding(rerun_for_nan, both)                              # done by this selection
    assert to_retry_for_finding(rerun_for_nan, [("inf", "X")])                        # a new selection: runs once
    made_alone = dict(fails_inf, retry_of={"status": "gpu_out_of_memory"}, finding_selection=["inf: X", "nan: X"])
    assert not to_retry_for_finding(made_alone, both)
    assert not to_retry_for_finding(dict(fails_inf, finding_selection=["inf: X"]), both)  # a first run under it
    assert to_retry_for_finding(dict(fails_inf, finding_selection=["inf: Y"]), both)


def test_retry_unguarded_selects_audited_rows_whose_candidate_ran_without_guard_zones(workdir):
    # Rows the guard allocator failed (cuDNN's benchmark search) ran before the second guarded pass existed:
    # --retry unguarded runs them again, once (retry_of.selector), and leaves every other row alone.
    from kgate.audit import to_retry_selected
    off = {"status": "ok", "guard_allocator": "off: with the guard allocator the candidate's calls failed ..."}
    assert to_retry_selected(off, ["unguarded"]) == "unguarded"
    assert to_retry_selected(off, ["row_timeout"]) is None and to_retry_selected(off, None) is None
    assert to_retry_selected(dict(off, retry_of={"status": "ok", "selector": "unguarded"}), ["unguarded"]) is None
    assert to_retry_selected(dict(off, status="row_timeout"), ["unguarded"]) is None  # not audited: --retry STATUS
    merged = dict(off, guard_allocator="on for coverage, bounds: ...", guarded_pass={"merged": True})
    assert to_retry_selected(merged, ["unguarded"]) is None
    assert to_retry_selected({"status": "ok", "guard_allocator": "guard allocator (seed 1)"}, ["unguarded"]) is None
    assert to_retry_selected({"status": "ok"}, ["unguarded"]) is None  # numpy rows: malloc is never guarded
    # Through the CLI: accepted beside statuses, and numpy rows (never unguarded) are not run again.
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_tanh_scale"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle")
    assert r.returncode == 0, r.stderr
    first = read_jsonl(workdir / "out.jsonl")
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle", "--retry", "unguarded,row_timeout")
    assert r.returncode == 0, r.stderr
    assert read_jsonl(workdir / "out.jsonl") == first


def _bare(rec):
    """A record without what the driver adds when it moves one to the superseded file (reason, new MAC)."""
    return {k: v for k, v in rec.items() if k not in ("mac", "superseded_because")}


def test_report_renders_from_results_alone(workdir):
    names = ["correct_tanh_scale", "nan_masked", "fp16_accumulation", "crashes"]
    corpus = write_corpus(workdir / "c.jsonl", control_rows(names))
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST).returncode == 0
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None; "
                        "from kgate.cli import main; sys.exit(main(['report', 'out.jsonl', '--html', 'r.html']))"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PKG_ROOT))
    assert r.returncode == 0, r.stderr
    assert "broken beyond tolerance" in r.stdout and "baseline accepts, kgate rejects" in r.stdout
    # Throughput, from the attempts journal beside the results: one run, every row finished in it.
    recs = read_jsonl(workdir / "out.jsonl")
    assert "throughput (out.attempts.jsonl" in r.stdout, r.stdout
    runs = [line.split() for line in r.stdout.splitlines() if line[:4].isdigit() and line[4:5] == "-"]
    total = next(line.split() for line in r.stdout.splitlines() if line.startswith("all "))
    # columns: run (date time) | wall s | compile jobs | verify jobs | rows finished | audited | rows/min | audited/min
    assert len(runs) == 1 and runs[0][5:7] == total[4:6] == [str(len(names)), str(sum(x["status"] == "ok" for x in recs))]
    assert runs[0][3:5] == total[2:4] == ["0", str(len(names))]
    secs, rate = float(total[1]), float(total[6])  # seconds printed rounded to 1 s, the rate to 0.1
    assert 60 * len(names) / (secs + 0.5) - 0.05 <= rate <= 60 * len(names) / max(secs - 0.5, 1e-3) + 0.05
    # Where the rows' time went: per gate, the candidate calls and oracle runs the records carry.
    assert "where the audited rows' time went" in r.stdout, r.stdout
    cost = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.split() and line.split()[0] in ("oracle", "nan", "every")}
    # columns: gate | rows | cases | shrink runs | candidate calls | oracle runs | oracle memo hits | ...
    assert int(cost["nan"][4]) >= int(cost["nan"][2]) >= 1 and int(cost["oracle"][5]) >= 1, r.stdout
    page = (workdir / "r.html").read_text()
    assert page.count("<svg") == 4 and "threshold sweep" in page
    for cmd in ("sweep", "agreement", "sample"):
        r = run_cli(cmd, "out.jsonl")
        assert r.returncode == 0, r.stderr
    assert "x1000" in run_cli("sweep", "out.jsonl").stdout
    assert "## nan / level" in run_cli("sample", "out.jsonl").stdout


def test_numpy_controls_detection_matrix():
    from kgate.controls import load, run_controls
    recs = []
    ok, text = run_controls(fw="numpy", seeds_n=1, jobs=2, call_timeout=4, records=recs)
    assert ok, text
    by_name = {str(r.get("task")): r for r in recs}
    for c in load("numpy"):
        rec = by_name[c["name"]]
        gates = {g["gate"]: g for g in rec.get("gates", [])}
        # every defect control passes the producer's own test (5 trials, allclose 1e-2): the field accepts it
        if c["producer_passes"]:
            assert gates["baseline"]["verdict"] == "PASS", (c["name"], gates["baseline"])
        if c["precision"]:
            assert gates["oracle"]["precision_label"] == c["precision"], (c["name"], gates["oracle"])


def test_a_dead_driver_costs_one_row_and_says_how_it_died(workdir, monkeypatch):
    rows = control_rows(["correct_softmax", "correct_linear"])
    # The oracle (Model in float64) runs in the row's driver, not in the candidate's worker: a Model that
    # kills its own process at float64 stands for the driver dying of the OOM killer, whose counter (the memory
    # cgroup's oom_kill) a file given in KGATE_OOM_COUNTER stands for; the Model counts its kill there first.
    counter = workdir / "memory.events"
    counter.write_text("oom 0\noom_kill 0\n")
    monkeypatch.setenv("KGATE_OOM_COUNTER", str(counter))
    killer = rows[0]["ref_code"].replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        if x.dtype == np.float64:\n"
        f"            open({str(counter)!r}, 'w').write('oom 1\\noom_kill 1\\n')\n"
        "            import os, signal\n            os.kill(os.getpid(), signal.SIGKILL)\n")
    assert killer != rows[0]["ref_code"]
    corpus = write_corpus(workdir / "c.jsonl", rows + [dict(rows[0], task_id=3, ref_code=killer)])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    by_task = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert by_task[1]["status"] == by_task[2]["status"] == "ok"
    dead = by_task[3]
    assert dead["status"] == "driver_crash"
    assert "SIGKILL" in dead["message"] and "OOM killer acted" in dead["message"], dead["message"]
    # The driver's death is not evidence against the candidate: no gate had failed, so it is not "broken".
    assert dead["classification"] == "driver_crash"
    assert all(g.get("row_stop") for g in dead["gates"] if g["verdict"] in ("CRASH", "TIMEOUT"))


def test_candidates_run_as_registered_modules(workdir):
    # torch.compile imports a compiled function's module by name (fn.__module__); the producer's harness ran
    # such candidates, so kgate must too. This numpy candidate does what dynamo does, and pickles a function.
    rows = control_rows(["correct_softmax"])
    lookup = rows[0]["custom_code"].replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        import importlib, pickle\n"
        "        assert importlib.import_module(__name__).ModelNew is ModelNew\n"
        "        pickle.dumps(_helper)\n") + "\n\ndef _helper():\n    pass\n"
    assert lookup != rows[0]["custom_code"]
    corpus = write_corpus(workdir / "c.jsonl", [dict(rows[0], custom_code=lookup)])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    assert rec["status"] == "ok" and rec["classification"] == "clean", rec
    by_gate = {g["gate"]: g for g in rec["gates"]}
    assert by_gate["baseline"]["verdict"] == "PASS" and by_gate["public_harness"]["verdict"] == "PASS", by_gate


OUT_OF_MEMORY = '''
import numpy as np

class ModelNew:
    def __init__(self, *args):
        pass

    def forward(self, x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 962.00 MiB. GPU 0 has a total capacity of 1 GiB")

    __call__ = forward
'''


def test_a_row_out_of_gpu_memory_beside_others_runs_again_alone(workdir):
    """Rows share one GPU, so a row can run out of memory because of its neighbours: beside others that is a
    status (gpu_out_of_memory), never a verdict, and the audit runs the row again alone, where an
    out-of-memory is the candidate's own and its record counts. The shared run's record is kept as
    superseded."""
    from kgate.controls.numpy import TASKS
    from kgate.kernelbench.rowjob import gpu_out_of_memory
    rows = control_rows(["correct_softmax"]) + [{"level_id": 1, "task_id": 9, "ref_code": TASKS["softmax"],
                                                 "custom_code": OUT_OF_MEMORY}]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    r = run_cli("audit", corpus, "--results", str(workdir / "out.jsonl"), "--gates", "oracle", *FAST)
    assert r.returncode == 0, r.stderr[-3000:]
    by_task = {x["task"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert by_task[1]["status"] == "ok" and "retry_of" not in by_task[1]
    alone = by_task[9]
    assert alone["status"] == "ok" and alone["classification"] == "broken", alone
    assert gpu_out_of_memory(alone), alone["gates"]
    old = read_jsonl(workdir / "out.superseded.jsonl")
    assert [x["status"] for x in old] == ["gpu_out_of_memory"] and old[0]["task"] == 9, old
    assert "while other rows shared it" in old[0]["message"] and old[0]["evidence_shared_gpu"]["where"]
    # A pass that merely mentions memory, or a failure of another kind, is not an out-of-memory.
    assert gpu_out_of_memory({"gates": [{"gate": "oracle", "verdict": "PASS", "summary": "CUDA out of memory"}]}) \
        is None
    assert gpu_out_of_memory({"status": "oracle_error", "message": "ValueError: shapes differ"}) is None
    assert gpu_out_of_memory({"status": "oracle_error", "message": "AcceleratorError: CUDA error: out of memory"})


def test_rows_run_with_their_levels_spread_over_the_run():
    # A corpus in file order: 60 level-1 rows, then 40 level-2, then 20 level-3 (whose float64 oracles are
    # what filled the GPU when a dozen of them started together).
    from kgate.audit import spread_levels
    from kgate.corpus import Row
    rows = [Row(index=i, key=f"c/L{lv}/T{i}", sha="", data={"level_id": lv})
            for i, lv in enumerate([1] * 60 + [2] * 40 + [3] * 20)]
    order = spread_levels(rows)
    assert sorted(r.key for r in order) == sorted(r.key for r in rows)  # the same rows
    for lv in (1, 2, 3):  # file order within a level
        assert [r.index for r in order if r.level == lv] == [r.index for r in rows if r.level == lv]
    # Any 12 consecutive rows (the jobs at once) hold each level's share of the whole, within one row.
    for start in range(len(order) - 12):
        window = order[start:start + 12]
        for lv, share in ((1, 0.5), (2, 1 / 3), (3, 1 / 6)):
            assert abs(sum(r.level == lv for r in window) - 12 * share) <= 1.5, (start, lv)
    assert spread_levels([]) == []


def test_compile_only_compiles_and_verifies_nothing_then_the_audit_verifies_with_compilation_apart(workdir):
    rows = control_rows(["correct_tanh_scale", "correct_softmax"])
    # marked for the compile phase (the marker in a comment is enough); the other row needs no compile job
    rows[0] = dict(rows[0], custom_code="# load_inline\n" + rows[0]["custom_code"])
    corpus = write_corpus(workdir / "c.jsonl", rows)
    r = run_cli("audit", corpus, "--results", "out.jsonl", "--compile-only", *FAST)
    assert r.returncode == 0, r.stderr
    assert not (workdir / "out.jsonl").exists() or read_jsonl(workdir / "out.jsonl") == []
    comp = read_jsonl(workdir / "out.compile.jsonl")
    assert [c["key"] for c in comp] == ["c/L1/T1"] and comp[0]["status"] == "ok", comp
    assert "'compile_only': True" in r.stderr and "'compiled_total': 1" in r.stderr, r.stderr[-2000:]
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(x["key"] for x in read_jsonl(workdir / "out.jsonl")) == ["c/L1/T1", "c/L2/T2"]
    assert len(read_jsonl(workdir / "out.compile.jsonl")) == 1   # not compiled again
    lines = r.stdout.splitlines()
    first = next(l.split() for l in lines if l[:4].isdigit() and "compile only" in l)
    second = next(l.split() for l in lines if l[:4].isdigit() and "compile only" not in l)
    assert first[5:7] == ["1", "0"] and second[3:5] == ["0", "2"], lines   # compile/verify jobs of each run
    verifying = next(l.split() for l in lines if l.startswith("verifying runs"))
    assert verifying[3:8] == ["0", "2", "2", "2", second[7]], verifying


def test_a_compile_record_whose_cache_entries_are_missing_here_is_compiled_again(tmp_path):
    # A compile record travels with the results, the extension cache may not: a resumed audit must compile
    # such a row again before verifying it, not count it compiled (its verification would compile inside the
    # row's time, 546 row-seconds of an H200 call).
    from kgate.audit import in_cache
    from kgate.kernelbench import extstage
    cache, code = str(tmp_path / "cache"), "import torch\n# load_inline\n"
    assert extstage.count_entries(cache, code) == 0 and not (tmp_path / "cache").exists()  # nothing created
    counted = {"compile_seconds": 31.2, "ext_entries": 2}
    old_built = {"compile_seconds": 27.0}                                   # before ext_entries was recorded
    old_failed = {"compile_seconds": 0.0, "extension_build_failed": ["m"]}
    nothing = {"compile_seconds": 0.0, "ext_entries": 0}                    # no extension: nothing to miss
    legacy_nothing = {"compile_seconds": 0.0}
    for rec in (counted, old_built, old_failed):
        assert not in_cache(rec, cache, code), rec
    assert in_cache(nothing, cache, code) and in_cache(legacy_nothing, cache, code)
    part = extstage.part_of(cache, code)
    key = "0123456789abcdef01234567"
    os.makedirs(os.path.join(part, key))
    open(os.path.join(part, key, "ext_a.so"), "wb").close()
    assert in_cache(old_built, cache, code) and in_cache(old_failed, cache, code)
    assert not in_cache(counted, cache, code)                               # one of its two entries
    open(os.path.join(part, key, "ext_b.failed"), "w").close()
    assert in_cache(counted, cache, code)
    # Another candidate's part does not count for this one; files not of the cache's shape do not count.
    assert extstage.count_entries(cache, code + " ") == 0
    open(os.path.join(part, key, "notes.txt"), "w").close()
    assert extstage.count_entries(cache, code) == 2
