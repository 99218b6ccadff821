"""The bounds gate's compute-sanitizer pass over an audited row (`--sanitizer TOOL[,TOOL]`, docs/audit.md):
after the row's run, the bounds gate's calls run again in a fresh worker started under
`compute-sanitizer --tool TOOL --log-file F` (inside the same isolation as every worker: client.py,
isolation.py), through rowjob._verify_once as the guard allocator's second pass reruns its gates. The tools,
the lookup of the executable, the command, the log parser and the verdict are the C++ CLI's
(kgate/sanitizer_log.hpp through kgate._core); nothing of them is re-implemented here.

The result is the row's gate record `bounds/<tool>`: PASS when the tool reported nothing, FAIL with the first
access it reported as evidence (every one in the detail), SKIP when compute-sanitizer is missing (saying where
it looked) or the pass would overrun the row's time limit, ERROR when it could not run (a hang or crash of the
tool or the worker under it before the bounds gate ran). The engine then classifies the row's gates again
(kgate._core.classify), where a bounds/<tool> FAIL is judged as the bounds gate's: tolerance-free.

memcheck runs with the guard allocator off, the engine's buffers without guard zones and torch's caching
allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): a write just past a buffer must leave its allocation for
memcheck to see it (inside a guard zone or a cached block it is an in-bounds access). The other tools keep the
guards, so the bounds gate's own check still runs beside them."""
from __future__ import annotations

import json
import time

# How much slower the bounds gate's calls are taken to run under the tool, for the estimate that decides
# whether the pass fits in what is left of the row's time (memcheck slows kernels 10-100x; most rows' bounds
# time is host work and transfers, which it slows far less).
SLOWDOWN = 10.0
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
    far; `verify_once` is rowjob._verify_once."""
    from .. import _core
    bounds = next(g for g in rec["gates"] if g.get("gate") == "bounds")
    name = f"bounds/{tool}"
    timeout = float(spec.get("sanitizer_timeout") or DEFAULT_TIMEOUT)
    t0 = time.monotonic()
    exe, looked = _core.find_compute_sanitizer()
    if exe is None:
        g = _record(_core.sanitizer_missing(tool, looked))
    else:
        phases = rec.get("phases") or {}
        estimate = (phases.get("start", 0.0) + phases.get("build", 0.0) + phases.get("close", 0.0)
                    + SLOWDOWN * float(bounds.get("seconds") or 0.0))
        limit = spec.get("row_timeout")
        if limit and elapsed + estimate + 30 > float(limit):
            g = {"gate": name, "verdict": "SKIP",
                 "summary": (f"compute-sanitizer {tool} was not run: the row had taken {elapsed:.0f} s of its "
                             f"{float(limit):.0f} s, and the pass would take about {estimate:.0f} s more")}
        else:
            g = _run_under(rec, spec, fw_name, library, tool, exe, timeout, verify_once)
    g["seconds"] = round(time.monotonic() - t0, 3)
    g["pass"] = f"compute-sanitizer --tool {tool} over the bounds gate's calls, {timeout:g} s per request"
    rec["gates"].append(g)
    return g


def _run_under(rec, spec, fw_name, library, tool, exe, timeout, verify_once) -> dict:
    from .. import _core
    memcheck = tool == "memcheck"
    # `timeout`: every request of the worker under the tool, and the tool's --launch-timeout (how long it waits
    # for the worker to initialise CUDA: its own default, 10 s, was too short on the first GPU run)
    under = {"launch_prefix": _core.sanitizer_launch_prefix(exe, tool, "{log}", timeout), "timeout": timeout,
             # memcheck: every guard off (the module's docstring says why)
             "guard_bytes": 0 if memcheck else None,
             "env": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} if memcheck else {}}
    second = verify_once({**spec, "gates": ["bounds"]}, fw_name, None if memcheck else library, tool=under)
    logs = second.pop("tool_logs", [])
    got = next((g for g in second.get("gates", []) if g.get("gate") == "bounds"), None)
    if second.get("status") != "ok" or got is None:
        # The worker never reached the bounds gate under the tool (it hung or died starting, the tool refused
        # to run): what the tool logged is kept, the candidate is not judged on it.
        why = second.get("message") or "the bounds gate did not run"
        g = _record(_core.sanitizer_result(tool, logs, {"gate": "bounds", "verdict": "ERROR"}, int(spec["seed"], 16)))
        g["verdict"] = "ERROR"
        g["summary"] = (f"the worker could not run under compute-sanitizer --tool {tool}: "
                        f"{second.get('status')}: {str(why)[:500]}")
        return g
    g = _record(_core.sanitizer_result(tool, logs, got, int(spec["seed"], 16)))
    if not g.get("evidence") and got.get("evidence"):  # the bounds gate's own finding under the tool
        g["evidence"] = got["evidence"]
    if memcheck or second.get("guard_allocator"):
        g["guard_allocator"] = "off (memcheck: every guard off)" if memcheck else second["guard_allocator"]
    return g
