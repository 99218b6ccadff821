"""`python -m kgate COMMAND`: audit a corpus, and print or render what a results file says.

  audit FILE.jsonl      run every row (resumable; --shard i/N; --budget seconds)
  report RESULTS        summary tables, and --html PATH for the HTML report with plots
  sweep RESULTS         defence 2: failing kernels as every tolerance is multiplied by 1, 10, 100, 1000
  margin RESULTS        kernels whose class a tolerance ratio decides within 2x of the 100x line (needs the extension)
  agreement RESULTS     defence 3: baseline against the producer's acceptance and the public harness logic
  sample RESULTS        defence 4: a stratified sample (gate x level) with evidence, for checking by hand
  controls              defence 1: the positive controls through the same gates, over several seeds
  pack DIR|FILE ...     gzip finished records in place (X.jsonl -> X.jsonl.gz) before they are committed
"""
from __future__ import annotations

import argparse
import math
import os
import sys

# Row statuses a retry can run again (compile failures are kept in the compile file and are not retried).
RETRYABLE = ("ok", "bad_row", "no_candidate", "import_error", "import_timeout", "oracle_error", "contract_error",
             "candidate_init_error", "candidate_init_timeout", "candidate_init_crash", "row_timeout",
             "driver_crash", "judge_attacked", "gpu_out_of_memory", "case_memory_shared")
# What --retry also takes beside statuses and row keys: a selector of records (audit.py, to_retry_selected).
# unguarded: an audited row whose candidate's own allocations had no guard zones (report.unguarded), run again
# so the guard allocator's second pass (docs/audit.md, "Guard allocator") can give its bounds and coverage them.
RETRY_SELECTORS = ("unguarded",)
# The gates --gates may name, when the KernelBench gates cannot be imported to ask them.
KNOWN_GATES = ("baseline", "oracle", "nan", "inf", "determinism", "immutability", "coverage", "freshness", "stream",
               "accumulation", "shapes", "layout", "bounds", "public_harness")


class BadArgument(Exception):
    """A bad command-line argument: one line on stderr, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block) and exit status 2."""

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def _statuses(text: str | None) -> list[str] | None:
    if not text:
        return None
    wanted = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in wanted if x not in RETRYABLE and x not in RETRY_SELECTORS and "/" not in x]  # "/": a row key
    if bad:
        raise BadArgument(f"--retry: unknown row status {', '.join(map(repr, bad))} (one of: "
                          f"{', '.join(RETRYABLE + RETRY_SELECTORS)})")
    return wanted


def _findings(text: str | None) -> list[tuple[str, str]] | None:
    """--retry-finding: comma-separated GATE:FINDING pairs (a gate record's `gate` and `finding`, e.g.
    'inf:unexpected non-finite value')."""
    if not text:
        return None
    out = []
    for x in (x.strip() for x in text.split(",")):
        if not x:
            continue
        gate, sep, finding = (y.strip() for y in x.partition(":"))
        if not sep or not finding or gate.partition("/")[0] not in KNOWN_GATES:  # bounds/memcheck: a sanitizer pass's
            raise BadArgument(f"--retry-finding: {x!r} is not GATE:FINDING with GATE one of {', '.join(KNOWN_GATES)}"
                              " (or bounds/TOOL)")
        out.append((gate, finding))
    return out or None


def _sanitizer(text):
    """--sanitizer: comma-separated compute-sanitizer tools, checked against the engine's list."""
    try:
        from .kernelbench.sanitizer import parse_tools
        return parse_tools(text)
    except ImportError as e:
        raise argparse.ArgumentTypeError(f"needs kgate._core, which does not import: {e}") from None
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--sanitizer: ")) from None


def _int_in(name, lo, hi):
    def parse(text):
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants an integer, got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is outside [{lo}, {hi}]")
        return v
    parse.__name__ = name
    return parse


