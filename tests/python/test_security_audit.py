"""Issue 15, the Python audit: hostile numpy candidates in KernelBench format that attack the process judging
them, forge its records or flood its disk, and every bad argument of `python -m kgate audit`. Each test
names the case of the issue it covers; docs/security.md has the table."""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import PKG_ROOT, control_rows, read_jsonl, run_cli, write_corpus

from kgate import seeds

FAST = ["--fw", "numpy", "--call-timeout", "10", "--jobs", "2", "--seed", "1234"]
FORWARD = "    def forward(self, x):\n"


def hostile(body: str, base: str = "correct_softmax") -> dict:
    """A correct candidate whose forward first runs `body` (indented 8 spaces, numpy as np, os and signal
    imported)."""
    row = control_rows([base])[0]
    lines = "".join("        " + l + "\n" for l in body.strip("\n").splitlines())
    code = row["custom_code"].replace(FORWARD, FORWARD + "        import os, signal, sys, time\n" + lines)
    assert code != row["custom_code"]
    return dict(row, custom_code=code)


def oom_counter(workdir, monkeypatch):
    """The kernel's OOM counter, stood in for by a file that stays at 0: no OOM kill happens in these tests."""
    path = workdir / "memory.events"
    path.write_text("oom 0\noom_kill 0\n")
    monkeypatch.setenv("KGATE_OOM_COUNTER", str(path))


def rows_of(path):
    return {x["task"]: x for x in read_jsonl(path)}


def printed(rec) -> str:
    """What the candidate's worker printed, as far as the record keeps it: the output of a call that crashed or
    failed (each worker's output.log goes with its folder when the row ends). A probe that must be read back
    prints and then ends its worker (os._exit), so its call is a CRASH whose output the gate keeps."""
    return "\n".join([g.get("output") or "" for g in rec.get("gates", [])] + [rec.get("message") or ""])


# ---- attacks on the judge ----------------------------------------------------------------------------------

def test_candidate_that_kills_its_row_job_is_judge_attacked(workdir, monkeypatch):
    oom_counter(workdir, monkeypatch)
    rows = control_rows(["correct_linear"]) + [dict(hostile("os.kill(os.getppid(), signal.SIGKILL)"), task_id=2)]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    recs = rows_of(workdir / "out.jsonl")
    assert recs[1]["classification"] == "clean"
    bad = recs[2]
    # Contained (the kill reached nothing outside the worker: the candidate crashed itself) or a finding of
    # its own with evidence; never driver_crash blamed on the OOM killer, never clean.
    if bad["status"] == "ok":
        assert bad["classification"] != "clean", bad
    else:
        assert bad["status"] == bad["classification"] == "judge_attacked", bad
        assert "out-of-memory" not in bad["message"] and "OOM killer did not act" in bad["message"]
        assert bad["evidence"]["signal"] == "SIGKILL"
        assert bad["evidence"]["oom_kill_before"] == bad["evidence"]["oom_kill_after"] == 0


def test_candidate_that_stops_its_row_job_is_ended_well_within_the_row_timeout(workdir, monkeypatch):
    oom_counter(workdir, monkeypatch)
    rows = control_rows(["correct_linear"]) + [dict(hostile("os.kill(os.getppid(), signal.SIGSTOP)"), task_id=2)]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    t0 = time.monotonic()
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--row-timeout", "300", timeout=250)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 120
    bad = rows_of(workdir / "out.jsonl")[2]
    if bad["status"] != "ok":
        assert bad["status"] == bad["classification"] == "judge_attacked", bad
        assert "stopped" in bad["message"] and bad["evidence"]["stopped"]["signal"] == "SIGSTOP"


def test_worker_ended_by_seccomp_is_marked_judge_attacked(workdir):
    # kgate-isolate's seccomp filter ends a candidate that reaches outside its tree with SIGSYS; this candidate
    # dies of SIGSYS by itself, which the driver cannot tell apart (and which gains a candidate nothing).
    rows = control_rows(["correct_linear"]) + [dict(hostile("os.kill(os.getpid(), signal.SIGSYS)"), task_id=2)]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle,nan")
    assert r.returncode == 0, r.stderr
    recs = rows_of(workdir / "out.jsonl")
    assert "judge_attacked" not in recs[1] and recs[1]["classification"] == "clean"
    assert recs[2]["classification"] == "judge_attacked" and recs[2]["judge_attacked"]["gates"], recs[2]


