"""The bounds gate's compute-sanitizer pass over an audited row (`--sanitizer TOOL[,TOOL]`, docs/audit.md):
after the row's run, the bounds gate's calls run again in a fresh worker started under
`compute-sanitizer --tool TOOL --log-file F --target-processes all ...` (the worker and every process it starts,
so a candidate's kernels in a child process are watched too; inside the same isolation as every worker: client.py,
isolation.py), through rowjob._verify_once as the guard allocator's second pass reruns its gates. The tools,
the lookup of the executable, the command, the log parser and the verdict are the C++ CLI's
(kgate/sanitizer_log.hpp through kgate._core); nothing of them is re-implemented here.

The result is the row's gate record `bounds/<tool>`: PASS when the tool reported nothing and its log ends with
its summary line ("ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: 0 hazards displayed ..."), FAIL with the first
access it reported as evidence (every one in the detail), SKIP when compute-sanitizer is missing (saying where
it looked) or the pass would overrun the row's time limit, ERROR when it could not judge:
  - the tool's log holds a top-level line that is not a report about the program (the C++ parser knows reports
    by their shape: "Invalid __global__ write ...", "Error: Race reported between ...", ...; anything else but
    the banner, the summaries and how the worker exited is its tool_error): the tool's message about itself
    ("Error: No attachable process found. compute-sanitizer timed-out.", "Tracking kernels launched by child
    processes requires the --target-processes all option.", "Internal Sanitizer Error: ...") or a line kgate
    does not know. The summary says "compute-sanitizer <tool> did not instrument the worker, or printed what
    kgate does not know as a report: <the lines>", whatever the bounds gate said under it (an access it did
    report, in this or another worker's log, stays FAIL);
  - the bounds gate passed but a log ends without the tool's summary: the tool did not see the worker to its end;
  - the bounds gate passed but a summary counts errors kgate read no report of (less the API errors it read:
    memcheck counts those too);
  - the worker under the tool hung or crashed before the bounds gate ran, or the run raised (the worker did not
    answer its init or build request within the pass's timeout: "the worker under compute-sanitizer memcheck
    did not answer its build request within 180 s"), and the tool reported no access before that (an access it
    reported stays FAIL, with how the run ended in the summary); such a run never costs the row its other
    verdicts (rowjob._verify_again).
The engine then classifies the row's gates again (kgate._core.classify), where a bounds/<tool> FAIL is judged
as the bounds gate's: tolerance-free; an ERROR is never held against the candidate (it makes a clean row
incomplete, the engine's rule for a counted gate that could not run).

The pass's per-request timeout (--sanitizer-timeout, DEFAULT_TIMEOUT) governs every request of the worker under
the tool, its init and build included (memcheck instruments every module loaded), and is the tool's
--launch-timeout: how long it waits for the worker to initialise CUDA. compute-sanitizer's own default, 10 s,
was shorter than a worker's python and torch imports on a busy machine on the first GPU run (2026-12-06,
H100): the tool gave up, the worker ran uninstrumented, and the parser of the time took the tool's message for
two findings (a correct row judged broken). The parser's rule is positive since the same day's sanitizer-check
run, where correct_linear's racecheck log held only "Error: Target application terminated before first
instrumented API call" and the tool's hint "Tracking kernels launched by child processes requires ...": the
list of the tool's messages of the time did not know the hint, and took it for an access (FAIL). Where the row has a time limit, the timeout is at most what is
left of it, so that one hung request cannot cut the row.

memcheck runs with the guard allocator off, the engine's buffers without guard zones and torch's caching
allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): a write just past a buffer must leave its allocation for
memcheck to see it (inside a guard zone or a cached block it is an in-bounds access). The other tools keep the
guards, so the bounds gate's own check still runs beside them."""
from __future__ import annotations

import json
import time
import traceback

# How much slower the bounds gate's calls and the build are taken to run under the tool, for the estimate that
# decides whether the pass fits in what is left of the row's time (memcheck slows kernels 10-100x; most rows'
# bounds time is host work and transfers, which it slows far less; the build loads modules, each of which it
# instruments). The worker's start is taken at twice the first run's (the tool starts and attaches to it), and
# TOOL_OVERHEAD seconds more for the tool's own start and its log at the end. On the first GPU run (H100)
# two passes took 10.6 s (memcheck) and 13.6 s (racecheck) against 9 s and 23 s of this estimate.
SLOWDOWN = 10.0
TOOL_OVERHEAD = 5.0
MARGIN = 30.0  # seconds of the row's limit the pass leaves unused (the row's record, its close)
DEFAULT_TIMEOUT = 120.0  # seconds per request of the pass (the C++ CLI's floor): instrumented kernels are slow


def tools() -> list[str]:
    from .. import _core
    return list(_core.sanitizer_tools())


def parse_tools(text: str | None) -> list[str]:
    """--sanitizer's value: comma-separated tools, each one of the engine's (kSanitizerTools); ValueError with
    one line otherwise."""
    if not text:
        return []
    known = tools()
    wanted = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in wanted if x not in known]
    if bad or not wanted:
        raise ValueError(f"--sanitizer: unknown tool {', '.join(map(repr, bad)) or repr(text)} (one of: "
                         f"{', '.join(known)})")
    return list(dict.fromkeys(wanted))


def _record(text: str) -> dict:
    from .rowjob import _gate_record
    return _gate_record(json.loads(text))


def applies(rec: dict) -> bool:
    """Whether a row has something for the pass: it was audited (not a status such as a timeout or an import
    error) and its bounds gate ran."""
    return rec.get("status") == "ok" and "classification" in rec and \
        any(g.get("gate") == "bounds" for g in rec.get("gates", []))