def _float_in(name, lo, hi, *, wants, unit="", open_below=False):
    """A parser of a finite number in [lo, hi] ((lo, hi] when open_below), its errors naming `wants`."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants {wants}, got {text!r}") from None
        if not math.isfinite(v) or not (lo < v if open_below else lo <= v) or not v <= hi:
            raise argparse.ArgumentTypeError(f"{text} is outside {'(' if open_below else '['}{lo:g}, {hi:g}]{unit}")
        return v
    parse.__name__ = name
    return parse


def _seconds_in(name, lo, hi):
    return _float_in(name, lo, hi, wants="seconds", unit=" seconds", open_below=True)


def _fraction_in(name, lo, hi):
    return _float_in(name, lo, hi, wants="a fraction")


def _seed(text):
    t = text.strip().lower()
    t = t[2:] if t.startswith("0x") else t
    if not t or len(t) > 16 or any(c not in "0123456789abcdef" for c in t):
        raise argparse.ArgumentTypeError(f"wants 1 to 16 hex digits (a 64-bit seed), got {text!r}")
    return int(t, 16)


def _gates(text):
    try:
        from .kernelbench.gates import ORDER
        known = list(ORDER)
    except Exception:  # noqa: BLE001 - the list is also known here
        known = list(KNOWN_GATES)
    names = [x.strip() for x in text.split(",")]
    if not names or any(not n for n in names):
        raise argparse.ArgumentTypeError(f"wants comma-separated gate names, got {text!r}")
    bad = [n for n in names if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown gate {', '.join(map(repr, bad))} (one of: {', '.join(known)})")
    return names


def _regular_file(what, path):
    """A file to read, given by either name of a records file (X.jsonl or X.jsonl.gz: results.find_records)."""
    from .results import find_records
    path = find_records(path) or path
    if not os.path.exists(path):
        raise BadArgument(f"{what} {path}: no such file")
    if not os.path.isfile(path):
        raise BadArgument(f"{what} {path}: not a regular file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise BadArgument(f"{what} {path}: cannot read it ({e.strerror})") from None


def _writable_file(what, path):
    """A file we may create or append to (its folder is created). Probed by opening it, as root included."""
    if os.path.isdir(path):
        raise BadArgument(f"{what} {path}: is a directory")
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.close(fd)
        if not existed:
            os.unlink(path)
    except OSError as e:
        raise BadArgument(f"{what} {path}: cannot write it ({e.strerror})") from None
    if os.path.exists(path) and not os.path.isfile(path):
        raise BadArgument(f"{what} {path}: not a regular file")


DAY = 86400.0


def main(argv=None) -> int:
    from .scheduler import DEFAULT_GPU_HEADROOM
    p = Parser(prog="python -m kgate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)

    a = sub.add_parser("audit", help="audit a corpus file")
    a.add_argument("corpus", help="the corpus: a regular, readable JSONL file")
    a.add_argument("--results", help="results JSONL (default results/<stem>.kgate.jsonl); its MAC key lives beside "
                   "it in <stem>.key (0600)")
    a.add_argument("--shard", help="i/N: this run does rows with line number %% N == i (0 <= i < N)")
    a.add_argument("--budget", type=_seconds_in("budget", 0, 30 * DAY),
                   help="seconds in (0, 30 days]: stop starting rows in time, kill the rest (rerun resumes)")
    a.add_argument("--jobs", type=_int_in("jobs", 1, 256), default=4, help="rows verified at once, 1..256")
    a.add_argument("--compile-jobs", type=_int_in("compile-jobs", 1, 256), default=8,
                   help="candidates compiled at once, 1..256")
    a.add_argument("--compile-only", action="store_true",
                   help="only compile: fill the extension cache and the compile records, verify nothing (a later "
                   "run then verifies with compilation apart)")
    a.add_argument("--fw", default="torch", choices=["torch", "numpy"])
    a.add_argument("--gpu-headroom", type=_fraction_in("gpu-headroom", 0, 0.9), default=DEFAULT_GPU_HEADROOM,
                   help="fraction of the GPU's memory, 0..0.9, kept as a margin: a row starts beside other rows "
                   "only when their expected peaks (an earlier attempt's measured peak, else a prediction from the "
                   "task's inputs), or what they hold when that is more, plus its own and the margin fit the card "
                   f"(torch; read through NVML; default {DEFAULT_GPU_HEADROOM:g}; 0: start rows regardless)")
    a.add_argument("--seed", type=_seed, help="1 to 16 hex digits: fix every row's seed (default: a secret seed "
                   "per row, recorded). It is wiped from this process's command line once read")
    a.add_argument("--row-seed", type=_seed, help="1 to 16 hex digits: the exact seed of the one row --retry KEY "
                   "names (a row record's `seed`: reproduces that row's cases); wiped from the command line too")
    a.add_argument("--gates", type=_gates, help="comma-separated subset of the gates (names checked)")
    a.add_argument("--row-timeout", type=_seconds_in("row-timeout", 0, 7 * DAY), default=600.0,
                   help="seconds in (0, 7 days] per row (default 600)")
    a.add_argument("--call-timeout", type=_seconds_in("call-timeout", 0, DAY), default=60.0,
                   help="seconds in (0, 1 day] per candidate call (default 60)")
    a.add_argument("--sanitizer", type=_sanitizer, metavar="TOOL[,TOOL]",
                   help="after each audited row's run, run the bounds gate's calls again in a fresh worker under "
                   "compute-sanitizer with these tools (memcheck, racecheck, initcheck, synccheck; memcheck with "
                   "every guard off): each gives the row a gate record bounds/<tool>, a FAIL of which is a bounds "
                   "finding; SKIP where compute-sanitizer is missing ($KGATE_COMPUTE_SANITIZER, PATH, CUDA's "
                   "bin) or the pass would not fit in the row's time. Off by default (docs/audit.md)")
    a.add_argument("--sanitizer-timeout", type=_seconds_in("sanitizer-timeout", 0, DAY), default=None,
                   help="seconds in (0, 1 day] per request of the compute-sanitizer pass (the worker's start, a "
                   "build, a call; default 120: instrumented kernels are slow)")
    a.add_argument("--ext-cache", help="compiled-extension cache folder (default build-py/ext-cache)")
    a.add_argument("--limit", type=_int_in("limit", 0, 10**9), help="at most this many new rows, 0..1e9")
    a.add_argument("--retry", help="comma-separated row statuses (e.g. row_timeout,oracle_error) or row keys "
                   "(e.g. h100/L2/T34, after a fix that concerns them), or 'unguarded' (audited rows whose candidate "
                   "ran without guard zones, once): those rows run again and each new record "
                   "replaces the old one, kept in <results>.superseded.jsonl")
    a.add_argument("--retry-finding", help="comma-separated GATE:FINDING pairs (e.g. 'nan:unexpected non-finite "
                   "value,inf:unexpected non-finite value', as a gate record's `gate` and `finding` read): rows with "
                   "a gate that failed (FAIL, CRASH, TIMEOUT) with that finding run again, after a change to how "
                   "the engine judges it; each new record replaces the old one as with --retry")
    a.add_argument("--only", help="comma-separated row keys (e.g. h100/L1/T65): audit these rows of the corpus and no "
                   "other (with --retry KEY --row-seed SEED: one row again with the cases it drew)")
    a.add_argument("--log-limit", type=_int_in("log-limit", 4096, 1 << 34), default=None,
                   help="bytes of a row's output kept in its log, 4096..16 GiB (default 4 MiB)")
    a.add_argument("--file-limit", type=_int_in("file-limit", 1 << 20, 1 << 40), default=None,
                   help="largest file, in bytes, a row job or the candidate's worker may write (its output log "
                   "included), 1 MiB..1 TiB (default 1 GiB); a writer past it ends with SIGXFSZ")
    a.add_argument("--adopt-unsigned", action="store_true",
                   help="a results file without its key file (from before records were signed, or committed "
                   "without the key of the run that wrote it): vouch for its records, which are signed as they "
                   "stand with a new key; with a key file, only records without a MAC are signed")
    a.add_argument("--html", help="also write the HTML report here when done")
    a.add_argument("--quiet", action="store_true")

    for name in ("report", "sweep", "margin", "agreement", "sample"):
        s = sub.add_parser(name)
        s.add_argument("results", nargs="+")
        if name == "report":
            s.add_argument("--html", help="write the HTML report here")
        if name == "sample":
            s.add_argument("--out", help="write the sample (Markdown) here")
            s.add_argument("--corpus", help="the corpus path its reproduce commands name (default: the row's file "
                           "under ../shared/corpus/cuda-l1/)")
            s.add_argument("--per-cell", type=_int_in("per-cell", 1, 10**6), default=2)
            s.add_argument("--seed", type=_int_in("seed", 0, 2**63 - 1), default=0)

    d = sub.add_parser("diff", help="every row whose verdict changed between two audits, with the reasons")
    d.add_argument("old")
    d.add_argument("new")
    d.add_argument("--out", help="write the diff (Markdown) here")

    c = sub.add_parser("controls", help="positive controls through the gates")
    c.add_argument("--fw", default="torch", choices=["torch", "numpy"])
    c.add_argument("--seeds", type=_int_in("seeds", 1, 1000), default=3)
    c.add_argument("--results", default=None)
    c.add_argument("--jobs", type=_int_in("jobs", 1, 256), default=4)
    c.add_argument("--ext-cache", default=None, help="compiled extensions kept here between runs")
    c.add_argument("--budget", type=float, default=None, help="seconds; rerun the same command to resume")
    c.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    c.add_argument("--matrix-only", action="store_true",
                   help="run nothing: print the matrix of the records already in --results' files")

    k = sub.add_parser("pack", help="gzip finished records in place before they are committed (scripts/results-pack)")
    k.add_argument("paths", nargs="+", help="folders (every *.jsonl under them but glr's metrics.jsonl) or files")

    # Several corpus files over many shard runs: merge, then the tables (kgate/pooled.py).
    m = sub.add_parser("merge", help="check every row of the corpora has one current record; write the pooled view")
    m.add_argument("--corpus", nargs="+", required=True, help="the corpus files (JSONL), each once")
    m.add_argument("--results", nargs="+", required=True, help="results files of any number of shard runs, each "
                   "with its .key beside it")
    m.add_argument("--out", default=os.path.join("results", "pooled.kgate.jsonl"),
                   help="the pooled view (default results/pooled.kgate.jsonl; its manifest and key beside it)")
    m.add_argument("--newest-wins", action="store_true",
                   help="a row with different records in two results files takes the newest (default: reported "
                   "as duplicated, left out, exit status 1)")
    m.add_argument("--adopt-unsigned", action="store_true",
                   help="a results file without its key file (committed without the key of the run that wrote "
                   "it): vouch for its records, taken as they stand; the manifest and every table name such "
                   "files. A file with its key beside it is verified as always")
    for name, default_out in (("pool", "pooled.md"), ("crossgpu", "crossgpu.md"), ("headline", "headline.md")):
        t = sub.add_parser(name, help={"pool": "per-file and pooled tables, and the HTML report of every file",
                                       "crossgpu": "which gates fail per task on each GPU; task or generator?",
                                       "headline": "the pooled numbers beside the published figures"}[name])
        t.add_argument("--pooled", default=os.path.join("results", "pooled.kgate.jsonl"),
                       help="the pooled view `merge` wrote")
        t.add_argument("--out", help=f"Markdown written here (default {default_out} beside the pooled view); "
                       "'-' prints it only")
        t.set_defaults(default_out=default_out)
        if name == "pool":
            t.add_argument("--html", help="the HTML report of every file and the pooled set (default pooled.html "
                           "beside the pooled view); '-' writes none")
        if name in ("pool", "crossgpu"):
            t.add_argument("--permutations", type=_int_in("permutations", 0, 10**6), default=1000,
                           help="permutations of the cross-GPU test (default 1000)")

    args = p.parse_args(argv)
    from .results import RecordsError
    try:
        return _run(args)
    except (BadArgument, RecordsError) as e:
        p.error(str(e))
    except KeyboardInterrupt:
        print(f"{p.prog}: interrupted", file=sys.stderr)
        return 130
    return 2


def _case_memory_env():
    """KGATE_CASE_MEMORY (bytes one case may take, kernelbench/casemem.py) checked before any row starts, as the
    engine reads it: a bad value is one line and exit 2 here, not a crash in every row job."""
    v = os.environ.get("KGATE_CASE_MEMORY", "")
    if v and not (v.isdigit() and v.isascii() and 1 << 20 <= int(v) < 1 << 63):
        raise BadArgument(f"KGATE_CASE_MEMORY must be a decimal number of bytes >= {1 << 20}, got {v!r}")


def _run(args) -> int:
    if args.cmd in ("merge", "pool", "crossgpu", "headline"):
        return _run_pooled(args)
    if args.cmd == "pack":
        from .results import pack_paths
        try:
            done = pack_paths(args.paths)
        except OSError as e:
            raise BadArgument(f"{e.filename}: {e.strerror}") from None
        for path, plain, packed in done:
            print(f"packed {path}: {plain} -> {packed} bytes")
        print(f"pack: {len(done)} file(s) packed, {sum(d[1] for d in done)} -> {sum(d[2] for d in done)} bytes"
              + ("" if done else " (nothing to pack)"))
        return 0
    if args.cmd == "audit":
        from .audit import RetryError, audit, default_results
        from .corpus import parse_shard
        from .results import TrustError
        from .scheduler import make_undumpable, scrub_argv
        # The driver: no other process of its uid reads its memory (the row seeds, the MAC key); its command line
        # keeps only `python -m kgate audit` for anyone reading /proc/PID/cmdline.
        if argv_is_ours():
            scrub_argv(4)
        make_undumpable()
        try:
            shard = parse_shard(args.shard)
        except ValueError as e:
            raise BadArgument(str(e)) from None
        retry = _statuses(args.retry)
        retry_findings = _findings(args.retry_finding)
        only = [x.strip() for x in (args.only or "").split(",") if x.strip()] or None
        if args.row_seed is not None and len([x for x in retry or () if "/" in x]) != 1:
            raise BadArgument("--row-seed is one row's seed: name that row, and only it, with --retry KEY")
        _regular_file("corpus", args.corpus)
        results = args.results or default_results(args.corpus)
        _writable_file("results", results)
        if args.ext_cache and os.path.exists(args.ext_cache) and not os.path.isdir(args.ext_cache):
            raise BadArgument(f"--ext-cache {args.ext_cache}: not a directory")
        if args.html:
            _writable_file("--html", args.html)
        _case_memory_env()
        try:
            counts = audit(args.corpus, results_path=results, shard=shard, budget_s=args.budget,
                           jobs=args.jobs, compile_jobs=args.compile_jobs, fw=args.fw, seed=args.seed,
                           row_seed=args.row_seed,
                           gates=args.gates, row_timeout=args.row_timeout, call_timeout=args.call_timeout,
                           ext_cache=args.ext_cache, limit=args.limit, keys=only, retry=retry,
                           retry_findings=retry_findings, quiet=args.quiet,
                           harden=True, adopt_unsigned=args.adopt_unsigned, log_limit=args.log_limit,
                           file_limit=args.file_limit, gpu_headroom=args.gpu_headroom,
                           compile_only=args.compile_only, sanitizer=args.sanitizer,
                           sanitizer_timeout=args.sanitizer_timeout)
        except (RetryError, TrustError) as e:
            raise BadArgument(str(e)) from None
        from . import report
        print(report.summary_text([counts["results"]]))
        if args.html:
            report.write_html([counts["results"]], args.html)
        return 0
    if args.cmd == "diff":
        from .verdict_diff import diff
        _regular_file("old", args.old)
        _regular_file("new", args.new)
        if args.out:
            _writable_file("--out", args.out)
        try:
            text = diff(args.old, args.new)
        except ValueError as e:
            raise BadArgument(str(e)) from None
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.cmd in ("report", "sweep", "margin", "agreement", "sample"):
        for r in args.results:
            _regular_file("results", r)
    from . import report
    if args.cmd == "report":
        if args.html:
            _writable_file("--html", args.html)
        print(report.summary_text(args.results))
        if args.html:
            report.write_html(args.results, args.html)
            print(f"wrote {args.html}")
        return 0
    if args.cmd == "sweep":
        print(report.sweep_text(args.results))
        return 0
    if args.cmd == "margin":
        from . import core_available
        if not core_available():  # the engine classifies; nothing here does
            print("kgate margin: needs the kgate._core extension (pip install ./python), which is not built here",
                  file=sys.stderr)
            return 2
        print(report.margin_text(args.results), end="")
        return 0
    if args.cmd == "agreement":
        print(report.agreement_text(args.results))
        return 0
    if args.cmd == "sample":
        if args.out:
            _writable_file("--out", args.out)
        text = report.sample_text(args.results, per_cell=args.per_cell, seed=args.seed, corpus=args.corpus)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.cmd == "controls":
        from .controls import run_controls
        ok, text = run_controls(fw=args.fw, seeds_n=args.seeds, results=args.results, jobs=args.jobs,
                                ext_cache=args.ext_cache, budget_s=args.budget, work=args.work,
                                run=not args.matrix_only)
        print(text)
        return 0 if ok else 1
    return 2


def _run_pooled(args) -> int:
    """merge, pool, crossgpu, headline: bad input is one line per problem and exit status 2; an incomplete
    merge (rows missing, stale or duplicated) writes what it has and exits 1."""
    from . import pooled
    try:
        if args.cmd == "merge":
            _writable_file("--out", args.out)
            man = pooled.merge(args.corpus, args.results, args.out, newest_wins=args.newest_wins,
                               adopt_unsigned=args.adopt_unsigned)
            print(pooled.merge_text(man, args.out))
            return 0 if man["complete"] else 1
        recs, man = pooled.load_pooled(args.pooled)
        beside = os.path.dirname(os.path.abspath(args.pooled))
        args.out = args.out or os.path.join(beside, args.default_out)
        if args.cmd == "pool":
            args.html = args.html or os.path.join(beside, "pooled.html")
        if args.cmd == "pool":
            text = pooled.pool_text(recs, man, args.pooled)
        elif args.cmd == "crossgpu":
            text = pooled.crossgpu_text(recs, man, permutations=args.permutations)
        else:
            text = pooled.headline_text(recs, man, args.pooled)
        print(text, end="")
        if args.out != "-":
            _writable_file("--out", args.out)
            print(f"{'wrote' if pooled._atomic_write(args.out, text.encode()) else 'unchanged'}: {args.out}")
        if args.cmd == "pool" and args.html != "-":
            _writable_file("--html", args.html)
            wrote = pooled.write_html(recs, man, args.pooled, args.html, permutations=args.permutations)
            print(f"{'wrote' if wrote else 'unchanged'}: {args.html}")
        return 0
    except pooled.MergeError as e:
        for line in e.problems:
            print(f"python -m kgate {args.cmd}: error: {line}", file=sys.stderr)
        return 2


def argv_is_ours() -> bool:
    """Whether this process was started as `python -m kgate ...` (then its command line may be wiped past
    `python -m kgate audit`); not when main() is called from another program."""
    try:
        words = open("/proc/self/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return len(words) >= 4 and words[1:4] == [b"-m", b"kgate", b"audit"]


if __name__ == "__main__":
    sys.exit(main())