def _driver_pid_code():
    # The row job's parent is the audit driver.
    return ("ppid = int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])\n")


def test_candidate_that_kills_the_driver_is_recorded_and_the_audit_finishes(workdir, monkeypatch):
    oom_counter(workdir, monkeypatch)
    killer = hostile(_driver_pid_code() + "if ppid > 1:\n    os.kill(ppid, signal.SIGKILL)")
    rows = control_rows(["correct_linear", "correct_tanh_scale"]) + [dict(killer, task_id=3)]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    codes = []
    for _ in range(4):
        r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--quiet", timeout=300)
        codes.append(r.returncode)
        if r.returncode == 0:
            break
    assert codes[-1] == 0, (codes, r.stderr)
    assert len(codes) <= 3, codes  # killed at most twice: in company, then alone
    recs = rows_of(workdir / "out.jsonl")
    assert set(recs) == {1, 2, 3}
    assert recs[1]["classification"] == recs[2]["classification"] == "clean"
    if len(codes) > 1:  # it could reach the driver: a finding, with the attempts as evidence
        assert recs[3]["status"] == recs[3]["classification"] == "judge_attacked", recs[3]
        assert recs[3]["evidence"]["unfinished_attempts"][-1]["solo"] is True
    else:  # contained (kgate-isolate: the driver is outside the candidate's PID namespace): the row simply ran
        assert recs[3]["status"] == "ok"
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--quiet")
    assert r.returncode == 0 and rows_of(workdir / "out.jsonl") == recs  # finished: nothing runs again


def test_candidate_that_stops_the_driver_is_recorded_and_the_audit_finishes(workdir, monkeypatch):
    oom_counter(workdir, monkeypatch)
    stopper = hostile(_driver_pid_code() + "if ppid > 1:\n    os.kill(ppid, signal.SIGSTOP)\n    time.sleep(2)")
    rows = control_rows(["correct_linear"]) + [dict(stopper, task_id=2)]
    corpus = write_corpus(workdir / "c.jsonl", rows)
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--row-timeout", "200", timeout=180)
    assert r.returncode == 0, r.stderr
    recs = rows_of(workdir / "out.jsonl")
    assert recs[1]["classification"] == "clean"
    if recs[2]["status"] != "ok":
        assert recs[2]["status"] == recs[2]["classification"] == "judge_attacked", recs[2]
        assert "stopped" in recs[2]["message"]


