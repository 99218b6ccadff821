"""`python -m kgate COMMAND`: audit a corpus, and print or render what a results file says.

  audit FILE.jsonl      run every row (resumable; --shard i/N; --budget seconds)
  report RESULTS        summary tables, and --html PATH for the HTML report with plots
  sweep RESULTS         defence 2: failing kernels as every tolerance is multiplied by 1, 10, 100, 1000
  agreement RESULTS     defence 3: baseline against the producer's acceptance and the public harness logic
  sample RESULTS        defence 4: a stratified sample (gate x level) with evidence, for checking by hand
  controls              defence 1: the positive controls through the same gates, over several seeds
"""
from __future__ import annotations

import argparse
import sys


# Row statuses a retry can run again (compile failures are kept in the compile file and are not retried).
RETRYABLE = ("ok", "bad_row", "no_candidate", "import_error", "import_timeout", "oracle_error",
             "candidate_init_error", "candidate_init_timeout", "candidate_init_crash", "row_timeout",
             "driver_crash")


def _statuses(text: str | None) -> list[str] | None:
    if not text:
        return None
    wanted = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in wanted if x not in RETRYABLE and "/" not in x]  # a "/" names a row key
    if bad:
        raise ValueError(f"--retry: unknown row status {', '.join(map(repr, bad))} (one of: {', '.join(RETRYABLE)})")
    return wanted


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m kgate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    a = sub.add_parser("audit", help="audit a corpus file")
    a.add_argument("corpus")
    a.add_argument("--results", help="results JSONL (default results/<stem>.kgate.jsonl)")
    a.add_argument("--shard", help="i/N: this run does rows with line number %% N == i")
    a.add_argument("--budget", type=float, help="seconds: stop starting rows in time, kill the rest (rerun resumes)")
    a.add_argument("--jobs", type=int, default=4, help="rows verified at once")
    a.add_argument("--compile-jobs", type=int, default=8, help="candidates compiled at once")
    a.add_argument("--fw", default="torch", choices=["torch", "numpy"])
    a.add_argument("--seed", help="hex: fix every row's seed (default: a secret seed per row, recorded)")
    a.add_argument("--gates", help="comma-separated subset of gates")
    a.add_argument("--row-timeout", type=float, default=600.0)
    a.add_argument("--call-timeout", type=float, default=60.0)
    a.add_argument("--ext-cache", help="compiled-extension cache folder (default build-py/ext-cache)")
    a.add_argument("--limit", type=int, help="at most this many new rows")
    a.add_argument("--retry", help="comma-separated row statuses (e.g. row_timeout,oracle_error) or row keys "
                   "(e.g. h100/L2/T34, after a fix that concerns them): those rows run again and each new record "
                   "replaces the old one, kept in <results>.superseded.jsonl")
    a.add_argument("--html", help="also write the HTML report here when done")
    a.add_argument("--quiet", action="store_true")

    for name in ("report", "sweep", "agreement", "sample"):
        s = sub.add_parser(name)
        s.add_argument("results", nargs="+")
        if name == "report":
            s.add_argument("--html", help="write the HTML report here")
        if name == "sample":
            s.add_argument("--out", help="write the sample (Markdown) here")
            s.add_argument("--per-cell", type=int, default=2)
            s.add_argument("--seed", type=int, default=0)

    c = sub.add_parser("controls", help="positive controls through the gates")
    c.add_argument("--fw", default="torch", choices=["torch", "numpy"])
    c.add_argument("--seeds", type=int, default=3)
    c.add_argument("--results", default=None)
    c.add_argument("--jobs", type=int, default=4)

    args = p.parse_args(argv)
    if args.cmd == "audit":
        from .audit import RetryError, audit
        from .corpus import parse_shard
        try:
            shard, retry = parse_shard(args.shard), _statuses(args.retry)
        except ValueError as e:
            p.error(str(e))
        try:
            counts = audit(args.corpus, results_path=args.results, shard=shard, budget_s=args.budget,
                           jobs=args.jobs, compile_jobs=args.compile_jobs, fw=args.fw,
                           seed=int(args.seed, 16) if args.seed else None,
                           gates=args.gates.split(",") if args.gates else None, row_timeout=args.row_timeout,
                           call_timeout=args.call_timeout, ext_cache=args.ext_cache, limit=args.limit,
                           retry=retry, quiet=args.quiet)
        except RetryError as e:
            p.error(str(e))
        from . import report
        print(report.summary_text([counts["results"]]))
        if args.html:
            report.write_html([counts["results"]], args.html)
        return 0
    from . import report
    if args.cmd == "report":
        print(report.summary_text(args.results))
        if args.html:
            report.write_html(args.results, args.html)
            print(f"wrote {args.html}")
        return 0
    if args.cmd == "sweep":
        print(report.sweep_text(args.results))
        return 0
    if args.cmd == "agreement":
        print(report.agreement_text(args.results))
        return 0
    if args.cmd == "sample":
        text = report.sample_text(args.results, per_cell=args.per_cell, seed=args.seed)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.cmd == "controls":
        from .controls import run_controls
        ok, text = run_controls(fw=args.fw, seeds_n=args.seeds, results=args.results, jobs=args.jobs)
        print(text)
        return 0 if ok else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