def run(rec: dict, spec: dict, fw_name: str, library: str | None, tool: str, elapsed: float, verify_once) -> dict:
    """The pass of `tool` over a row it applies to: appends the row's bounds/<tool> record and returns it.
    `library` is the guard allocator the row's bounds gate had (None: off); `elapsed` the row's seconds so
    far; `verify_once` is rowjob._verify_once through rowjob._verify_again (a run that raises comes back as
    a record with status SECOND_RUN_FAILED and the reason). Whatever else goes wrong in the pass is its
    record's ERROR: the pass never costs the row its other verdicts."""
    from .. import _core
    bounds = next(g for g in rec["gates"] if g.get("gate") == "bounds")
    name = f"bounds/{tool}"
    timeout = float(spec.get("sanitizer_timeout") or DEFAULT_TIMEOUT)
    t0 = time.monotonic()
    capped = ""
    exe, looked = _core.find_compute_sanitizer()
    if exe is None:
        g = _record(_core.sanitizer_missing(tool, looked))
    else:
        estimate = _estimate(rec, bounds)
        limit = spec.get("row_timeout")
        left = float(limit) - elapsed - MARGIN if limit else None
        if left is not None and estimate > left:
            g = {"gate": name, "verdict": "SKIP",
                 "summary": (f"compute-sanitizer {tool} was not run: the row had taken {elapsed:.0f} s of its "
                             f"{float(limit):.0f} s, and the pass would take about {estimate:.0f} s more")}
        else:
            if left is not None and left < timeout:  # one hung request must not cut the row at its limit
                timeout = max(1.0, float(int(left)))
                capped = " (what was left of the row's time limit)"
            try:
                g = _run_under(rec, spec, fw_name, library, tool, exe, timeout, verify_once)
            except Exception as e:  # noqa: BLE001 - the pass never costs the row its other verdicts
                g = {"gate": name, "verdict": "ERROR",
                     "summary": f"the compute-sanitizer {tool} pass failed: {type(e).__name__}: {e}"[:500],
                     "traceback": traceback.format_exc()[-3000:]}
    g["seconds"] = round(time.monotonic() - t0, 3)
    g["pass"] = f"compute-sanitizer --tool {tool} over the bounds gate's calls, {timeout:g} s per request{capped}"
    rec["gates"].append(g)
    return g


def _estimate(rec: dict, bounds: dict) -> float:
    """The pass's seconds, roughly (SLOWDOWN says from what): the worker's start, build, bounds gate and close
    under the tool, from the row's own run."""
    phases = rec.get("phases") or {}
    return (TOOL_OVERHEAD + 2 * phases.get("start", 0.0) + phases.get("close", 0.0)
            + SLOWDOWN * (phases.get("build", 0.0) + float(bounds.get("seconds") or 0.0)))


def _run_under(rec, spec, fw_name, library, tool, exe, timeout, verify_once) -> dict:
    from .. import _core
    from .rowjob import SECOND_RUN_FAILED
    memcheck = tool == "memcheck"
    # `timeout`: every request of the worker under the tool (init and build too: _verify_once), and the
    # tool's --launch-timeout
    under = {"launch_prefix": _core.sanitizer_launch_prefix(exe, tool, "{log}", timeout), "timeout": timeout,
             # memcheck: every guard off (the module's docstring says why)
             "guard_bytes": 0 if memcheck else None,
             "env": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} if memcheck else {}}
    second = verify_once({**spec, "gates": ["bounds"]}, fw_name, None if memcheck else library, tool=under)
    logs = second.pop("tool_logs", [])
    got = next((g for g in second.get("gates", []) if g.get("gate") == "bounds"), None)
    if second.get("status") != "ok" or got is None:
        # The worker never reached the bounds gate under the tool (it hung or died starting or building, the
        # tool refused to run, the run raised: rowjob._verify_again): what the tool logged is kept, the
        # candidate is not judged on it, and what the tool said about itself is named beside.
        why = second.get("message") or "the bounds gate did not run"
        g = _record(_core.sanitizer_result(tool, logs, {"gate": "bounds", "verdict": "ERROR"}, int(spec["seed"], 16)))
        if g.get("verdict") == "FAIL" and g.get("finding") == "sanitizer":
            # the tool reported an access before the run ended (memcheck ends a kernel that writes out of
            # bounds, which may end the worker): that report is the evidence, however the run ended
            g["summary"] += f"; the run under the tool then ended {second.get('status')}: {str(why)[:300]}"
            return g
        said = g.get("summary", "") if "did not instrument the worker" in g.get("summary", "") else ""
        g["verdict"] = "ERROR"
        if second.get("status") == SECOND_RUN_FAILED:
            g["summary"] = str(why)[:500]
        else:
            g["summary"] = (f"the worker could not run under compute-sanitizer --tool {tool}: "
                            f"{second.get('status')}: {str(why)[:500]}")
        if said:
            g["summary"] += f"; {said}"
        if second.get("traceback"):
            g["traceback"] = second["traceback"]
        return g
    g = _record(_core.sanitizer_result(tool, logs, got, int(spec["seed"], 16)))
    if not g.get("evidence") and got.get("evidence"):  # the bounds gate's own finding under the tool
        g["evidence"] = got["evidence"]
    if memcheck or second.get("guard_allocator"):
        g["guard_allocator"] = "off (memcheck: every guard off)" if memcheck else second["guard_allocator"]
    return g