def _without_ptrace_capability():
    """When the tests run as root: the audit runs without CAP_SYS_PTRACE (dropped from the bounding set, so
    it is gone after exec), as a candidate under kgate-isolate would be; root with it reads every process's
    memory whatever that process says about itself."""
    if os.getuid() != 0:
        return None

    def drop():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(24, 19, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_SYS_PTRACE
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")
    return drop


@pytest.fixture
def results_dir(tmp_path):
    """A results folder outside /tmp (the worker's private /tmp would hide one inside it whatever its uid), in
    an open directory, as a user's project folder would be: only the files' own modes and the worker's uid
    keep the candidate from the MAC key."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(tmp_path)
    work = tempfile.mkdtemp(prefix="kgate-secrets-", dir=base)
    os.chmod(work, 0o755)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def test_candidate_finds_no_secret_in_its_ancestors(results_dir):
    # Ancestors' command lines, environments, working folders, open files and memory: no row seed, no results
    # path, no MAC key. And the key and results themselves, had it found their path: the worker runs as an
    # unprivileged uid (started as root, wherever the interpreter lives: pyenv's under a 0700 /root once kept
    # uid 0, which owns and so reads the key), or the record says it could not.
    work = results_dir
    key_file = os.path.join(work, "out.key")
    results = os.path.join(work, "out.jsonl")
    probe = hostile(f"""
import json, re
own = {{'uid': os.getuid(), 'euid': os.geteuid()}}
for name, path in (('key', {key_file!r}), ('results', {results!r})):
    try:
        open(path, 'rb').close()
        own[name + '_read'] = True
    except OSError:
        own[name + '_read'] = False
    try:
        with open(path, 'ab'):
            own[name + '_write'] = True
    except OSError:
        own[name + '_write'] = False
hits = {{}}
pid = os.getpid()
for _ in range(3):
    pid = int(open(f'/proc/{{pid}}/stat').read().rsplit(')', 1)[1].split()[1])
    if pid <= 1:
        break
    got = []
    for name in ('cmdline', 'environ'):
        try:
            got.append(open(f'/proc/{{pid}}/{{name}}', 'rb').read())
        except OSError:
            pass
    try:
        got.append(os.readlink(f'/proc/{{pid}}/cwd').encode())
        for fd in os.listdir(f'/proc/{{pid}}/fd'):
            got.append(os.readlink(f'/proc/{{pid}}/fd/{{fd}}').encode())
    except OSError:
        pass
    mem_read = 0
    try:
        with open(f'/proc/{{pid}}/maps') as maps, open(f'/proc/{{pid}}/mem', 'rb', 0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                lo, hi = (int(a, 16) for a in addr.split('-'))
                # Writable data (heap, anonymous maps: where a parsed spec or a key would be), 16 MiB at most each.
                if not perms.startswith('rw') or '[v' in line or hi - lo > 1 << 24:
                    continue
                try:
                    mem.seek(lo)
                    got.append(mem.read(hi - lo))
                    mem_read += len(got[-1])
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
    blob = b'\\0'.join(got)
    hits[pid] = {{'mem_read': mem_read, 'out.jsonl': b'out.jsonl' in blob,
                 'hex16': sorted({{m.decode() for m in re.findall(rb'[0-9a-f]{{16}}', blob)}}),
                 'hex64': sorted({{m.decode() for m in re.findall(rb'[0-9a-f]{{64}}', blob)}})}}
print('KGATE-PROBE ' + json.dumps({{'own': own, 'hits': hits}}), flush=True)
os._exit(9)  # a CRASH: the gate keeps what the call printed
""")
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    # A first run leaves a record (with its row's seed) for the probe's run to find.
    first = control_rows(["correct_linear"])
    for rows in (first, first + [dict(probe, task_id=2)]):
        corpus = write_corpus(os.path.join(work, "c.jsonl"), rows)
        r = subprocess.run([sys.executable, "-m", "kgate", "audit", corpus, "--results", results,
                            *FAST, "--gates", "oracle", "--call-timeout", "120"], capture_output=True, text=True, env=env,
                           cwd=work, preexec_fn=_without_ptrace_capability(), timeout=300)
        assert r.returncode == 0, r.stderr
    rec = rows_of(results)[2]
    assert rec["seed"] == f"{seeds.derive(0x1234, rec['key']):016x}"
    probes = [l for l in printed(rec).splitlines() if l.startswith("KGATE-PROBE ")]
    assert probes, ("the probe ran", rec)
    got = json.loads(probes[0][len("KGATE-PROBE "):])
    key_hex = open(key_file).read().strip() if os.path.exists(key_file) else "no key file"
    own = got["own"]
    if os.getuid() == 0:
        assert not own["key_read"], f"the candidate (uid {own['uid']}) read the MAC key"
        assert own["uid"] == own["euid"] == 65534, f"the candidate ran as uid {own['uid']}, not the unprivileged uid"
        assert not own["key_write"] and not own["results_write"], own
        assert not own["results_read"], "the candidate read the results (its own row's seed is in its record)"
        assert "isolation_warning" not in rec, rec
    else:  # its own user namespace: the driver's uid outside, which reads the key; the record must say so
        assert "driver's uid" in rec["isolation_warning"], rec
    hits = got["hits"]  # without kgate-isolate: the row job and the driver; with it: none (pid 1 is init)
    for pid, h in hits.items():
        assert rec["seed"] not in h["hex16"], f"the candidate read the row seed from process {pid}"
        assert key_hex not in h["hex64"], f"the candidate read the MAC key from process {pid}"
        assert not h["out.jsonl"], f"the candidate found the results path in process {pid}"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600


# ---- records nobody but the driver writes -------------------------------------------------------------------

def test_forged_records_are_rejected_and_report_counts_each_row_once(workdir):
    rows = control_rows(["correct_linear", "nan_masked"])
    out = workdir / "out.jsonl"
    # The candidate found the results path (as if by searching) and appends a "clean" record for itself and one
    # for a row that does not exist, with a made-up MAC; the driver's own record comes after.
    forged = "".join(json.dumps({"key": f"c/L{t}/T{t}", "status": "ok", "classification": "clean", "gates": [],
                                 "task": t, "level": t, "written_at": 1e12, "mac": "0" * 64}) + "\n" for t in (2, 3))
    forge = hostile(f"""
try:
    with open({str(out)!r}, 'a') as f:
        f.write({forged!r})
except OSError:
    pass  # kgate-isolate: the host's /tmp is not there
""", base="nan_masked")
    corpus = write_corpus(workdir / "c.jsonl", [rows[0], dict(forge, level_id=2, task_id=2)])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    assert "2 rows, 2 audited" in r.stdout, r.stdout
    with open(out, "a") as f:  # as a candidate that reached the file would (the one above may not have)
        f.write(forged)
    rep = run_cli("report", "out.jsonl")
    assert rep.returncode == 0 and "2 rows, 2 audited" in rep.stdout, rep.stdout  # forged lines never counted
    assert " ".join(rep.stdout.split()).count("clean 1 50.0%") == 1, rep.stdout
    recs = {x["key"]: x for x in read_jsonl(out) if x["mac"] != "0" * 64}
    assert recs["c/L2/T2"]["classification"] == "broken"
    # The next run rejects them (moved aside with why), keeps one record per row, recomputes nothing.
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    assert "carried no valid MAC" in r.stderr
    after = read_jsonl(out)
    assert sorted(x["key"] for x in after) == ["c/L1/T1", "c/L2/T2"]
    assert {x["key"]: x for x in after} == recs
    rejected = read_jsonl(workdir / "out.rejected.jsonl")
    assert len(rejected) >= 2 and all('"mac": "' + "0" * 64 in x["line"] for x in rejected)  # one per forward call


def test_duplicates_collapse_newest_wins_and_replayed_superseded_records_are_refused(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear", "nan_masked"]))
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST).returncode == 0
    first = {x["key"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--retry", "c/L1/T1").returncode == 0
    second = {x["key"]: x for x in read_jsonl(workdir / "out.jsonl")}
    assert second["c/L1/T1"]["written_at"] > first["c/L1/T1"]["written_at"]
    (old,) = read_jsonl(workdir / "out.superseded.jsonl")
    # Duplicates by hand: the older signed record of row 1 appended again (after the newer one), and the
    # superseded copy replayed.
    with open(workdir / "out.jsonl", "a") as f:
        f.write(json.dumps(first["c/L1/T1"]) + "\n")
        f.write(json.dumps(old) + "\n")
    rep = run_cli("report", "out.jsonl")
    assert "2 rows, 2 audited" in rep.stdout, rep.stdout
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    after = read_jsonl(workdir / "out.jsonl")
    assert len(after) == 2 and {x["key"]: x for x in after} == second  # the newer record won; one line per row
    assert "'ok': 0" in r.stderr  # nothing recomputed


def test_changed_corpus_line_is_recomputed_once_and_replaces_its_record(workdir):
    rows = control_rows(["correct_linear", "correct_softmax"])
    corpus = write_corpus(workdir / "c.jsonl", rows)
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST).returncode == 0
    before = rows_of(workdir / "out.jsonl")
    changed = dict(rows[1], custom_code=control_rows(["nan_masked"])[0]["custom_code"],
                   ref_code=control_rows(["nan_masked"])[0]["ref_code"])
    write_corpus(workdir / "c.jsonl", [rows[0], changed])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 0, r.stderr
    after = rows_of(workdir / "out.jsonl")
    assert len(read_jsonl(workdir / "out.jsonl")) == 2
    assert after[1] == before[1]
    assert after[2]["sha"] != before[2]["sha"] and after[2]["classification"] == "broken"
    assert after[2]["replaces"]["sha"] == before[2]["sha"]
    (old,) = read_jsonl(workdir / "out.superseded.jsonl")
    assert old["sha"] == before[2]["sha"] and "corpus line changed" in old["superseded_because"]
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert rows_of(workdir / "out.jsonl") == after  # not recomputed on every run
    assert "'ok': 0" in r.stderr


def test_key_file_readable_by_others_or_unsigned_results_are_refused(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear"]))
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle").returncode == 0
    os.chmod(workdir / "out.key", 0o644)
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST)
    assert r.returncode == 2 and "readable by others" in r.stderr and "Traceback" not in r.stderr
    os.chmod(workdir / "out.key", 0o600)
    legacy = [{k: v for k, v in x.items() if k not in ("mac", "written_at")} for x in read_jsonl(workdir / "out.jsonl")]
    with open(workdir / "old.jsonl", "w") as f:
        f.write(json.dumps(legacy[0]) + "\n")
    r = run_cli("audit", corpus, "--results", "old.jsonl", *FAST)
    assert r.returncode == 2 and "--adopt-unsigned" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("audit", corpus, "--results", "old.jsonl", *FAST, "--adopt-unsigned")
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "old.jsonl")
    assert {k: v for k, v in rec.items() if k != "mac"} == legacy[0] and len(rec["mac"]) == 64


def test_a_committed_results_file_without_its_key_resumes_only_when_vouched_for(workdir):
    # A results file committed by one session resumes in the next, whose machine never had the key.
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear", "nan_masked"]))
    assert run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle,nan").returncode == 0
    before = read_jsonl(workdir / "out.jsonl")
    os.rename(workdir / "out.key", workdir / "lost.key")
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle,nan")
    assert r.returncode == 2 and "--adopt-unsigned" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle,nan", "--adopt-unsigned")
    assert r.returncode == 0, r.stderr
    assert "'ok': 0" in r.stderr  # nothing recomputed: every record was adopted
    after = read_jsonl(workdir / "out.jsonl")
    strip = lambda recs: [{k: v for k, v in x.items() if k != "mac"} for x in recs]  # noqa: E731
    assert strip(after) == strip(before) and all(a["mac"] != b["mac"] for a, b in zip(after, before))
    assert (workdir / "out.key").exists()
    # With its key file present, the flag never lets in a line signed under another key (a forged one).
    forged = dict(strip(before)[0], classification="clean", task=99, key="c/L9/T99")
    with open(workdir / "out.jsonl", "a") as f:
        f.write(json.dumps(dict(forged, mac="0" * 64)) + "\n")
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle,nan", "--adopt-unsigned")
    assert r.returncode == 0, r.stderr
    assert all(x["key"] != "c/L9/T99" for x in read_jsonl(workdir / "out.jsonl"))
    assert any("c/L9/T99" in r["line"] for r in read_jsonl(workdir / "out.rejected.jsonl"))


# ---- floods and escapes ------------------------------------------------------------------------------------

def test_output_flood_costs_a_capped_log_not_the_disk(workdir):
    # 3.6 GB in the issue; here 256 MiB against a 4 MiB file limit.
    flood = hostile("chunk = 'x' * (1 << 20) + '\\n'\nfor _ in range(256):\n    sys.stdout.write(chunk)\n"
                    "    sys.stderr.write(chunk)")
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear"]) + [dict(flood, task_id=2)])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--file-limit", str(4 << 20), "--log-limit",
                str(1 << 20), "--gates", "oracle,nan")
    assert r.returncode == 0, r.stderr
    recs = rows_of(workdir / "out.jsonl")
    assert recs[1]["classification"] == "clean"
    assert recs[2]["classification"] != "clean"
    total = 0
    for root, _, files in os.walk(workdir / "build-py"):
        for f in files:
            size = os.path.getsize(os.path.join(root, f))
            assert size <= 4 << 20, (f, size)
            total += size
    assert total < 32 << 20
    # Python ignores SIGXFSZ: the candidate's write past the limit fails with EFBIG, its own failure.
    oracle = next(g for g in recs[2]["gates"] if g["gate"] == "oracle")
    assert oracle["verdict"] in ("FAIL", "CRASH"), oracle


def test_setsid_children_of_the_candidate_end_with_the_audit(workdir):
    # The escaped grandchild becomes `sleep <marker>`: found by its command line among the host's processes.
    marker = f"{100 + os.getpid() % 97}.{time.time_ns() % 10**9:09d}"
    escape = hostile(f"""
if not getattr(sys, 'forked', False):
    sys.forked = True
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.execv('/bin/sleep', ['sleep', {marker!r}])
        os._exit(0)
    time.sleep(0.3)
    print('KGATE-FORKED', flush=True)
    os._exit(9)  # a CRASH, so the gate keeps what the call printed; the escaped grandchild must end too
""")
    corpus = write_corpus(workdir / "c.jsonl", [escape])
    r = run_cli("audit", corpus, "--results", "out.jsonl", *FAST, "--gates", "oracle", timeout=100)
    assert r.returncode == 0, r.stderr
    (rec,) = read_jsonl(workdir / "out.jsonl")
    assert "KGATE-FORKED" in printed(rec), rec
    time.sleep(0.5)
    alive = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = open(f"/proc/{name}/cmdline", "rb").read()
                state = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmd and state != "Z":
                alive.append(int(name))
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"{len(alive)} escaped processes outlived the audit"


# ---- bad arguments -----------------------------------------------------------------------------------------

BAD_AUDIT_ARGS = [
    ("--seed", "zz"), ("--seed", ""), ("--seed", "-1"), ("--seed", "1" * 17), ("--jobs", "0"), ("--jobs", "-3"),
    ("--jobs", "x"), ("--compile-jobs", "0"), ("--call-timeout", "-1"), ("--call-timeout", "0"),
    ("--call-timeout", "nan"), ("--call-timeout", "inf"), ("--call-timeout", "1e308"), ("--row-timeout", "0"),
    ("--row-timeout", "-5"), ("--budget", "-1"), ("--budget", "nan"), ("--limit", "-1"), ("--gates", "nann"),
    ("--gates", ""), ("--gates", "oracle,,nan"), ("--shard", "3/2"), ("--shard", "a/b"), ("--log-limit", "0"),
    ("--file-limit", "10"), ("--retry", "row_timout"),
]


@pytest.mark.parametrize("flag,value", BAD_AUDIT_ARGS)
def test_bad_audit_argument_is_one_line_and_exit_2(workdir, flag, value):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear"]))
    r = run_cli("audit", corpus, "--results", "out.jsonl", "--fw", "numpy", flag, value, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (workdir / "out.jsonl").exists() or not read_jsonl(workdir / "out.jsonl")


def test_bad_paths_are_one_line_and_exit_2(workdir):
    corpus = write_corpus(workdir / "c.jsonl", control_rows(["correct_linear"]))
    (workdir / "adir").mkdir()
    (workdir / "afile").write_text("")
    cases = [
        (["audit", "missing.jsonl"], "no such file"),
        (["audit", str(workdir / "adir")], "not a regular file"),
        (["audit", "/dev/zero"], "not a regular file"),
        (["audit", corpus, "--results", str(workdir / "adir")], "is a directory"),
        (["audit", corpus, "--results", str(workdir / "afile" / "out.jsonl")], "cannot write"),
        (["audit", corpus, "--results", "/proc/kgate-nowhere/out.jsonl"], "cannot write"),
        (["report", "missing.jsonl"], "no such file"),
        (["sample", corpus, "--per-cell", "0"], "outside"),
        (["controls", "--fw", "numpy", "--seeds", "0"], "outside"),
    ]
    for args, why in cases:
        r = run_cli(*args, "--fw", "numpy") if args[0] == "audit" else run_cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, (args, r.stderr)
        assert why in r.stderr, (args, r.stderr)
    if os.getuid() != 0:  # root reads and writes whatever the mode says
        os.chmod(corpus, 0)
        r = run_cli("audit", corpus, "--fw", "numpy")
        assert r.returncode == 2 and "cannot read" in r.stderr


def test_help_documents_the_bounds():
    r = run_cli("audit", "--help")
    for text in ("1..256", "(0, 1 day]", "(0, 7 days]", "1 to 16 hex digits", "4096..16 GiB", "1 MiB..1 TiB"):
        assert text in " ".join(r.stdout.split()), text
